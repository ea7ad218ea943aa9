// The fast correctness check's digest of C (backends/digest.h) computed on the GPU where C lives: the
// projections C*x and y*C in fp64, the non-finite count and first index, and the requested cells. Only
// O(M + N) numbers come back to the host, so a large sweep never waits for a device-to-host copy of C
// and a host pass over it. The kernels are CUDA C++ compiled in process by NVRTC for the device's arch.
#pragma once
#include <cuda.h>

#include <string>

#include "backends/digest.h"

namespace kb::cuda {

// The CUDA C++ source of the digest kernels (no includes; NVRTC compiles it as is).
const std::string& digest_source();

// A cubin of the digest kernels for sm_<sm> (e.g. 80, 90), compiled once per arch and process. Throws
// Error with NVRTC's log when it does not compile.
const std::string& digest_cubin(int sm);

// The digest kernels loaded into one context (the executable's); unloaded with it.
class DeviceDigest {
 public:
  DeviceDigest(int sm, CUstream stream);
  ~DeviceDigest();
  DeviceDigest(const DeviceDigest&) = delete;
  DeviceDigest& operator=(const DeviceDigest&) = delete;
  // The digest of the M x N fp32 matrix at dC (row-major), computed on `stream` of the current context.
  ResultDigest compute(CUdeviceptr dC, const Shape& s, const DigestRequest& req, const std::string& device);

 private:
  CUmodule module_ = nullptr;
  CUfunction rows_ = nullptr, cols_ = nullptr, cells_ = nullptr;
  CUstream stream_ = nullptr;
};

}  // namespace kb::cuda
