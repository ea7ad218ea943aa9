// cuBLAS in this process, as the library reference ("anchor") the compiled kernels are measured against:
// libcublas is loaded at run time with dlopen ("libcublas.so.13", then "libcublas.so"), never linked, so
// kbisect loads and compiles on machines without it. The toolkit's cublas_api.h gives the types only.
//
// The CUDA backend exposes it as the kernel `cublas` (cuda_kernels.cpp, ArgStyle::Library): its "compile"
// runs no compiler, and its executable is the ordinary CUDA executable whose launch calls cublasGemmEx
// instead of cuLaunchKernel, on the executable's stream, in the device's primary context.
#pragma once
#include <cuda.h>

#include <memory>
#include <string>

#include "backends/kernel.h"

namespace kb::cuda {

// The loaded libcublas file with symlinks resolved; "" when it cannot be loaded (then *why says why).
// Loads the library once per process; never throws.
std::string cublas_library_path(std::string* why = nullptr);

// SHA-256 of the resolved libcublas file, computed once per process; "" when it cannot be loaded.
const std::string& cublas_library_sha256();

// One cuBLAS handle bound to a stream of the current context, with its own workspace (cuMemAlloc'd), so
// that its GEMMs can be captured into a CUDA graph (cuBLAS allocates nothing while capturing).
class CublasGemm {
 public:
  // The context that owns `stream` must be current. Throws EnvError naming the library when libcublas
  // cannot be loaded, Error with cuBLAS's status when a handle cannot be made.
  explicit CublasGemm(CUstream stream, size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // Enqueues C (fp32, M x N row-major) = A (M x K row-major) * B (K x N row-major) on the stream, inputs
  // of dtype d (bf16 / f16: 16-bit patterns; f32), fp32 compute (CUBLAS_COMPUTE_32F). The current
  // context must be the stream's. Throws Error with cuBLAS's status.
  void gemm(DType d, const Shape& s, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C);

  // cuBLAS' recommended workspace for Hopper (32 MiB; 4 MiB suffices before it).
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  CUstream stream_ = nullptr;
  CUdeviceptr workspace_ = 0;
};

}  // namespace kb::cuda
