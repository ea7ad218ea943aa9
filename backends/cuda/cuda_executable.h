// A cubin loaded through the driver API into this process and launched on one device (KBISECT_CUDA_DEVICE,
// default 0), timed with CUDA events; batches run as one CUDA graph.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace kb::cuda {

// Throws EnvError when there is no driver or the device cannot run the cubin's target.
std::unique_ptr<Executable> make_cuda_executable(const Artifact& art);

// Bytes of the buffer flush_caches() overwrites: twice the device's L2 (at least 2 MiB).
size_t l2_flush_bytes(int l2_cache_bytes);

// How long one timed launch (or graph of launches) may run before it is called hung:
// $KBISECT_CUDA_TIMEOUT_S when it is a positive number, else 60 s. Throws InputError naming the value otherwise.
double kernel_timeout_s();

}  // namespace kb::cuda
