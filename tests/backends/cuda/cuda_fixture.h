// Shared pieces of the CUDA backend tests: the backend, whether a driver and a usable device are present,
// the presets, and one compile that reports its error instead of throwing.
#pragma once
#include <dlfcn.h>

#include <string>

#include "backends/backend.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "tests/backends/compile_request.h"

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

// Why kernels cannot run here ("" when they can): no driver, or a driver without a usable device.
inline std::string gpu_skip_reason() {
  if (!driver_present()) return "no CUDA driver (libcuda.so.1): this test runs in scripts/gpu-check.sh";
  auto av = cuda_backend().available();
  return av.ok ? "" : "no usable CUDA device: " + av.reason;
}

// The preset of that name with its identity resolved; throws when this machine has none.
inline Toolchain preset(const std::string& name) {
  for (auto& t : cuda_backend().presets())
    if (t.name == name) {
      resolve_identity(t);
      return t;
    }
  throw Error("no preset " + name);
}

inline bool has_preset(const std::string& name) {
  for (auto& t : cuda_backend().presets())
    if (t.name == name) return true;
  return false;
}

struct Compiled {
  Artifact art;
  std::string error;  // the compile error with its log, empty when it compiled
};

// Compiles into a fresh temporary directory; errors are returned, not thrown (tests collect them).
inline Compiled compile(const KernelDecl& k, const Params& p, DType d, const Toolchain& tc) {
  CompileRequest req = test::compile_request(k, tc, p, d);
  req.out_dir = temp_dir("kb-cuda-test");
  Compiled c;
  try {
    c.art = cuda_backend().compile(req);
  } catch (const CompileError& e) {
    c.error = std::string(e.what()) + "\n" + e.log();
  } catch (const Error& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace kb::cudatest

// Skips the test, with the reason printed, unless a CUDA device can run kernels here.
#define KB_SKIP_WITHOUT_CUDA_DEVICE()                                                   \
  do {                                                                                  \
    if (const std::string kb_why_ = ::kb::cudatest::gpu_skip_reason(); !kb_why_.empty()) \
      GTEST_SKIP() << kb_why_;                                                          \
  } while (0)
