// A user's Triton kernel's own arguments on a CUDA device (docs/triton.md, "Your own kernels"): each tensor of
// one shape's launch allocated to the storage its view spans and filled with its initial bytes
// (backends/triton/user_args.h: the same on every machine and for every toolchain), the outputs copied into
// a snapshot that stays on the device, and the comparison of a run's outputs with a snapshot done on the
// device by a kernel NVRTC compiles for the device's arch: only a few numbers per output come back.
#pragma once
#include <cuda.h>

#include <map>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/triton_launch.h"
#include "backends/triton/user_kernel.h"

namespace kb::cuda {

// The CUDA C++ source of the comparison kernel (no includes), and its cubin for sm_<sm> (once per process).
const std::string& compare_source();
const std::string& compare_cubin(int sm);

class UserTensors {
 public:
  // The launch of `kernel`'s shape `label`; InputError naming the file when the file has no such shape.
  UserTensors(const triton::UserKernel& kernel, const std::string& label);
  ~UserTensors();
  UserTensors(const UserTensors&) = delete;
  UserTensors& operator=(const UserTensors&) = delete;

  // Allocates every tensor in the current context (after `gap`, a callback that may hold a random gap
  // before each allocation) and copies its initial bytes; synchronous.
  void upload(const std::function<void(int)>& gap);
  // The addresses of the device pointers, by argument name (TritonLaunch::bind's `pointers`).
  std::map<std::string, DevicePtr*> pointers();
  const triton::LaunchArgs& args() const { return args_; }
  // Device copies of the outputs after the work on `stream` (the context's device: `dev`).
  std::shared_ptr<const OutputSnapshot> snapshot(CUdevice dev, CUstream stream) const;
  // This launch's outputs against `ref` (a snapshot of the same kernel's outputs for the same shape), on the
  // device of arch sm_<sm>.
  OutputCheck compare(const OutputSnapshot& ref, const ToleranceOf& tolerance, int sm, CUstream stream,
                      const std::string& device) const;

 private:
  std::string kernel_, label_;
  triton::LaunchArgs args_;
  std::map<std::string, CUdeviceptr> buffers_;
};

}  // namespace kb::cuda
