// The HIP kernels' declarations (names, parameters, constraints, built-in configs) and the launch
// geometry the runtime derives from a kernel's parameters.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.h"

namespace kb {

const std::vector<KernelDecl>& hip_kernels();

// Workgroup size and tile of a HIP kernel instance (the grid is ceil(N/BN) x ceil(M/BM)).
struct HipLaunchShape {
  int threads = 0;
  int block_m = 0, block_n = 0;
};
HipLaunchShape hip_launch_shape(const std::string& kernel, const Params& p);

// LDS bytes the kernel's tiles take for these params (what its static_assert checks), for reasons.
int64_t hip_kernel_lds_bytes(const std::string& kernel, const Params& p, DType dtype);

}  // namespace kb
