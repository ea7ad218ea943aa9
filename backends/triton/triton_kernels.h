// The Triton kernels kbisect ships (kernels/triton/matmul.py): each declared once here and compiled by
// the cuda and hip backends alike from the same source, by a toolchain of kind "triton". A declaration
// is a KernelDecl (parameters, dtypes, configs, the tunable space, constraints) plus the TritonSpec the
// compile driver and the launcher need: the signature, which arguments are assumed divisible by 16, the
// grid and what a release must offer.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.h"

namespace kb::triton {

// One kernel argument. `type` is Triton's ("*fp16", "i32", "constexpr"); in a declaration a pointer may
// say "*A" / "*B" (the operand's dtype) and the value of a scalar or constexpr is an expression over the
// problem (M, N, K, NUM_SMS), the kbisect parameters and IEEE (1 for fp32 operands).
struct TritonArg {
  std::string name;
  std::string type;
  std::string value;      // expression: scalars and constexprs; for pointers the operand: "A", "B", "C"
  bool divisible = false; // compiled with tt.divisibility=16 (the JIT's "D" specialization)
  bool output = false;    // a user kernel's pointer that a run writes (compared with the baseline's)
  bool large = false;     // a compile-only case's tensor of 2 GiB or more (no AMD 32-bit pointer range)
};

// A release/target combination that cannot take a kernel: skipped with the reason (before compiling).
struct UnsupportedRule {
  std::string backend;  // "cuda" | "hip"
  std::string arch;     // "sm_80", "gfx942", ... ("" for every arch of the backend)
  std::string below;    // a Triton version; the rule holds for releases older than it ("" for every release)
  std::string reason;
};

struct TritonSpec {
  std::string source;                   // absolute path of a user kernel's .py; "" for kbisect's own kernels
  std::string function;                 // the @triton.jit function in the source
  // The function for a target where it is another one (a TLX kernel written per architecture:
  // "sm_100a" -> "tlx_matmul_ws_blackwell"); `function` for every other target.
  std::map<std::string, std::string> function_by_target;
  const std::string& function_for(const std::string& target) const {
    auto it = function_by_target.find(target);
    return it == function_by_target.end() ? function : it->second;
  }
  std::vector<TritonArg> args;          // in the function's order
  std::vector<std::string> grid;        // 1 to 3 expressions
  std::vector<std::string> requires_features;  // "warp_specialize", "device_tensor_descriptor", "tlx"
  std::vector<UnsupportedRule> unsupported;
  // A text the TTGIR must hold after the compile, else the case is skipped with `expect_reason`
  // (a loop asked to be warp-specialized that the release compiled without it).
  std::string expect_ttgir, expect_reason;
};

// kbisect's Triton compile options have a namespace of their own in a kernel's parameters: "opt." and the
// option as Triton spells it (opt.num_warps, opt.num_stages, opt.num_ctas, opt.maxnreg, opt.enable_fp_fusion,
// any option the release accepts). A Python identifier never holds a '.', so no constexpr of a kernel (a
// NUM_STAGES, a num_warps) can take one of these names or be taken for one.
inline constexpr const char* kOptionPrefix = "opt.";
inline constexpr const char* kNumWarps = "opt.num_warps";
inline constexpr const char* kNumStages = "opt.num_stages";
inline bool is_option_param(const std::string& name) { return name.rfind(kOptionPrefix, 0) == 0 && name.size() > 4; }
// "opt.num_warps" -> "num_warps".
inline std::string option_name(const std::string& param) { return param.substr(4); }

// The Triton kernels declared for `backend` ("cuda" or "hip"): the same declarations, one per backend.
std::vector<KernelDecl> triton_kernel_decls(const std::string& backend);
// Whether `kernel` is one of kbisect's own Triton kernels (not a user's).
bool is_builtin_triton_kernel(const std::string& kernel);
// Whether `name` is the exact name of a kernel kbisect ships on any backend (cpu, cuda, hip, or Triton), built
// into this binary or not: a user's kernel may not take it. Names are reserved exactly (matmul_kernel is free).
bool is_builtin_kernel_name(const std::string& name);
// The spec of a Triton kernel by name, kbisect's own or a loaded user kernel's; nullptr when it is neither.
const TritonSpec* find_triton_spec(const std::string& kernel);

// The compile driver shipped with the kernels (kernels/triton/kb_triton_aot.py), relative to the kernel
// directory; hashed into every Triton kernel's cache key.
inline constexpr const char* kDriverSource = "triton/kb_triton_aot.py";

}  // namespace kb::triton
