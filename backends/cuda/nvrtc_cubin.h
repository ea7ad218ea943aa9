// NVRTC, in process: CUDA C++ text to a cubin. The one place that drives the NVRTC program API, for the
// nvrtc toolchain kind (cuda_backend.cpp) and kbisect's helper kernels (the digest, the output comparison).
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

// kbisect's own helper kernels (the digest, the output comparison): `text` compiled for sm_<sm> once per
// process and name. Throws Error naming `what` with NVRTC's log when it does not compile.
const std::string& helper_cubin(const std::string& text, const std::string& name, int sm, const std::string& what);

}  // namespace kb::cuda
