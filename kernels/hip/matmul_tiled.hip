// Tiled GEMM for AMD CDNA (gfx90a, gfx94x). One workgroup computes a BM x BN block of C with
// WM x WN waves; each wave owns a (BM/WM) x (BN/WN) sub-block.
//   f16 / bf16: MFMA (MFMA=32: v_mfma_f32_32x32x8, MFMA=16: v_mfma_f32_16x16x16), fp32 accumulators.
//   f32:        SIMT, each lane an (BM/WM/8) x (BN/WN/8) register tile (MFMA is ignored).
// DB=1 double-buffers the LDS tiles: the next tile's global loads are in flight while the current
// one is multiplied, with one barrier per K step. DB=0: one buffer, two barriers per K step.
// Parameters arrive as -DKB_<NAME>=<value>; M, N, K at run time (K and N multiples of 8).
#include "hip/kb_hip_gemm.h"

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
#define KB_WM 2
#endif
#ifndef KB_WN
#define KB_WN 2
#endif
#ifndef KB_MFMA
#define KB_MFMA 32
#endif
#ifndef KB_OCC
#define KB_OCC 0  // minimum waves per SIMD asked of the register allocator (0: compiler's choice)
#endif
#ifndef KB_DB
#define KB_DB 1
#endif

constexpr int BM = KB_BM, BN = KB_BN, BK = KB_BK, WM = KB_WM, WN = KB_WN, MF = KB_MFMA;
constexpr int NBUF = KB_DB ? 2 : 1;
constexpr int THREADS = KB_WAVE_SIZE * WM * WN;
constexpr int WTM = BM / WM, WTN = BN / WN;  // wave tile
constexpr int kLdsBudget = 65536;            // bytes of LDS one workgroup may use on CDNA2/3
static_assert(BM % WM == 0 && BN % WN == 0, "waves must divide the block tile");

#if defined(KB_DTYPE_F32)
// ---------------------------------------------------------------------------------------------- f32
constexpr int TM = WTM / 8, TN = WTN / 8;  // lanes form an 8 x 8 grid over the wave tile
static_assert(WTM % 8 == 0 && WTN % 8 == 0, "f32: wave tile must be a multiple of 8 x 8");
static_assert(BK % 4 == 0 && BN % 4 == 0, "f32: BK and BN must be multiples of 4 (16-byte vectors)");
constexpr int LDA = BM + 4, LDB = BN + 4;  // As is stored transposed: [BK][BM]
constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
constexpr int A_PER = (A_VECS + THREADS - 1) / THREADS, B_PER = (B_VECS + THREADS - 1) / THREADS;
static_assert(NBUF * (BK * LDA + BK * LDB) * 4 <= kLdsBudget, "f32: LDS tiles exceed 64 KiB");

struct Regs {
  kb_float4 a[A_PER], b[B_PER];
};

KB_DEVICE kb_float4 load4(const float* KB_RESTRICT p, kb_i64 ld, kb_i64 row, kb_i64 col, kb_i64 rows, kb_i64 cols) {
  kb_float4 v = {0.f, 0.f, 0.f, 0.f};
  if (row < rows && col < cols) v = *reinterpret_cast<const kb_float4*>(p + row * ld + col);
  return v;
}

KB_DEVICE void load_tiles(Regs& r, const float* A, const float* B, int M, int N, int K, kb_i64 m0, kb_i64 n0,
                          kb_i64 k0, int t) {
  KB_UNROLL for (int i = 0; i < A_PER; ++i) {
    int v = t + i * THREADS;
    if (A_VECS % THREADS == 0 || v < A_VECS)
      r.a[i] = load4(A, K, m0 + v / (BK / 4), k0 + (v % (BK / 4)) * 4, M, K);
  }
  KB_UNROLL for (int i = 0; i < B_PER; ++i) {
    int v = t + i * THREADS;
    if (B_VECS % THREADS == 0 || v < B_VECS)
      r.b[i] = load4(B, N, k0 + v / (BN / 4), n0 + (v % (BN / 4)) * 4, K, N);
  }
}

KB_DEVICE void store_tiles(const Regs& r, float* As, float* Bs, int t) {
  KB_UNROLL for (int i = 0; i < A_PER; ++i) {
    int v = t + i * THREADS;
    if (A_VECS % THREADS == 0 || v < A_VECS) {
      int m = v / (BK / 4), k = (v % (BK / 4)) * 4;
      KB_UNROLL for (int e = 0; e < 4; ++e) As[(k + e) * LDA + m] = r.a[i][e];
    }
  }
  KB_UNROLL for (int i = 0; i < B_PER; ++i) {
    int v = t + i * THREADS;
    if (B_VECS % THREADS == 0 || v < B_VECS)
      *reinterpret_cast<kb_float4*>(Bs + (v / (BN / 4)) * LDB + (v % (BN / 4)) * 4) = r.b[i];
  }
}

