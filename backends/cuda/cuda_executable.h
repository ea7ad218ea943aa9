// A cubin loaded through the driver API into this process and launched on one device (KBISECT_CUDA_DEVICE,
// default 0), timed with CUDA events; batches run as one CUDA graph.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace kb::cuda {

// Throws EnvError when there is no driver or the device cannot run the cubin's target.
std::unique_ptr<Executable> make_cuda_executable(const Artifact& art);

}  // namespace kb::cuda
