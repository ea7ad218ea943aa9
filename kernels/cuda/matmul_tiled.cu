/* matmul_tiled: C[MxN] (fp32) = A[MxK] * B[KxN], row-major, fp32 accumulate.
 *
 *   -DKB_DTYPE_F32:          SIMT kernel. Block tile BM x BN, depth BK; each thread computes TM x TN
 *                            outputs (rows strided by BM/TM, columns by BN/TN so shared reads and global
 *                            stores are consecutive across a warp). Static shared memory; any M, N, K.
 *   -DKB_DTYPE_BF16 / F16:   tensor-core kernel. (BM/WM) x (BN/WN) warps, each a WM x WN tile of
 *                            mma.sync m16n8k16 fragments loaded with ldmatrix from a swizzled layout that
 *                            a STAGES-deep cp.async pipeline fills. Dynamic shared memory
 *                            STAGES * (BM*BK + BK*BN) * 2 bytes. Needs K % 8 == 0 and N % 8 == 0.
 *
 * Entry: extern "C" kb_matmul(const void* A, const void* B, float* C, int M, int N, int K), grid
 * (ceil(N/BN), ceil(M/BM)). Parameters arrive as -DKB_<NAME>=value. */
#include "kb_portability.h"

#ifndef KB_BM
#define KB_BM 128
#endif
#ifndef KB_BN
#define KB_BN 128
#endif
#ifndef KB_BK
#define KB_BK 32
#endif

#if defined(KB_DTYPE_F32)
/* ------------------------------------------------------------------ fp32 SIMT */
#ifndef KB_TM
#define KB_TM 8
#endif
#ifndef KB_TN
#define KB_TN 8
#endif

namespace {
constexpr int BM = KB_BM, BN = KB_BN, BK = KB_BK, TM = KB_TM, TN = KB_TN;
constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
static_assert(BM % TM == 0 && BN % TN == 0, "TM must divide BM and TN must divide BN");
static_assert(THREADS >= 32 && THREADS <= 1024, "(BM/TM)*(BN/TN) threads must be in 32..1024");
}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
    kb_matmul(const void* A_, const void* B_, float* __restrict__ C, int M, int N, int K) {
  const float* __restrict__ A = (const float*)A_;
  const float* __restrict__ B = (const float*)B_;
  __shared__ float As[BK][BM];  // transposed: a thread's TM rows are read as one broadcast column
  __shared__ float Bs[BK][BN];
  const int t = (int)kb_tid_x();
  const int tx = t % TX, ty = t / TX;
  const int m0 = (int)kb_ctaid_y() * BM, n0 = (int)kb_ctaid_x() * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int c = t; c < BM * BK; c += THREADS) {
      const int r = c / BK, k = c % BK;
      const int gr = m0 + r, gk = k0 + k;
      As[k][r] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.f;
    }
    for (int c = t; c < BK * BN; c += THREADS) {
      const int k = c / BN, n = c % BN;
      const int gk = k0 + k, gn = n0 + n;
      Bs[k][n] = (gk < K && gn < N) ? B[(long long)gk * N + gn] : 0.f;
    }
    kb_sync_block();
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty + i * TY];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + j * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    kb_sync_block();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + ty + i * TY;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = n0 + tx + j * TX;
      if (col < N) C[(long long)row * N + col] = acc[i][j];
    }
  }
}

#else
/* ------------------------------------------------------------------ bf16 / f16 tensor cores */
#include "kb_mma_sm80.h"

#ifndef KB_WM
#define KB_WM 64
#endif
#ifndef KB_WN
#define KB_WN 64
#endif
#ifndef KB_STAGES
#define KB_STAGES 3
#endif

namespace {
constexpr int BM = KB_BM, BN = KB_BN, BK = KB_BK, WM = KB_WM, WN = KB_WN, STAGES = KB_STAGES;
constexpr int WARPS_N = BN / WN, WARPS = (BM / WM) * WARPS_N, THREADS = WARPS * 32;
typedef kb_stage_layout<BM, BN, BK> Stage;
static_assert(BM % WM == 0 && BN % WN == 0, "WM must divide BM and WN must divide BN");
static_assert(THREADS <= 1024, "too many warps");
static_assert(STAGES >= 2, "the pipeline needs at least 2 stages");
static_assert((long long)STAGES * Stage::BYTES <= 227 * 1024, "shared memory budget: 227 KiB per block");
}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
    kb_matmul(const void* A_, const void* B_, float* __restrict__ C, int M, int N, int K) {
  const kb_u16* __restrict__ A = (const kb_u16*)A_;
  const kb_u16* __restrict__ B = (const kb_u16*)B_;
  extern __shared__ __attribute__((aligned(128))) unsigned char kb_smem[];
  const kb_u32 smem = kb_smem_addr(kb_smem);
  const int t = (int)kb_tid_x(), warp = t / 32, lane = t % 32;
  const int m0 = (int)kb_ctaid_y() * BM, n0 = (int)kb_ctaid_x() * BN;
  const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
  const int KT = (K + BK - 1) / BK;

  float acc[WM / 16][WN / 8][4];
#pragma unroll
  for (int i = 0; i < WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < WN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Prologue: tiles 0 .. STAGES-2 in flight, one commit group each (empty groups keep the count).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) kb_load_stage<BM, BN, BK>(smem + s * Stage::BYTES, A, B, M, N, K, m0, n0, s * BK, t, THREADS);
    kb_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    // Groups committed so far: STAGES-1+kt; tile kt is group kt, so at most STAGES-2 may stay pending.
    kb_cp_async_wait<STAGES - 2>();
    // Everyone's copies of tile kt are visible, and everyone finished computing tile kt-1, whose
    // stage is the one refilled next.
    kb_sync_block();
    const int next = kt + STAGES - 1;
    if (next < KT)
      kb_load_stage<BM, BN, BK>(smem + (next % STAGES) * Stage::BYTES, A, B, M, N, K, m0, n0, next * BK, t,
                                THREADS);
    kb_cp_async_commit();
    kb_warp_mma_stage<BM, BN, BK, WM, WN>(acc, smem + (kt % STAGES) * Stage::BYTES, wm0, wn0, lane);
  }
  kb_cp_async_wait<0>();
  kb_store_warp_tile<WM, WN>(C, acc, M, N, m0 + wm0, n0 + wn0, lane);
}
#endif
