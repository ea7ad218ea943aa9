// Wave-specialized GEMM for AMD CDNA (gfx90a, gfx94x): the AMD form of warp specialization.
// A workgroup has PW producer waves and CWM x CWN consumer waves:
//   producers stream A/B tiles global -> LDS into a STAGES-deep ring of slots;
//   consumers run MFMA on filled slots and hand them back.
// Hand-off is through two LDS counters per slot (no workgroup barrier after the start):
//   full[s]  += 1 by each producer wave when its part of slot s is written (release);
//   empty[s] += 1 by each consumer wave when it has finished reading slot s (release).
// Use n (= kt / STAGES) of slot s may be filled once empty[s] >= n * CONSUMERS and read once
// full[s] >= (n + 1) * PW; counters only grow, so no phase bits are needed.
// f16 / bf16 only. Parameters arrive as -DKB_<NAME>=<value>; M, N, K at run time (K, N multiples of 8).
#include "hip/kb_hip_gemm.h"

#if defined(KB_DTYPE_F32)
#error "matmul_ws is an MFMA kernel: f16 or bf16 only"
#endif

#ifndef KB_BM
#define KB_BM 128
#endif
#ifndef KB_BN
#define KB_BN 128
#endif
#ifndef KB_BK
#define KB_BK 32
#endif
#ifndef KB_STAGES
#define KB_STAGES 3
#endif
#ifndef KB_PW
#define KB_PW 1
#endif
#ifndef KB_CWM
#define KB_CWM 2
#endif
#ifndef KB_CWN
#define KB_CWN 2
#endif
#ifndef KB_MFMA
#define KB_MFMA 32
#endif
#ifndef KB_OCC
#define KB_OCC 0  // minimum waves per SIMD asked of the register allocator (0: compiler's choice)
#endif

// The shared-memory layout: a ring of STAGES slots (A tile + B tile) and the two counter arrays.
struct WsLayout {
  static constexpr int BM = KB_BM, BN = KB_BN, BK = KB_BK, STAGES = KB_STAGES, MF = KB_MFMA;
  static constexpr int PRODUCERS = KB_PW, CONSUMERS = KB_CWM * KB_CWN;
  static constexpr int PRODUCER_THREADS = PRODUCERS * KB_WAVE_SIZE;
  static constexpr int THREADS = (PRODUCERS + CONSUMERS) * KB_WAVE_SIZE;
  static constexpr int WTM = BM / KB_CWM, WTN = BN / KB_CWN;  // consumer wave tile
  typedef kbh::Tile16<BM, BK, PRODUCER_THREADS> TileA;
  typedef kbh::Tile16<BK, BN, PRODUCER_THREADS> TileB;
  static constexpr int SLOT_ELEMS = TileA::kLdsElems + TileB::kLdsElems;
  static constexpr int LDS_BYTES = STAGES * SLOT_ELEMS * 2 + 2 * STAGES * 4;

  static_assert(STAGES >= 2, "the ring needs at least two slots");
  static_assert(BM % KB_CWM == 0 && BN % KB_CWN == 0, "consumer waves must divide the block tile");
  static_assert(WTM % MF == 0 && WTN % MF == 0, "consumer wave tile must be a multiple of the MFMA size");
  static_assert(BK % kbh::Mfma<MF>::kK == 0, "BK must be a multiple of the MFMA K");
  static_assert(THREADS <= 1024, "at most 16 waves per workgroup");
  static_assert(LDS_BYTES <= 65536, "ring + counters exceed the 64 KiB of LDS per workgroup");
};

typedef WsLayout L;

// Producer role: for every K tile, wait for its slot to be free, copy A and B into it, mark it full.
__attribute__((device)) static void produce(kb_u16 (*ring)[L::SLOT_ELEMS], kb_u32* full, kb_u32* empty,
                                            const kb_u16* KB_RESTRICT A, const kb_u16* KB_RESTRICT B, int M,
                                            int N, int K, kb_i64 m0, kb_i64 n0, int pt, int lane) {
  const int KT = (K + L::BK - 1) / L::BK;
  L::TileA ta;
  L::TileB tb;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % L::STAGES, use = kt / L::STAGES;
    const kb_i64 k0 = kb_i64(kt) * L::BK;
    ta.load(A, K, m0, k0, M, K, pt);  // global loads issue before the wait: they need no slot
    tb.load(B, N, k0, n0, K, N, pt);
    kb_flag_wait_geq(&empty[s], kb_u32(use * L::CONSUMERS));
    ta.store(ring[s], pt);
    tb.store(ring[s] + L::TileA::kLdsElems, pt);
    kb_flag_arrive(&full[s], lane);
  }
}

// Consumer role: for every K tile, wait for its slot, run the wave's MFMAs on it, hand it back; then
// write the wave's block of C.
__attribute__((device)) static void consume(kb_u16 (*ring)[L::SLOT_ELEMS], kb_u32* full, kb_u32* empty,
                                            float* KB_RESTRICT C, int M, int N, int K, kb_i64 m0, kb_i64 n0,
                                            int cw, int lane) {
  const int KT = (K + L::BK - 1) / L::BK;
  const int wm = cw / KB_CWN, wn = cw % KB_CWN;
  kbh::WaveTile<L::MF, L::WTM / L::MF, L::WTN / L::MF> tile;
  tile.zero();
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % L::STAGES, use = kt / L::STAGES;
    kb_flag_wait_geq(&full[s], kb_u32((use + 1) * L::PRODUCERS));
    tile.template mma<L::BK>(ring[s], L::TileA::kLd, ring[s] + L::TileA::kLdsElems, L::TileB::kLd, wm * L::WTM,
                             wn * L::WTN, lane);
    kb_flag_arrive(&empty[s], lane);
  }
  tile.store(C, M, N, m0 + wm * L::WTM, n0 + wn * L::WTN, lane);
}

KB_KERNEL KB_LAUNCH_BOUNDS(L::THREADS) KB_MIN_WAVES_PER_SIMD(KB_OCC) void kb_matmul_ws(const void* Ap, const void* Bp, float* KB_RESTRICT C,
                                                         int M, int N, int K) {
  KB_SHARED kb_u16 ring[L::STAGES][L::SLOT_ELEMS];
  KB_SHARED kb_u32 full[L::STAGES];
  KB_SHARED kb_u32 empty[L::STAGES];
  const int t = kb_thread_x(), lane = t % KB_WAVE_SIZE;
  const int wave = kb_wave_uniform(t / KB_WAVE_SIZE);
  if (t < L::STAGES) {
    full[t] = 0;
    empty[t] = 0;
  }
  kb_syncthreads();  // the only workgroup barrier: counters are zero before any role starts
  const kb_i64 m0 = kb_i64(kb_block_y()) * L::BM, n0 = kb_i64(kb_block_x()) * L::BN;
  if (wave < L::PRODUCERS)
    produce(ring, full, empty, static_cast<const kb_u16*>(Ap), static_cast<const kb_u16*>(Bp), M, N, K, m0, n0, t,
            lane);
  else
    consume(ring, full, empty, C, M, N, K, m0, n0, wave - L::PRODUCERS, lane);
}
