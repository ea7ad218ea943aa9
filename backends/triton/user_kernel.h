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

namespace kb::triton {

struct UserKernel {
  std::string file;        // the YAML file (absolute)
  std::string name;
  std::vector<Shape> shapes;  // labelled shapes: name + values
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

}  // namespace kb::triton
