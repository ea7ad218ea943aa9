// NVRTC, in process: CUDA C++ text to a cubin. The one place that drives the NVRTC program API, for the
// nvrtc toolchain kind (cuda_backend.cpp) and the correctness digest's kernels (device_digest.cpp).
#pragma once
#include <string>
#include <vector>

namespace kb::cuda {

struct NvrtcResult {
  std::string cubin;  // empty when it failed
  std::string log;    // NVRTC's program log (ptxas -v lines with -Xptxas=-v)
  std::string error;  // why it failed ("" when it did not): the failing step and NVRTC's error string
};

// Compiles `text` (named `name` in NVRTC's messages) with `options`; never throws.
NvrtcResult nvrtc_cubin(const std::string& text, const std::string& name, const std::vector<std::string>& options);

}  // namespace kb::cuda
