// The HIP runtime (and hiprtc, which ROCm 5.x ships inside libamdhip64) loaded with dlopen, never
// linked: a build without ROCm installed still starts, and "no GPU" / "no runtime" are reasons, not
// crashes. The ROCm headers are used for types and signatures only.
#pragma once
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <string>

namespace kb {

#define KB_HIP_RUNTIME_FUNCTIONS(X)                                                                         \
  X(hipGetDeviceCount) X(hipGetErrorName) X(hipGetErrorString) X(hipSetDevice) X(hipDeviceGetAttribute)     \
  X(hipGetDeviceProperties) X(hipRuntimeGetVersion) X(hipFree) X(hipMemcpy) X(hipMemset)       \
  X(hipModuleLoadData) X(hipModuleUnload) X(hipModuleGetFunction) X(hipModuleLaunchKernel) X(hipEventCreate) \
  X(hipEventDestroy) X(hipEventRecord) X(hipEventSynchronize) X(hipEventElapsedTime) X(hipDeviceSynchronize) \
  X(hipGetLastError)

#define KB_HIPRTC_FUNCTIONS(X)                                                                              \
  X(hiprtcVersion) X(hiprtcGetErrorString) X(hiprtcCreateProgram) X(hiprtcCompileProgram)                   \
  X(hiprtcDestroyProgram) X(hiprtcGetProgramLogSize) X(hiprtcGetProgramLog) X(hiprtcGetCodeSize)            \
  X(hiprtcGetCode)

struct HipApi {
  // hipMalloc is overloaded in C++ (a template for typed pointers): name the C entry's type.
  hipError_t (*hipMalloc)(void** ptr, size_t size) = nullptr;
#define KB_HIP_MEMBER(fn) decltype(&::fn) fn = nullptr;
  KB_HIP_RUNTIME_FUNCTIONS(KB_HIP_MEMBER)
  KB_HIPRTC_FUNCTIONS(KB_HIP_MEMBER)
#undef KB_HIP_MEMBER
  bool has_hiprtc = false;
  std::string library_path;  // the file dlopen loaded (symlinks resolved)
};

// libamdhip64, loaded once per process; nullptr when it cannot be loaded (then *why says why).
const HipApi* hip_api(std::string* why = nullptr);

// Throws Error("<call> failed: hipErrorX (code): text [file:line]") when rc != hipSuccess.
void hip_check(const HipApi& api, hipError_t rc, const char* call, const char* file, int line);
void hiprtc_check(const HipApi& api, hiprtcResult rc, const char* call, const char* file, int line);

// One error helper per API (the HIP twin of the CUDA one): records the call text, file and line.
#define KB_HIP_CALL(api, fn, ...) ::kb::hip_check((api), (api).fn(__VA_ARGS__), #fn "(" #__VA_ARGS__ ")", __FILE__, __LINE__)
#define KB_HIPRTC_CALL(api, fn, ...) \
  ::kb::hiprtc_check((api), (api).fn(__VA_ARGS__), #fn "(" #__VA_ARGS__ ")", __FILE__, __LINE__)

}  // namespace kb
