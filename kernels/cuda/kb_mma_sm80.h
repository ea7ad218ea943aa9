/* Ampere tensor-core building blocks shared by matmul_tiled (bf16/f16 path) and matmul_ws_sm80:
 * cp.async 16-byte copies into a swizzled shared layout, ldmatrix fragment loads, mma.sync m16n8k16,
 * and the fp32 epilogue. Row-major A (MxK), row-major B (KxN), row-major fp32 C (MxN).
 *
 * Shared layout of one stage: A tile BM x BK, then B tile BK x BN, both row-major in 16-byte chunks
 * with the chunk index XOR-swizzled by the row (kb_swizzle), so that the 8 row addresses of every
 * ldmatrix 8x8 matrix fall in 8 different 16-byte bank groups.
 *
 * Preconditions checked by the backend (check_shape): K % 8 == 0 and N % 8 == 0 (a 16-byte chunk is
 * either wholly inside or wholly outside the matrix); M is free. Out-of-range chunks are zero-filled
 * by cp.async (src-size 0) and out-of-range C elements are not stored. */
#ifndef KB_MMA_SM80_H
#define KB_MMA_SM80_H
#include "kb_portability.h"

#if defined(KB_DTYPE_BF16)
#define KB_MMA_AB "bf16"
#elif defined(KB_DTYPE_F16)
#define KB_MMA_AB "f16"
#else
#error "kb_mma_sm80.h needs KB_DTYPE_BF16 or KB_DTYPE_F16"
#endif

struct __attribute__((aligned(8))) kb_float2 {
  float x, y;
};

/* Chunk (16-byte unit) index of (row, chunk) in a row-major tile with CPR chunks per row. */
template <int CPR>
KB_DEV int kb_swizzle(int row, int chunk) {
  static_assert(CPR == 2 || CPR == 4 || CPR % 8 == 0, "rows must hold 2, 4 or a multiple of 8 chunks");
  constexpr int group = CPR >= 8 ? 1 : 8 / CPR;  // rows sharing one 128-byte line
  constexpr int mask = (CPR >= 8 ? 8 : CPR) - 1;
  return row * CPR + (chunk ^ ((row / group) & mask));
}

KB_DEV void kb_cp_async16(kb_u32 dst, const void* src, bool in_range) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(in_range ? 16 : 0)
               : "memory");
}
KB_DEV void kb_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
KB_DEV void kb_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

KB_DEV void kb_ldmatrix_x4(kb_u32 (&r)[4], kb_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
KB_DEV void kb_ldmatrix_x4_trans(kb_u32 (&r)[4], kb_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* D += A(16x16, row) * B(16x8, col), fp32 accumulate. */
KB_DEV void kb_mma_16816(float (&d)[4], const kb_u32 (&a)[4], kb_u32 b0, kb_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KB_MMA_AB "." KB_MMA_AB
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Geometry of a BM x BN x BK stage in shared memory. */
template <int BM, int BN, int BK>
struct kb_stage_layout {
  static_assert(BM % 16 == 0 && BN % 16 == 0 && BK % 16 == 0, "tile sizes must be multiples of 16");
  static constexpr int A_CPR = BK / 8;
  static constexpr int B_CPR = BN / 8;
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BK * BN * 2;
  static constexpr int BYTES = A_BYTES + B_BYTES;
};

/* Issues the cp.async copies of one stage: A rows m0.., B columns n0.., depth k0.. . Thread `t` of
 * `nthreads` cooperating threads. */
template <int BM, int BN, int BK>
KB_DEV void kb_load_stage(kb_u32 stage, const kb_u16* __restrict__ A, const kb_u16* __restrict__ B, int M, int N,
                          int K, int m0, int n0, int k0, int t, int nthreads) {
  typedef kb_stage_layout<BM, BN, BK> L;
  const kb_u32 sA = stage, sB = stage + L::A_BYTES;
  for (int c = t; c < BM * L::A_CPR; c += nthreads) {
    const int r = c / L::A_CPR, ch = c % L::A_CPR;
    const int gr = m0 + r, gk = k0 + ch * 8;
    const bool ok = gr < M && gk < K;
    const kb_u16* src = ok ? A + (long long)gr * K + gk : A;
    kb_cp_async16(sA + kb_swizzle<L::A_CPR>(r, ch) * 16, src, ok);
  }
  for (int c = t; c < BK * L::B_CPR; c += nthreads) {
    const int r = c / L::B_CPR, ch = c % L::B_CPR;
    const int gk = k0 + r, gn = n0 + ch * 8;
    const bool ok = gk < K && gn < N;
    const kb_u16* src = ok ? B + (long long)gk * N + gn : B;
    kb_cp_async16(sB + kb_swizzle<L::B_CPR>(r, ch) * 16, src, ok);
  }
}

/* One warp's WM x WN sub-tile at (wm0, wn0) inside the block tile: accumulate the whole BK depth of
 * one stage. acc[mi][ni] is the m16n8 fragment at rows wm0+16mi, columns wn0+8ni. */
template <int BM, int BN, int BK, int WM, int WN>
KB_DEV void kb_warp_mma_stage(float (&acc)[WM / 16][WN / 8][4], kb_u32 stage, int wm0, int wn0, int lane) {
  typedef kb_stage_layout<BM, BN, BK> L;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16x16");
  constexpr int MI = WM / 16, NI = WN / 8;
  const kb_u32 sA = stage, sB = stage + L::A_BYTES;
#pragma unroll
  for (int kk = 0; kk < BK; kk += 16) {
    kb_u32 a[MI][4];
    kb_u32 b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int row = wm0 + mi * 16 + (lane % 16);
      const int ch = (kk + (lane / 16) * 8) / 8;
      kb_ldmatrix_x4(a[mi], sA + kb_swizzle<L::A_CPR>(row, ch) * 16);
    }
#pragma unroll
    for (int ni = 0; ni < NI; ni += 2) {
      const int krow = kk + (lane % 16);
      const int ch = (wn0 + ni * 8 + (lane / 16) * 8) / 8;
      kb_u32 r[4];
      kb_ldmatrix_x4_trans(r, sB + kb_swizzle<L::B_CPR>(krow, ch) * 16);
      b[ni][0] = r[0];
      b[ni][1] = r[1];
      b[ni + 1][0] = r[2];
      b[ni + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) kb_mma_16816(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
  }
}

/* Stores a warp's accumulators to C (fp32, row-major), skipping rows >= M and columns >= N. */
template <int WM, int WN>
KB_DEV void kb_store_warp_tile(float* __restrict__ C, const float (&acc)[WM / 16][WN / 8][4], int M, int N,
                               int row0, int col0, int lane) {
#pragma unroll
  for (int mi = 0; mi < WM / 16; ++mi)
#pragma unroll
    for (int ni = 0; ni < WN / 8; ++ni) {
      const int row = row0 + mi * 16 + lane / 4;
      const int col = col0 + ni * 8 + 2 * (lane % 4);
      if (col >= N) continue;  // N % 8 == 0, so col < N implies col + 1 < N
      if (row < M) *(kb_float2*)(C + (long long)row * N + col) = kb_float2{acc[mi][ni][0], acc[mi][ni][1]};
      if (row + 8 < M)
        *(kb_float2*)(C + (long long)(row + 8) * N + col) = kb_float2{acc[mi][ni][2], acc[mi][ni][3]};
    }
}

#endif /* KB_MMA_SM80_H */
