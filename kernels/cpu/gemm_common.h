// Shared pieces of the CPU GEMM kernels: element loads by dtype, panel packing and the register-tiled
// MRxNR micro-kernel. Portable C++ only: the compiler under test decides vectorization and scheduling.
#pragma once
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cstddef>
#include <new>

#include "kb_cpu_kernel.h"

#ifndef KB_BM
#define KB_BM 96
#endif
#ifndef KB_BN
#define KB_BN 512
#endif
#ifndef KB_BK
#define KB_BK 256
#endif
#ifndef KB_MR
#define KB_MR 6
#endif
#ifndef KB_NR
#define KB_NR 32
#endif

namespace kbk {

constexpr int64_t BM = KB_BM, BN = KB_BN, BK = KB_BK, MR = KB_MR, NR = KB_NR;
static_assert(BM % MR == 0, "MR must divide BM");
static_assert(BN % NR == 0, "NR must divide BN");

#if defined(KB_DTYPE_BF16)
using elem_t = uint16_t;
inline float load(const elem_t* p, int64_t i) {
  uint32_t u = uint32_t(p[i]) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
#else
using elem_t = float;
inline float load(const elem_t* p, int64_t i) { return p[i]; }
#endif

// Packs A[i0:i0+mc, k0:k0+kc] into MR-row strips: strip s holds, for each k, MR consecutive rows.
// Rows past mc are zero so the micro-kernel never branches.
inline void pack_a(const elem_t* A, int64_t lda, int64_t i0, int64_t k0, int64_t mc, int64_t kc, float* dst) {
  for (int64_t s = 0; s < mc; s += MR) {
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t r = 0; r < MR; ++r)
        dst[k * MR + r] = (s + r < mc) ? load(A, (i0 + s + r) * lda + k0 + k) : 0.0f;
    dst += kc * MR;
  }
}

// Packs B[k0:k0+kc, j0:j0+nc] into NR-column strips: strip s holds, for each k, NR consecutive columns.
inline void pack_b(const elem_t* B, int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc, float* dst) {
  for (int64_t s = 0; s < nc; s += NR) {
    int64_t w = std::min<int64_t>(NR, nc - s);
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t row = (k0 + k) * ldb + j0 + s;
      for (int64_t c = 0; c < w; ++c) dst[k * NR + c] = load(B, row + c);
      for (int64_t c = w; c < NR; ++c) dst[k * NR + c] = 0.0f;
    }
    dst += kc * NR;
  }
}

// C[0:mr, 0:nr] (+)= packed A strip (kc x MR) * packed B strip (kc x NR).
inline void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b, float* __restrict C,
                         int64_t ldc, int64_t mr, int64_t nr, bool accumulate) {
  float acc[MR][NR];
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t c = 0; c < NR; ++c) acc[r][c] = 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * NR;
    const float* ak = a + k * MR;
    for (int64_t r = 0; r < MR; ++r) {
      const float av = ak[r];
      for (int64_t c = 0; c < NR; ++c) acc[r][c] += av * bk[c];
    }
  }
  if (mr == MR && nr == NR) {
    for (int64_t r = 0; r < MR; ++r)
      for (int64_t c = 0; c < NR; ++c) C[r * ldc + c] = accumulate ? C[r * ldc + c] + acc[r][c] : acc[r][c];
  } else {
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t c = 0; c < nr; ++c) C[r * ldc + c] = accumulate ? C[r * ldc + c] + acc[r][c] : acc[r][c];
  }
}

// One cache block: C[i0:i0+mc, j0:j0+nc] (+)= packedA (mc x kc) * packedB (kc x nc).
inline void block_multiply(const float* pa, const float* pb, float* C, int64_t ldc, int64_t i0, int64_t j0,
                           int64_t mc, int64_t nc, int64_t kc, bool accumulate) {
  for (int64_t j = 0; j < nc; j += NR) {
    const float* b = pb + (j / NR) * kc * NR;
    for (int64_t i = 0; i < mc; i += MR) {
      const float* a = pa + (i / MR) * kc * MR;
      micro_kernel(kc, a, b, C + (i0 + i) * ldc + j0 + j, ldc, std::min(MR, mc - i), std::min(NR, nc - j), accumulate);
    }
  }
}

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// A 64-byte aligned float buffer owned by one kb_gemm call. Allocated per call (no thread_local or
// static state), so a kernel .so can be dlclose'd at any time and called from several threads.
class FloatBuffer {
 public:
  explicit FloatBuffer(int64_t n)
      : p_(static_cast<float*>(::operator new(size_t(n) * sizeof(float), std::align_val_t{64}))) {}
  ~FloatBuffer() { ::operator delete(p_, std::align_val_t{64}); }
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  float* data() const { return p_; }

 private:
  float* p_;
};

}  // namespace kbk
