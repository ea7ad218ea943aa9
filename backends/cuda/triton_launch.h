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
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/triton/user_args.h"

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
  // How the kernel was lowered for each host tensor descriptor argument (metadata "tensordesc_meta"), in
  // argument order; absent: not to TMA. Triton 3.5's launch ABI expands such an argument into a CUtensorMap
  // (128 bytes by value), the shape (i32 each) and the strides (i64 each); one not lowered to TMA into the
  // base pointer, the shape and strides (i64), the padding flag (i1), the shape (i32) and strides (i64).
  struct TmaMeta {
    int swizzle = 0, elem_size = 0, elem_type = 0;
    std::vector<int64_t> block;
  };
  std::vector<std::optional<TmaMeta>> tensordesc_meta;
  int ptx_params = -1;  // .param count of the .entry in the PTX, -1 when there is no PTX
  std::vector<int> ptx_param_bytes;  // each .param's width in bytes, in order (empty when there is no PTX)

  // Reads <dir of art.binary_path>/launch.json and kernel.ptx. Throws InputError naming the file when
  // launch.json is missing or malformed, or when the PTX's parameter count differs from what the release's
  // ABI says (the user's arguments plus the hidden scratch pointers).
  static TritonLaunch read(const Artifact& art);

  // The launch for one problem: grid, the argument block, the scratch bytes to allocate. The pointers
  // given are the addresses of the device pointers (A, B, C, scratch) the argument block points at.
  struct Bound {
    std::array<unsigned, 3> grid{1, 1, 1};
    // Storage for the scalars, one 8-byte slot each, the value in its low bytes (little-endian) as wide as
    // the parameter (stable: reserved before pointers are taken).
    std::vector<uint64_t> scalars;
    struct alignas(64) TensorMap {
      unsigned char bytes[128];
    };
    std::vector<TensorMap> tensor_maps;  // host-built TMA descriptors (CUtensorMap), passed by value
    std::vector<void*> argv;
    size_t global_scratch_bytes = 0, profile_scratch_bytes = 0;
  };
  // Grid and scratch sizes only (to allocate the scratch before binding).
  Bound plan(const Shape& shape, int sms) const;
  // Fills b.argv: A, B, C, scratch are the device pointers' addresses.
  void bind(Bound& b, const Shape& shape, int sms, DevicePtr* A, DevicePtr* B, DevicePtr* C,
            DevicePtr* global_scratch, DevicePtr* profile_scratch) const;
  // The general form: each pointer parameter takes `pointers[value]` (kbisect's kernels: "A", "B", "C") or,
  // when its value is empty (a user's kernel), `pointers[name]`; an integer scalar is its expression (or
  // its name) over M, N, K, NUM_SMS, the constexprs and the shape's values; an fp32/fp64 scalar is
  // `reals[name]`; a host tensor descriptor (a user kernel's tensordesc argument) is encoded with
  // cuTensorMapEncodeTiled from `tensors[name]` and its device pointer, as Triton's launcher does. Each
  // argument's width must be the PTX parameter's (InputError otherwise).
  void bind(Bound& b, const Shape& shape, int sms, const std::map<std::string, DevicePtr*>& pointers,
            const std::map<std::string, double>& reals, DevicePtr* global_scratch, DevicePtr* profile_scratch,
            const std::map<std::string, triton::TensorArg>* tensors = nullptr) const;
  // The kernel parameters the user's arguments become (a tensor descriptor expands), without the scratch.
  int expanded_param_count() const;
  // Launches on `stream` (cuLaunchKernelEx with a cluster dimension when num_ctas > 1).
  void launch(CUfunc_st* fn, CUstream_st* stream, Bound& b) const;
};

// The number of parameters of `entry`'s .entry in PTX text; -1 if the entry is not found.
int ptx_entry_param_count(const std::string& ptx, const std::string& entry);
// Each parameter's width in bytes (.u64 / .b64 / .f64: 8, .u32 / .s32 / .f32: 4, .b16: 2, .u8: 1, an .align'ed
// byte array: its size); empty if the entry is not found.
std::vector<int> ptx_entry_param_bytes(const std::string& ptx, const std::string& entry);

}  // namespace kb::cuda
