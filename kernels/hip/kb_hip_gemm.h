// Pieces shared by the HIP GEMM kernels (matmul_tiled.hip, matmul_ws.hip): the dtype, tile copies
// global -> registers -> LDS, MFMA fragments and the epilogue. Row-major C[MxN] = A[MxK] * B[KxN],
// fp32 accumulation. The entry signature of every HIP kernel is
//   (const void* A, const void* B, float* C, int M, int N, int K)
// with A and B holding 16-bit bit patterns (f16/bf16) or fp32, as the dtype macro says.
#pragma once
#include "common/kb_portability.h"

#if defined(KB_DTYPE_F16) + defined(KB_DTYPE_BF16) + defined(KB_DTYPE_F32) != 1
#error "define exactly one of KB_DTYPE_F16, KB_DTYPE_BF16, KB_DTYPE_F32"
#endif

namespace kbh {

constexpr int kPad16 = 8;  // LDS row padding in 16-bit elements: keeps rows 16-byte aligned, staggers banks

// One 16-byte vector of eight 16-bit elements, or zeros where the vector lies outside the matrix.
// The caller guarantees that a vector is either wholly inside or wholly outside (cols % 8 == 0).
KB_DEVICE kb_uint4 load_vec8(const kb_u16* KB_RESTRICT src, kb_i64 ld, kb_i64 row, kb_i64 col, kb_i64 rows,
                             kb_i64 cols) {
  kb_uint4 v = {0u, 0u, 0u, 0u};
  if (row < rows && col < cols) v = *reinterpret_cast<const kb_uint4*>(src + row * ld + col);
  return v;
}

// A ROWS x COLS tile of 16-bit elements, copied by THREADS threads (from thread index `t`) as 16-byte
// vectors: global -> registers (load) and registers -> LDS (store), so a load can be in flight while
// the previous tile is used.
template <int ROWS, int COLS, int THREADS>
struct Tile16 {
  static constexpr int kVecsPerRow = COLS / 8;
  static constexpr int kVecs = ROWS * kVecsPerRow;
  static constexpr int kPerThread = (kVecs + THREADS - 1) / THREADS;
  static constexpr int kLd = COLS + kPad16;         // LDS leading dimension (elements)
  static constexpr int kLdsElems = ROWS * kLd;
  static_assert(COLS % 8 == 0, "tile columns must be a multiple of 8 (16-byte vectors)");

  kb_uint4 regs[kPerThread];

  KB_DEVICE_MEMBER void load(const kb_u16* KB_RESTRICT src, kb_i64 ld, kb_i64 row0, kb_i64 col0, kb_i64 rows,
                             kb_i64 cols, int t) {
    KB_UNROLL for (int i = 0; i < kPerThread; ++i) {
      int v = t + i * THREADS;
      if (kVecs % THREADS == 0 || v < kVecs) {
        int r = v / kVecsPerRow, c = (v % kVecsPerRow) * 8;
        regs[i] = load_vec8(src, ld, row0 + r, col0 + c, rows, cols);
      }
    }
  }
  KB_DEVICE_MEMBER void store(kb_u16* lds, int t) const {
    KB_UNROLL for (int i = 0; i < kPerThread; ++i) {
      int v = t + i * THREADS;
      if (kVecs % THREADS == 0 || v < kVecs) {
        int r = v / kVecsPerRow, c = (v % kVecsPerRow) * 8;
        *reinterpret_cast<kb_uint4*>(lds + r * kLd + c) = regs[i];
      }
    }
  }
};

// The MFMA instruction form: MF = 32 (32x32x8) or 16 (16x16x16).
template <int MF>
struct Mfma;

template <>
struct Mfma<32> {
  typedef kb_float16 Acc;
  static constexpr int kK = 8;      // K per instruction
  static constexpr int kRegs = 16;  // accumulator registers per lane
  KB_DEVICE_MEMBER static Acc mma(kb_short4 a, kb_short4 b, Acc c) {
#if defined(KB_DTYPE_BF16)
    return kb_mfma_32x32x8_bf16(a, b, c);
#else
    return kb_mfma_32x32x8_f16(a, b, c);
#endif
  }
  KB_DEVICE_MEMBER static int row(int r, int lane) { return 8 * (r / 4) + 4 * (lane / 32) + (r % 4); }
};

template <>
struct Mfma<16> {
  typedef kb_float4 Acc;
  static constexpr int kK = 16;
  static constexpr int kRegs = 4;
  KB_DEVICE_MEMBER static Acc mma(kb_short4 a, kb_short4 b, Acc c) {
#if defined(KB_DTYPE_BF16)
    return kb_mfma_16x16x16_bf16(a, b, c);
#else
    return kb_mfma_16x16x16_f16(a, b, c);
#endif
  }
  KB_DEVICE_MEMBER static int row(int r, int lane) { return 4 * (lane / 16) + r; }
};

// A wave's RM x RN grid of MF x MF accumulator blocks, fed from LDS tiles
//   As: [BM rows][lda] (K contiguous),  Bs: [BK rows][ldb] (N contiguous).
template <int MF, int RM, int RN>
struct WaveTile {
  typedef Mfma<MF> Op;
  typename Op::Acc acc[RM][RN];

  KB_DEVICE_MEMBER void zero() {
    KB_UNROLL for (int i = 0; i < RM; ++i) KB_UNROLL for (int j = 0; j < RN; ++j) acc[i][j] = typename Op::Acc{};
  }

  // Multiplies the wave's rows [row0, row0 + RM*MF) of As by columns [col0, col0 + RN*MF) of Bs over
  // k in [0, BK).
  template <int BK>
  KB_DEVICE_MEMBER void mma(const kb_u16* As, int lda, const kb_u16* Bs, int ldb, int row0, int col0, int lane) {
    const int li = lane % MF, lk = 4 * (lane / MF);
    KB_UNROLL for (int k = 0; k < BK; k += Op::kK) {
      kb_short4 a[RM], b[RN];
      KB_UNROLL for (int i = 0; i < RM; ++i) {
        const kb_u16* p = As + (row0 + i * MF + li) * lda + k + lk;
        a[i] = *reinterpret_cast<const kb_short4*>(p);  // 4 consecutive k: one 8-byte LDS read
      }
      KB_UNROLL for (int j = 0; j < RN; ++j) {
        const kb_u16* p = Bs + (k + lk) * ldb + col0 + j * MF + li;
        b[j] = kb_short4{short(p[0]), short(p[ldb]), short(p[2 * ldb]), short(p[3 * ldb])};
      }
      KB_UNROLL for (int i = 0; i < RM; ++i) KB_UNROLL for (int j = 0; j < RN; ++j) acc[i][j] =
          Op::mma(a[i], b[j], acc[i][j]);
    }
  }

  // Writes the accumulators to C rows m0.., columns n0.. (bounds-checked).
  KB_DEVICE_MEMBER void store(float* KB_RESTRICT C, int M, int N, kb_i64 m0, kb_i64 n0, int lane) const {
    KB_UNROLL for (int i = 0; i < RM; ++i) KB_UNROLL for (int j = 0; j < RN; ++j) {
      kb_i64 col = n0 + j * MF + lane % MF;
      KB_UNROLL for (int r = 0; r < Op::kRegs; ++r) {
        kb_i64 row = m0 + i * MF + Op::row(r, lane);
        if (row < M && col < N) C[row * N + col] = acc[i][j][r];
      }
    }
  }
};

}  // namespace kbh