KB_KERNEL KB_LAUNCH_BOUNDS(THREADS) KB_MIN_WAVES_PER_SIMD(KB_OCC) void kb_matmul_tiled(const void* Ap, const void* Bp, float* KB_RESTRICT C,
                                                         int M, int N, int K) {
  KB_SHARED float As[NBUF][BK * LDA];
  KB_SHARED float Bs[NBUF][BK * LDB];
  const float* A = static_cast<const float*>(Ap);
  const float* B = static_cast<const float*>(Bp);
  const int t = kb_thread_x(), lane = t % KB_WAVE_SIZE;
  const int wave = kb_wave_uniform(t / KB_WAVE_SIZE);
  const int wm = wave / WN, wn = wave % WN;
  const kb_i64 m0 = kb_i64(kb_block_y()) * BM, n0 = kb_i64(kb_block_x()) * BN;
  const int lr = lane / 8, lc = lane % 8;
  float acc[TM][TN] = {};
  Regs r;
  const int KT = (K + BK - 1) / BK;

  auto compute = [&](const float* as, const float* bs) {
    KB_UNROLL for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      KB_UNROLL for (int i = 0; i < TM; ++i) a[i] = as[k * LDA + wm * WTM + i * 8 + lr];
      KB_UNROLL for (int j = 0; j < TN; ++j) b[j] = bs[k * LDB + wn * WTN + j * 8 + lc];
      KB_UNROLL for (int i = 0; i < TM; ++i) KB_UNROLL for (int j = 0; j < TN; ++j) acc[i][j] =
          __builtin_fmaf(a[i], b[j], acc[i][j]);
    }
  };

#if KB_DB
  load_tiles(r, A, B, M, N, K, m0, n0, 0, t);
  store_tiles(r, As[0], Bs[0], t);
  kb_syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < KT) load_tiles(r, A, B, M, N, K, m0, n0, kb_i64(kt + 1) * BK, t);
    compute(As[cur], Bs[cur]);
    if (kt + 1 < KT) store_tiles(r, As[cur ^ 1], Bs[cur ^ 1], t);
    kb_syncthreads();
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    load_tiles(r, A, B, M, N, K, m0, n0, kb_i64(kt) * BK, t);
    store_tiles(r, As[0], Bs[0], t);
    kb_syncthreads();
    compute(As[0], Bs[0]);
    kb_syncthreads();
  }
#endif

  KB_UNROLL for (int i = 0; i < TM; ++i) {
    kb_i64 row = m0 + wm * WTM + i * 8 + lr;
    KB_UNROLL for (int j = 0; j < TN; ++j) {
      kb_i64 col = n0 + wn * WTN + j * 8 + lc;
      if (row < M && col < N) C[row * N + col] = acc[i][j];
    }
  }
}

#else
// ----------------------------------------------------------------------------------------- f16/bf16
static_assert(MF == 32 || MF == 16, "MFMA must be 32 (32x32x8) or 16 (16x16x16)");
static_assert(WTM % MF == 0 && WTN % MF == 0, "wave tile must be a multiple of the MFMA size");
static_assert(BK % kbh::Mfma<MF>::kK == 0, "BK must be a multiple of the MFMA K");
typedef kbh::Tile16<BM, BK, THREADS> TileA;  // [BM][BK]: K contiguous
typedef kbh::Tile16<BK, BN, THREADS> TileB;  // [BK][BN]: N contiguous
static_assert(NBUF * (TileA::kLdsElems + TileB::kLdsElems) * 2 <= kLdsBudget, "LDS tiles exceed 64 KiB");

KB_KERNEL KB_LAUNCH_BOUNDS(THREADS) KB_MIN_WAVES_PER_SIMD(KB_OCC) void kb_matmul_tiled(const void* Ap, const void* Bp, float* KB_RESTRICT C,
                                                         int M, int N, int K) {
  KB_SHARED kb_u16 As[NBUF][TileA::kLdsElems];
  KB_SHARED kb_u16 Bs[NBUF][TileB::kLdsElems];
  const kb_u16* A = static_cast<const kb_u16*>(Ap);
  const kb_u16* B = static_cast<const kb_u16*>(Bp);
  const int t = kb_thread_x(), lane = t % KB_WAVE_SIZE;
  const int wave = kb_wave_uniform(t / KB_WAVE_SIZE);
  const int wm = wave / WN, wn = wave % WN;
  const kb_i64 m0 = kb_i64(kb_block_y()) * BM, n0 = kb_i64(kb_block_x()) * BN;
  const int KT = (K + BK - 1) / BK;

  kbh::WaveTile<MF, WTM / MF, WTN / MF> tile;
  tile.zero();
  TileA ta;
  TileB tb;

#if KB_DB
  ta.load(A, K, m0, 0, M, K, t);
  tb.load(B, N, 0, n0, K, N, t);
  ta.store(As[0], t);
  tb.store(Bs[0], t);
  kb_syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    const kb_i64 k1 = kb_i64(kt + 1) * BK;
    if (kt + 1 < KT) {  // next tile's global loads overlap this tile's MFMAs
      ta.load(A, K, m0, k1, M, K, t);
      tb.load(B, N, k1, n0, K, N, t);
    }
    tile.template mma<BK>(As[cur], TileA::kLd, Bs[cur], TileB::kLd, wm * WTM, wn * WTN, lane);
    if (kt + 1 < KT) {
      ta.store(As[cur ^ 1], t);
      tb.store(Bs[cur ^ 1], t);
    }
    kb_syncthreads();
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    const kb_i64 k0 = kb_i64(kt) * BK;
    ta.load(A, K, m0, k0, M, K, t);
    tb.load(B, N, k0, n0, K, N, t);
    ta.store(As[0], t);
    tb.store(Bs[0], t);
    kb_syncthreads();
    tile.template mma<BK>(As[0], TileA::kLd, Bs[0], TileB::kLd, wm * WTM, wn * WTN, lane);
    kb_syncthreads();
  }
#endif
  tile.store(C, M, N, m0 + wm * WTM, n0 + wn * WTN, lane);
}
#endif
