// kernel `cublas` (backend cuda): cuBLAS' cublasGemmEx, the library reference the compiled kernels are
// measured against. Nothing here is compiled: "compiling" this kernel runs no compiler (see
// backends/cuda/cuda_backend.cpp); its artifact is a marker file whose code hash is the SHA-256 of the
// libcublas that is loaded (dlopen of libcublas.so.13, then libcublas.so; backends/cuda/cublas_gemm.cpp).
// This file exists because every kernel's source keys the compile cache.
//
// The call, per execution, on the executable's stream in the device's primary context:
//   C (fp32, M x N row-major) = A (M x K row-major) * B (K x N row-major)
//   cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &1.0f, B, T, N, A, T, K, &0.0f, C, CUDA_R_32F, N,
//                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
// with T = CUDA_R_16BF (bf16), CUDA_R_16F (f16) or CUDA_R_32F (f32): row-major C = A B is column-major
// C^T = B^T A^T, so B goes first. The handle has its own 32 MiB workspace (cublasSetWorkspace), so batches
// are captured into CUDA graphs like every other kernel's launches.
