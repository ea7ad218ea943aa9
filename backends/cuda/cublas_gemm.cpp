#include "backends/cuda/cublas_gemm.h"

#include <cublas_api.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cuda/cuda_driver.h"
#include "core/error.h"

namespace kb::cuda {

namespace {

// The entry points kbisect calls, typed from cublas_api.h. (cublasGemmEx is overloaded in C++ by an inline
// wrapper taking a cudaDataType compute type, so decltype(&cublasGemmEx) would be ambiguous: spelled out.)
using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using SetWorkspaceFn = cublasStatus_t (*)(cublasHandle_t, void*, size_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using StatusNameFn = const char* (*)(cublasStatus_t);

struct Library {
  void* handle = nullptr;
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  SetWorkspaceFn set_workspace = nullptr;
  GemmExFn gemm_ex = nullptr;
  StatusNameFn status_name = nullptr;  // optional (error text only)
  std::string path;                    // resolved
  std::string reason;                  // why not loaded
  bool ok = false;
};

const Library& library() {
  static Library l;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string first_error;
    for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
      l.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (l.handle) break;
      if (first_error.empty())
        if (const char* e = dlerror()) first_error = e;
    }
    if (!l.handle) {
      l.reason = fmt::format("libcublas.so.13 not found (nor libcublas.so): {}", first_error);
      return;
    }
    std::string missing;
    auto sym = [&](const char* name) {
      void* p = dlsym(l.handle, name);
      if (!p) missing += (missing.empty() ? "" : ", ") + std::string(name);
      return p;
    };
    l.create = reinterpret_cast<CreateFn>(sym("cublasCreate_v2"));
    l.destroy = reinterpret_cast<DestroyFn>(sym("cublasDestroy_v2"));
    l.set_stream = reinterpret_cast<SetStreamFn>(sym("cublasSetStream_v2"));
    l.set_workspace = reinterpret_cast<SetWorkspaceFn>(sym("cublasSetWorkspace_v2"));
    l.gemm_ex = reinterpret_cast<GemmExFn>(sym("cublasGemmEx"));
    l.status_name = reinterpret_cast<StatusNameFn>(dlsym(l.handle, "cublasGetStatusName"));
    Dl_info info{};
    if (l.create && dladdr(reinterpret_cast<void*>(l.create), &info) && info.dli_fname) {
      std::error_code ec;
      auto real = std::filesystem::canonical(info.dli_fname, ec);
      l.path = ec ? std::string(info.dli_fname) : real.string();
    }
    if (!missing.empty()) {
      l.reason = fmt::format("{} lacks {} (cuBLAS too old)", l.path.empty() ? "libcublas" : l.path, missing);
      return;
    }
    if (l.path.empty()) {
      l.reason = "libcublas loaded, but its file could not be found (dladdr)";
      return;
    }
    l.ok = true;
  });
  return l;
}

const Library& loaded() {
  const Library& l = library();
  if (!l.ok) throw EnvError("cuBLAS: " + l.reason);
  return l;
}

void check_status(cublasStatus_t st, const char* call, const std::string& what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  const Library& l = library();
  const char* name = l.status_name ? l.status_name(st) : nullptr;
  throw Error(fmt::format("cuBLAS {} failed{}: {} ({})", call, what.empty() ? "" : " (" + what + ")",
                          name ? name : "status", int(st)),
              ErrorKind::environment);
}

cudaDataType input_type(DType d) {
  switch (d) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::f32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

}  // namespace

std::string cublas_library_path(std::string* why) {
  const Library& l = library();
  if (!l.ok && why) *why = l.reason;
  return l.ok ? l.path : "";
}

const std::string& cublas_library_sha256() {
  static std::string hash;
  static std::once_flag once;
  std::call_once(once, [] {
    const Library& l = library();
    if (l.ok) hash = sha256_resolved(l.path);
  });
  return hash;
}

CublasGemm::CublasGemm(CUstream stream, size_t workspace_bytes) : stream_(stream) {
  const Library& l = loaded();
  cublasHandle_t h = nullptr;
  check_status(l.create(&h), "cublasCreate_v2", "");
  handle_ = h;
  try {
    // cublasSetStream resets the workspace to cuBLAS' own pool, so the stream is set first.
    check_status(l.set_stream(h, stream_), "cublasSetStream_v2", "");
    KB_CU(driver().cuMemAlloc(&workspace_, workspace_bytes));  // 256-byte aligned, as cuBLAS asks
    check_status(l.set_workspace(h, reinterpret_cast<void*>(workspace_), workspace_bytes), "cublasSetWorkspace_v2",
                 fmt::format("{} bytes", workspace_bytes));
  } catch (...) {
    l.destroy(h);
    if (workspace_) driver().cuMemFree(workspace_);
    handle_ = nullptr;
    workspace_ = 0;
    throw;
  }
}

CublasGemm::~CublasGemm() {
  // The stream's work is finished by the owner (CudaExecutable synchronizes before it destroys this).
  if (handle_) library().destroy(static_cast<cublasHandle_t>(handle_));
  if (workspace_) driver().cuMemFree(workspace_);
}

void CublasGemm::gemm(DType d, const Shape& s, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C) {
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  if (s.M <= 0 || s.N <= 0 || s.K <= 0 || s.M > kMax || s.N > kMax || s.K > kMax)
    throw InputError(fmt::format("cuBLAS: shape {} must be positive and fit in int32", s.str()));
  const Library& l = loaded();
  const int M = int(s.M), N = int(s.N), K = int(s.K);
  const float alpha = 1.0f, beta = 0.0f;  // host pointer mode: read at the call (and captured by value)
  const cudaDataType t = input_type(d);
  // Row-major C = A B is column-major C^T = B^T A^T: B goes first, with m = N, n = M; each row-major matrix
  // is its column-major transpose with the same leading dimension (B: N, A: K, C: N). Nothing is transposed.
  check_status(l.gemm_ex(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                         reinterpret_cast<const void*>(B), t, N, reinterpret_cast<const void*>(A), t, K, &beta,
                         reinterpret_cast<void*>(C), CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx", fmt::format("{} {}", to_string(d), s.str()));
}

}  // namespace kb::cuda
