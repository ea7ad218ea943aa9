/* matmul_ws_sm90: warp-specialized Hopper GEMM (sm_90a). bf16/f16 in, fp32 accumulate and out.
 * C[MxN] = A[MxK] * B[KxN] with A row-major (K-major) and B given TRANSPOSED, as Bt[NxK] row-major
 * (also K-major): the backend uploads B that way, so both operands use the canonical K-major wgmma
 * layout with the 128-byte swizzle that TMA writes directly (no transposes in the kernel).
 *
 * Roles (3 warpgroups, 384 threads):
 *   warpgroup 0   producer: gives registers away (setmaxnreg.dec), then one thread walks the tiles and
 *                 K steps, waits for ring slot s to be empty (mbarrier parity wait), arms FULL(s) with
 *                 the expected byte count (arrive.expect_tx) and issues two TMA loads (A: 128 x 64,
 *                 Bt: BN x 64) that complete FULL(s).
 *   warpgroups 1,2 consumers: take registers (setmaxnreg.inc), each owns 64 rows of the 128 x BN tile;
 *                 wait FULL(s), issue wgmma.mma_async m64n64k16 (BN/64 per 16-deep K step), wait for
 *                 them, arrive on EMPTY(s); after the last K step store their fp32 tile to C.
 * Ring phases: iteration `it` (counted across tiles) uses slot it % STAGES with phase (it/STAGES)&1;
 * consumers wait FULL with that parity, the producer waits EMPTY with the opposite parity (a fresh
 * barrier counts as "previous phase complete", so the first STAGES waits pass at once).
 * PERSISTENT=1: grid = min(tiles, SMs), each block strides over tiles (the producer runs ahead into the
 * next tile while consumers store); PERSISTENT=0: one tile per block.
 *
 * Entry: extern "C" kb_matmul(tmap A, tmap Bt, float* C, int M, int N, int K); tensor maps are passed
 * as __grid_constant__ values (nvcc, NVRTC) or as pointers to device copies (clang), see
 * kb_portability_cuda.h. Block 384 threads, dynamic shared Layout::SMEM_BYTES. Needs K % 8 == 0 (TMA
 * global strides are multiples of 16 bytes) and N % 8 == 0 (paired fp32 stores); TMA zero-fills
 * out-of-range rows/columns, the epilogue skips out-of-range C elements. */
#include "kb_portability.h"

#if !defined(KB_DTYPE_BF16) && !defined(KB_DTYPE_F16)
#error "matmul_ws_sm90 needs KB_DTYPE_BF16 or KB_DTYPE_F16"
#endif
#if defined(KB_DTYPE_BF16)
#define KB_WGMMA_AB "bf16"
#else
#define KB_WGMMA_AB "f16"
#endif

#ifndef KB_BN
#define KB_BN 128
#endif
#ifndef KB_STAGES
#define KB_STAGES 4
#endif
#ifndef KB_PERSISTENT
#define KB_PERSISTENT 0
#endif

namespace {

struct Layout {
  static constexpr int BM = 128, BN = KB_BN, BK = 64, STAGES = KB_STAGES;
  static constexpr int CONSUMERS = 2, WG_THREADS = 128, THREADS = (1 + CONSUMERS) * WG_THREADS;
  static constexpr int WG_ROWS = BM / CONSUMERS;  // 64: one m64 wgmma row block per consumer
  static constexpr int NSUB = BN / 64;            // m64n64k16 instructions per 16-deep K step
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int BARRIER_BYTES = 2 * STAGES * 8;
  // +1024: the dynamic shared base is rounded up to the 1024-byte swizzle atom in the kernel.
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + BARRIER_BYTES;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;

  static_assert(BN % 64 == 0 && BN >= 64 && BN <= 256, "BN must be 64, 128, 192 or 256");
  static_assert(BK * 2 == 128, "one 128-byte swizzle row per K tile");
  static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "stages stay 1024-byte aligned");
  static_assert(STAGES >= 2 && STAGES <= 8, "STAGES in 2..8");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory budget: 227 KiB per block");
  static_assert(WG_THREADS * PRODUCER_REGS + CONSUMERS * WG_THREADS * CONSUMER_REGS <= 65536,
                "setmaxnreg split exceeds the register file");
};

