// Shared pieces of the CUDA backend tests: the backend and whether a driver is present.
#pragma once
#include <dlfcn.h>

#include "backends/backend.h"
#include "core/error.h"

namespace kb::cudatest {

inline Backend& cuda_backend() {
  Backend* b = find_backend("cuda");
  if (!b) throw Error("cuda backend not built in");
  return *b;
}

// libcuda.so.1 loads (the toolkit's stub is not on the loader path, so this means a real driver).
inline bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace kb::cudatest
