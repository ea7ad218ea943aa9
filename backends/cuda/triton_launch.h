// Launching a Triton cubin with the driver API (backends/triton/triton_compile.h wrote launch.json beside
// it): the kernel's non-constexpr arguments in order, then the hidden scratch pointers its release appends
// (global_scratch from 3.3, profile_scratch from 3.5; a buffer of grid x num_ctas x size bytes when the size
// is above zero, else NULL), blockDim = 32 x num_warps, Triton's dynamic shared memory (opted in above
// 48 KiB by the caller), and a cluster launch when num_ctas > 1. The parameter count is checked against the
// .entry in the PTX, so a release with another ABI fails loudly instead of launching wrong.
#pragma once
#include <array>
#include <map>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"

// cuda.h's handle types, declared as cuda.h does, so that users of this header need no toolkit headers.
struct CUfunc_st;
struct CUstream_st;

namespace kb::cuda {

using DevicePtr = unsigned long long;  // CUdeviceptr

struct TritonLaunch {
  struct Param {
    std::string name, type, value;  // type "*fp16" / "i32" ...; value: "A" | "B" | "C" | an expression
  };
  std::string entry;
  std::vector<Param> params;
  std::vector<std::string> grid;
  std::map<std::string, int64_t> constexprs;
  int num_warps = 4, num_ctas = 1;
  std::array<int, 3> cluster{1, 1, 1};
  int64_t shared = 0;
  bool has_global_scratch = false, has_profile_scratch = false;
  int64_t global_scratch_size = 0, global_scratch_align = 1, profile_scratch_size = 0, profile_scratch_align = 1;
  int ptx_params = -1;  // .param count of the .entry in the PTX, -1 when there is no PTX

  // Reads <dir of art.binary_path>/launch.json and kernel.ptx. Throws InputError naming the file when
  // launch.json is missing or malformed, or when the PTX's parameter count differs from what the release's
  // ABI says (the user's arguments plus the hidden scratch pointers).
  static TritonLaunch read(const Artifact& art);

  // The launch for one problem: grid, the argument block, the scratch bytes to allocate. The pointers
  // given are the addresses of the device pointers (A, B, C, scratch) the argument block points at.
  struct Bound {
    std::array<unsigned, 3> grid{1, 1, 1};
    std::vector<int32_t> i32;     // storage for 32-bit scalars (stable: reserved before pointers are taken)
    std::vector<int64_t> i64;
    std::vector<void*> argv;
    size_t global_scratch_bytes = 0, profile_scratch_bytes = 0;
  };
  // Grid and scratch sizes only (to allocate the scratch before binding).
  Bound plan(const Shape& shape, int sms) const;
  // Fills b.argv: A, B, C, scratch are the device pointers' addresses.
  void bind(Bound& b, const Shape& shape, int sms, DevicePtr* A, DevicePtr* B, DevicePtr* C,
            DevicePtr* global_scratch, DevicePtr* profile_scratch) const;
  // Launches on `stream` (cuLaunchKernelEx with a cluster dimension when num_ctas > 1).
  void launch(CUfunc_st* fn, CUstream_st* stream, Bound& b) const;
};

// The number of parameters of `entry`'s .entry in PTX text; -1 if the entry is not found.
int ptx_entry_param_count(const std::string& ptx, const std::string& entry);

}  // namespace kb::cuda
