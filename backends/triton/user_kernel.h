// Users' own Triton kernels, declared by a `triton_kernel:` YAML file beside their .py source
// (docs/triton.md, "Your own kernels"): parsed into a KernelDecl per Triton-capable backend (cuda, hip),
// with the TritonSpec the compile path needs and the file's named shapes as the kernel's shape axis.
// Loaded files are registered for the process, so every layer that looks kernels up by name finds them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "backends/triton/triton_kernels.h"
#include "backends/triton/user_args.h"

namespace kb::triton {

struct UserKernel {
  std::string file;        // the YAML file (absolute)
  std::string name;
  std::vector<Shape> shapes;  // labelled shapes: name + values
  std::map<std::string, LaunchArgs> launches;  // each shape's arguments, by the shape's label
  ToleranceRule tolerance;    // how outputs are compared with the baseline toolchain's (`tolerance:`)
  std::string flops, bytes;   // expressions of the work per launch ("" when the file gives none)
  TritonSpec spec;
  std::vector<KernelDecl> decls;  // one per Triton-capable backend (cuda, hip); moved into the registry on load
};

// Reads and registers `path` (idempotent for the same file; InputError for another file that declares a
// kernel of the same name, or a name a built-in kernel has). Errors name file:line:col, the field and the value.
const UserKernel& load_user_kernel(const std::string& path);
// Parses without registering (tests, import-trace's check of what it wrote).
UserKernel parse_user_kernel(const std::string& path);

// The registered user kernels' declarations for `backend`; stable addresses for the process.
std::vector<const KernelDecl*> user_kernel_decls(const std::string& backend);
const UserKernel* find_user_kernel(const std::string& name);
// The value of `expr` (a kernel's flops or bytes) for a shape and parameters: its names are the shape's
// values and the integer parameters (constexprs, NUM_WARPS, NUM_STAGES); 0 for "" or when it cannot be
// evaluated (an unknown name: the work is then not reported).
double user_kernel_work(const UserKernel& k, const std::string& expr, const Shape& shape, const Params& params);

}  // namespace kb::triton
