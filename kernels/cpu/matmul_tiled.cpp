// Cache-blocked GEMM (BLIS-style loop order): for each BN column panel of B, each BK slice of K,
// pack B once; for each BM row block of A, pack A and run the MRxNR micro-kernel over the block.
#include "gemm_common.h"

extern "C" int kb_gemm(const kb_gemm_args* args) {
  using namespace kbk;
  const int64_t M = args->M, N = args->N, K = args->K;
  if (M <= 0 || N <= 0 || K <= 0) return 1;
  const elem_t* A = static_cast<const elem_t*>(args->A);
  const elem_t* B = static_cast<const elem_t*>(args->B);
  float* C = args->C;
  try {
    FloatBuffer pa(BM * BK), pb(BN * BK);
    for (int64_t j0 = 0; j0 < N; j0 += BN) {
      const int64_t nc = std::min(BN, N - j0);
      for (int64_t k0 = 0; k0 < K; k0 += BK) {
        const int64_t kc = std::min(BK, K - k0);
        pack_b(B, N, k0, j0, kc, nc, pb.data());
        for (int64_t i0 = 0; i0 < M; i0 += BM) {
          const int64_t mc = std::min(BM, M - i0);
          pack_a(A, K, i0, k0, mc, kc, pa.data());
          block_multiply(pa.data(), pb.data(), C, N, i0, j0, mc, nc, kc, /*accumulate=*/k0 > 0);
        }
      }
    }
  } catch (const std::bad_alloc&) {
    return 2;
  }
  return 0;
}
