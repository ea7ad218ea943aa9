// cuBLAS reference timing for scripts/gpu-check.sh (built there with nvcc, not part of kbisect).
// For each shape M N K on the command line: C (fp32, MxN row-major) = A (bf16, MxK) * B (bf16, KxN) via
// cublasGemmEx with fp32 compute; cold samples (L2 flushed by a memset before each), CUDA-event timed.
// Prints one JSON object per line: {"M":..,"N":..,"K":..,"median_s":..,"tflops":..,"samples":..}.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)
#define CHECK_CUBLAS(x)                                                                  \
  do {                                                                                   \
    cublasStatus_t s_ = (x);                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 1) % 3) {
    std::fprintf(stderr, "usage: cublas_ref M N K [M N K ...]\n");
    return 2;
  }
  int l2 = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  void* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, size_t(l2)));
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int i = 1; i < argc; i += 3) {
    const long M = std::atol(argv[i]), N = std::atol(argv[i + 1]), K = std::atol(argv[i + 2]);
    std::vector<__nv_bfloat16> ha(size_t(M * K)), hb(size_t(K * N));
    for (auto& x : ha) x = __float2bfloat16(dist(rng));  // random data: never time on zeros
    for (auto& x : hb) x = __float2bfloat16(dist(rng));
    __nv_bfloat16 *a, *b;
    float* c;
    CHECK_CUDA(cudaMalloc(&a, ha.size() * 2));
    CHECK_CUDA(cudaMalloc(&b, hb.size() * 2));
    CHECK_CUDA(cudaMalloc(&c, size_t(M * N) * 4));
    CHECK_CUDA(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    const float alpha = 1.f, beta = 0.f;
    // Row-major C = A B is column-major C^T = B^T A^T: pass B first, with m = N and n = M.
    auto gemm = [&] {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &alpha, b, CUDA_R_16BF, int(N), a,
                          CUDA_R_16BF, int(K), &beta, c, CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    for (int w = 0; w < 3; ++w) CHECK_CUBLAS(gemm());
    std::vector<double> t;
    for (int s = 0; s < 30; ++s) {
      CHECK_CUDA(cudaMemsetAsync(flush, s & 0xff, size_t(l2)));
      CHECK_CUDA(cudaEventRecord(e0));
      CHECK_CUBLAS(gemm());
      CHECK_CUDA(cudaEventRecord(e1));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e-3);
    }
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    std::printf("{\"M\": %ld, \"N\": %ld, \"K\": %ld, \"median_s\": %.9g, \"tflops\": %.4g, \"samples\": %zu}\n", M, N,
                K, med, 2.0 * M * N * K / med * 1e-12, t.size());
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
    CHECK_CUDA(cudaFree(c));
  }
  cublasDestroy(h);
  return 0;
}
