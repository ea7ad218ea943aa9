// The registry of the backends compiled into this build. In a file of its own: backend.cpp holds what every
// backend uses (defines, identities), and a program that loads only CPU kernels (the block worker) links it
// without pulling in the GPU backends and their libraries.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"

namespace kb {

#if KBISECT_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend();
#endif
#if KBISECT_WITH_HIP
std::unique_ptr<Backend> make_hip_backend();
#endif

std::vector<Backend*> backends() {
  static std::vector<std::unique_ptr<Backend>> owned = [] {
    std::vector<std::unique_ptr<Backend>> v;
    v.push_back(make_cpu_backend());
#if KBISECT_WITH_CUDA
    v.push_back(make_cuda_backend());
#endif
#if KBISECT_WITH_HIP
    v.push_back(make_hip_backend());
#endif
    return v;
  }();
  std::vector<Backend*> out;
  for (auto& b : owned) out.push_back(b.get());
  return out;
}

Backend* find_backend(const std::string& name) {
  for (auto* b : backends())
    if (b->name() == name) return b;
  return nullptr;
}

Backend& backend_for(const Toolchain& tc) {
  if (auto* b = find_backend(tc.backend)) return *b;
  throw InputError(fmt::format("toolchain '{}' needs backend '{}', which is not built into this kbisect", tc.name,
                               tc.backend));
}

const KernelDecl& find_kernel(const std::string& backend, const std::string& name) {
  Backend* b = find_backend(backend);
  if (!b) throw InputError(fmt::format("backend '{}' is not built into this kbisect", backend));
  std::string names;
  for (const auto& k : b->kernels()) {
    if (k.name == name) return k;
    names += (names.empty() ? "" : ", ") + k.name;
  }
  for (const KernelDecl* k : triton::user_kernel_decls(backend))
    if (k->name == name) return *k;
  throw InputError(fmt::format("unknown kernel '{}' for backend {} (kernels: {})", name, backend, names));
}

std::vector<const KernelDecl*> all_kernels() {
  std::vector<const KernelDecl*> out;
  for (auto* b : backends()) {
    for (const auto& k : b->kernels()) out.push_back(&k);
    for (const KernelDecl* k : triton::user_kernel_decls(b->name())) out.push_back(k);
  }
  return out;
}

}  // namespace kb
