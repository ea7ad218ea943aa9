/* matmul_ws_sm80: warp-specialized GEMM in the Ampere form (bf16/f16 in, fp32 accumulate and out).
 * C[MxN] = A[MxK] * B[KxN], all row-major.
 *
 * Roles (one block = PRODUCERS producer warps + (BM/WM)*(BN/WN) consumer warps):
 *   producer warps  fill a ring of STAGES shared-memory stages with cp.async, and signal "stage s is
 *                   full" once their copies landed (cp.async.wait_group, then bar.arrive FULL(s));
 *   consumer warps  wait for FULL(s) with bar.sync, run mma.sync on the stage, and signal "stage s is
 *                   empty" with bar.arrive EMPTY(s); the producer waits for it with bar.sync before
 *                   refilling stage s.
 * Named barrier ids: 0 is __syncthreads, FULL(s) = 1 + s, EMPTY(s) = 1 + STAGES + s (so STAGES <= 7).
 * Both barriers of a stage count all PRODUCERS*32 + CONSUMERS*32 threads.
 *
 * Why it cannot deadlock: the producer signals FULL for tile kt - LAG right after issuing tile kt
 * (LAG = STAGES - 1 groups stay in flight), so FULL(kt - STAGES) was signalled in step kt - 1, before
 * the producer waits for EMPTY of that same tile in step kt. Each barrier instance is completed before
 * it is reused: FULL(s) for tile j + STAGES is only arrived after EMPTY(s) for tile j, which consumers
 * give only after passing FULL(s) for tile j. Consumers skip EMPTY for the last STAGES tiles (nobody
 * waits for them), so no barrier is left half-arrived at exit.
 *
 * Entry: extern "C" kb_matmul(const void* A, const void* B, float* C, int M, int N, int K), grid
 * (ceil(N/BN), ceil(M/BM)), block (PRODUCERS + CONSUMERS) * 32, dynamic shared STAGES*(BM*BK+BK*BN)*2.
 * Needs K % 8 == 0 and N % 8 == 0. */
#include "kb_portability.h"
#include "kb_mma_sm80.h"

#ifndef KB_BM
#define KB_BM 128
#endif
#ifndef KB_BN
#define KB_BN 128
#endif
#ifndef KB_BK
#define KB_BK 32
#endif
#ifndef KB_WM
#define KB_WM 64
#endif
#ifndef KB_WN
#define KB_WN 32
#endif
#ifndef KB_STAGES
#define KB_STAGES 4
#endif
#ifndef KB_PRODUCERS
#define KB_PRODUCERS 1
#endif

namespace {

// The layout: tile sizes, roles and the shared-memory budget in one place.
struct Layout {
  static constexpr int BM = KB_BM, BN = KB_BN, BK = KB_BK, WM = KB_WM, WN = KB_WN, STAGES = KB_STAGES;
  static constexpr int PRODUCER_WARPS = KB_PRODUCERS;
  static constexpr int WARPS_N = BN / WN;
  static constexpr int CONSUMER_WARPS = (BM / WM) * WARPS_N;
  static constexpr int PRODUCER_THREADS = PRODUCER_WARPS * 32, CONSUMER_THREADS = CONSUMER_WARPS * 32;
  static constexpr int THREADS = PRODUCER_THREADS + CONSUMER_THREADS;
  static constexpr int LAG = STAGES - 1;  // copy groups a producer keeps in flight
  typedef kb_stage_layout<BM, BN, BK> Stage;
  static constexpr int SMEM_BYTES = STAGES * Stage::BYTES;

  KB_HD static constexpr kb_u32 full_bar(int s) { return 1 + s; }
  KB_HD static constexpr kb_u32 empty_bar(int s) { return 1 + STAGES + s; }

  static_assert(BM % WM == 0 && BN % WN == 0, "WM must divide BM and WN must divide BN");
  static_assert(STAGES >= 2 && 1 + 2 * STAGES <= 16, "STAGES in 2..7 (16 hardware named barriers)");
  static_assert(PRODUCER_WARPS >= 1 && THREADS <= 1024, "1..32 warps per block");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory budget: 227 KiB per block");
};

// Producer role: refill stages in order; FULL is signalled LAG tiles behind the issue point.
KB_DEV void producer(kb_u32 smem, const kb_u16* A, const kb_u16* B, int M, int N, int K, int m0, int n0, int KT,
                     int t) {
  typedef Layout L;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % L::STAGES;
    if (kt >= L::STAGES) kb_named_sync(L::empty_bar(s), L::THREADS);  // consumers released tile kt-STAGES
    kb_load_stage<L::BM, L::BN, L::BK>(smem + s * L::Stage::BYTES, A, B, M, N, K, m0, n0, kt * L::BK, t,
                                       L::PRODUCER_THREADS);
    kb_cp_async_commit();
    const int ready = kt - L::LAG;
    if (ready >= 0) {
      kb_cp_async_wait<L::LAG>();  // tile `ready` (and older) has landed for this thread
      kb_named_arrive(L::full_bar(ready % L::STAGES), L::THREADS);
    }
  }
  kb_cp_async_wait<0>();
  for (int ready = KT - L::LAG < 0 ? 0 : KT - L::LAG; ready < KT; ++ready)
    kb_named_arrive(L::full_bar(ready % L::STAGES), L::THREADS);
}

// Consumer role: one warp's WM x WN tile, accumulated over all K tiles, then stored.
KB_DEV void consumer(kb_u32 smem, float* C, int M, int N, int m0, int n0, int KT, int warp, int lane) {
  typedef Layout L;
  const int wm0 = (warp / L::WARPS_N) * L::WM, wn0 = (warp % L::WARPS_N) * L::WN;
  float acc[L::WM / 16][L::WN / 8][4];
#pragma unroll
  for (int i = 0; i < L::WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < L::WN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % L::STAGES;
    kb_named_sync(L::full_bar(s), L::THREADS);
    kb_warp_mma_stage<L::BM, L::BN, L::BK, L::WM, L::WN>(acc, smem + s * L::Stage::BYTES, wm0, wn0, lane);
    if (kt + L::STAGES < KT) kb_named_arrive(L::empty_bar(s), L::THREADS);
  }
  kb_store_warp_tile<L::WM, L::WN>(C, acc, M, N, m0 + wm0, n0 + wn0, lane);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(Layout::THREADS)
    kb_matmul(const void* A_, const void* B_, float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __attribute__((aligned(128))) unsigned char kb_smem[];
  const kb_u32 smem = kb_smem_addr(kb_smem);
  const int t = (int)kb_tid_x(), warp = t / 32, lane = t % 32;
  const int m0 = (int)kb_ctaid_y() * Layout::BM, n0 = (int)kb_ctaid_x() * Layout::BN;
  const int KT = (K + Layout::BK - 1) / Layout::BK;
  if (warp < Layout::PRODUCER_WARPS)
    producer(smem, (const kb_u16*)A_, (const kb_u16*)B_, M, N, K, m0, n0, KT, t);
  else
    consumer(smem, C, M, N, m0, n0, KT, warp - Layout::PRODUCER_WARPS, lane);
}