// ---- mbarrier, TMA and wgmma in PTX
KB_DEV void mbar_init(kb_u32 bar, kb_u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
KB_DEV void mbar_wait(kb_u32 bar, kb_u32 parity) {
  kb_u32 done;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
KB_DEV void mbar_arrive(kb_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
KB_DEV void mbar_arrive_expect_tx(kb_u32 bar, kb_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
KB_DEV void tma_load_2d(kb_u32 dst, const kb_tensor_map* map, int inner, int outer, kb_u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(map), "r"(inner), "r"(outer), "r"(bar)
      : "memory");
}
// Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart.
KB_DEV kb_u64 wgmma_desc(kb_u32 addr) {
  return (kb_u64)((addr >> 4) & 0x3FFF) | ((kb_u64)1 << 16) | ((kb_u64)(1024 >> 4) << 32) | ((kb_u64)1 << 62);
}
KB_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
KB_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
KB_DEV void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

#define KB_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
KB_DEV void wgmma_m64n64k16(float (&d)[32], kb_u64 desc_a, kb_u64 desc_b) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." KB_WGMMA_AB "." KB_WGMMA_AB
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
      "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0; }"
      : KB_D8(0), KB_D8(8), KB_D8(16), KB_D8(24)
      : "l"(desc_a), "l"(desc_b), "n"(1)
      : "memory");
}
#undef KB_D8

struct __attribute__((aligned(8))) f2 {
  float x, y;
};

// ---- roles
struct Ring {
  kb_u32 stages, full, empty;  // shared addresses: stage 0, FULL[0], EMPTY[0]
  KB_INL kb_u32 a(int s) const { return stages + s * Layout::STAGE_BYTES; }
  KB_INL kb_u32 b(int s) const { return a(s) + Layout::A_BYTES; }
  KB_INL kb_u32 full_bar(int s) const { return full + 8 * s; }
  KB_INL kb_u32 empty_bar(int s) const { return empty + 8 * s; }
};

struct Tiles {
  int tiles_m, count, first, stride, KT;
  KB_INL void coords(int tile, int& m0, int& n0) const {
    m0 = (tile % tiles_m) * Layout::BM;
    n0 = (tile / tiles_m) * Layout::BN;
  }
};

KB_DEV void producer(const Ring& ring, const Tiles& tiles, const kb_tensor_map* mapA, const kb_tensor_map* mapB) {
  int it = 0;
  for (int tile = tiles.first; tile < tiles.count; tile += tiles.stride) {
    int m0, n0;
    tiles.coords(tile, m0, n0);
    for (int kt = 0; kt < tiles.KT; ++kt, ++it) {
      const int s = it % Layout::STAGES;
      const kb_u32 phase = (it / Layout::STAGES) & 1;
      mbar_wait(ring.empty_bar(s), phase ^ 1);
      mbar_arrive_expect_tx(ring.full_bar(s), Layout::STAGE_BYTES);
      tma_load_2d(ring.a(s), mapA, kt * Layout::BK, m0, ring.full_bar(s));
      tma_load_2d(ring.b(s), mapB, kt * Layout::BK, n0, ring.full_bar(s));
    }
  }
}

KB_DEV void consumer(const Ring& ring, const Tiles& tiles, int wg, int u, float* __restrict__ C, int M, int N) {
  const int warp = u / 32, lane = u % 32;
  int it = 0;
  for (int tile = tiles.first; tile < tiles.count; tile += tiles.stride) {
    int m0, n0;
    tiles.coords(tile, m0, n0);
    float acc[Layout::NSUB][32];
#pragma unroll
    for (int j = 0; j < Layout::NSUB; ++j)
#pragma unroll
      for (int i = 0; i < 32; ++i) acc[j][i] = 0.f;
    for (int kt = 0; kt < tiles.KT; ++kt, ++it) {
      const int s = it % Layout::STAGES;
      mbar_wait(ring.full_bar(s), (it / Layout::STAGES) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Layout::BK / 16; ++kk) {
        const kb_u64 da = wgmma_desc(ring.a(s) + wg * Layout::WG_ROWS * 128 + kk * 32);
#pragma unroll
        for (int j = 0; j < Layout::NSUB; ++j)
          wgmma_m64n64k16(acc[j], da, wgmma_desc(ring.b(s) + j * 64 * 128 + kk * 32));
      }
      wgmma_commit();
      wgmma_wait_all();  // the stage's shared memory is no longer read
      mbar_arrive(ring.empty_bar(s));
    }
    // Accumulator layout of m64nNk16: warp w holds rows 16w..16w+15; register i of 8-column group
    // i/4 is row lane/4 (+8 when (i/2) is odd), column 2*(lane%4) + i%2.
    const int row_base = m0 + wg * Layout::WG_ROWS + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < Layout::NSUB; ++j)
#pragma unroll
      for (int i = 0; i < 32; i += 2) {
        const int row = row_base + 8 * ((i / 2) % 2);
        const int col = n0 + j * 64 + (i / 4) * 8 + 2 * (lane % 4);
        if (row < M && col < N) *(f2*)(C + (long long)row * N + col) = f2{acc[j][i], acc[j][i + 1]};
      }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(Layout::THREADS, 1)
    kb_matmul(KB_TMAP_PARAM(tmA), KB_TMAP_PARAM(tmB), float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __attribute__((aligned(1024))) unsigned char kb_smem[];
  Ring ring;
  ring.stages = (kb_smem_addr(kb_smem) + 1023u) & ~1023u;
  ring.full = ring.stages + Layout::STAGES * Layout::STAGE_BYTES;
  ring.empty = ring.full + Layout::STAGES * 8;
  const int t = (int)kb_tid_x();

  if (t == 0) {
    for (int s = 0; s < Layout::STAGES; ++s) {
      mbar_init(ring.full_bar(s), 1);                                      // the producer's expect_tx arrive
      mbar_init(ring.empty_bar(s), Layout::CONSUMERS * Layout::WG_THREADS);  // every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  kb_sync_block();

  Tiles tiles;
  tiles.tiles_m = (M + Layout::BM - 1) / Layout::BM;
  tiles.count = tiles.tiles_m * ((N + Layout::BN - 1) / Layout::BN);
  tiles.first = (int)kb_ctaid_x();
  tiles.stride = KB_PERSISTENT ? (int)kb_nctaid_x() : tiles.count;
  tiles.KT = (K + Layout::BK - 1) / Layout::BK;

  const int wg = t / Layout::WG_THREADS;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Layout::PRODUCER_REGS));
    if (t == 0) producer(ring, tiles, KB_TMAP_PTR(tmA), KB_TMAP_PTR(tmB));
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Layout::CONSUMER_REGS));
    consumer(ring, tiles, wg - 1, t % Layout::WG_THREADS, C, M, N);
  }
}
