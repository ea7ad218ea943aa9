// The CUDA driver API and NVML, loaded at run time with dlopen (never linked: a host without the
// driver must still load kbisect). Types come from the toolkit's cuda.h; NVML's few types are declared
// here (the toolkit on this machine ships no nvml.h).
#pragma once
#include <cuda.h>

#include <string>

namespace kb::cuda {

// Every driver entry point kbisect calls. Names go through cuda.h's versioning macros (cuMemAlloc ->
// cuMemAlloc_v2, ...), so the symbol looked up is the one the header declares.
#define KB_CU_FUNCTIONS(X)                                                                                   \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetCount)   \
  X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceGetUuid) X(cuDevicePrimaryCtxRetain)                  \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)  \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuMemAlloc)         \
  X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy)       \
  X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) \
  X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                \
  X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx)   \
  X(cuMemcpyDtoDAsync)

struct Driver {
#define KB_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
  KB_CU_FUNCTIONS(KB_CU_MEMBER)
#undef KB_CU_MEMBER
  void* handle = nullptr;
  bool ok = false;
  std::string reason;  // why not ok
};

// The process-wide driver, loaded and cuInit'ed on first use. Never throws; check ok/reason.
Driver& driver();

// Throws Error("<file>:<line>: <call text> failed: CUDA_ERROR_X (description)") unless rc == CUDA_SUCCESS.
void check(CUresult rc, const char* call, const char* file, int line);
#define KB_CU(call) ::kb::cuda::check((call), #call, __FILE__, __LINE__)

// NVML (libnvidia-ml.so.1, dlopen'd): SM clock of the device with a given CUDA UUID.
class Nvml {
 public:
  static Nvml& instance();
  bool ok() const { return ok_; }
  // Current SM clock in MHz, 0 if unknown.
  unsigned sm_clock_mhz(const CUuuid& uuid);
  // Default (application) SM clock in MHz, else the max SM clock, 0 if unknown.
  unsigned default_sm_clock_mhz(const CUuuid& uuid);

 private:
  Nvml();
  void* device(const CUuuid& uuid);
  bool ok_ = false;
  void* handle_ = nullptr;
  int (*init_)() = nullptr;
  int (*by_uuid_)(const char*, void**) = nullptr;
  int (*clock_info_)(void*, int, unsigned*) = nullptr;
  int (*default_app_clock_)(void*, int, unsigned*) = nullptr;
  int (*max_clock_)(void*, int, unsigned*) = nullptr;
};

}  // namespace kb::cuda
