// What the Triton tests share: a release's preset (identity resolved), a kernel by name, a compile that
// keeps a skip or a failure as text, and the Python of an environment scripts/install-deps made. A missing
// environment fails the test naming scripts/install-deps: nothing stands in for a real Triton.
#pragma once
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "tests/backends/compile_request.h"

namespace kb::test {

// The preset of a release ("3.5.1", "3.8.0-tlx") for a target, identity resolved.
inline Toolchain triton_preset(Backend& be, const std::string& release, const std::string& target) {
  std::string t = target;
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  const std::string name = "triton-" + release + "-" + t;
  for (auto& tc : be.presets())
    if (tc.name == name) {
      resolve_identity(tc);
      return tc;
    }
  throw Error(name + " not found under " + triton::triton_env_root() + ": run scripts/install-deps");
}

inline const KernelDecl& kernel_named(Backend& be, const std::string& name) {
  for (const auto& k : be.kernels())
    if (k.name == name) return k;
  throw Error("no kernel " + name);
}

struct TritonCompiled {
  std::optional<Artifact> art;
  std::string skipped, failed;
};

inline TritonCompiled triton_compile(Backend& be, const Toolchain& tc, const std::string& k, const std::string& dir,
                                     Params p = {}, DType d = DType::f16) {
  auto req = compile_request(kernel_named(be, k), tc, p, d);
  req.out_dir = dir;
  req.timeout_s = 300;
  make_dirs(dir);
  TritonCompiled c;
  try {
    c.art = be.compile(req);
  } catch (const CompileSkipped& e) {
    c.skipped = e.what();
  } catch (const Error& e) {
    c.failed = e.what();
  }
  return c;
}

// The Python of an environment under the Triton root: "triton-3.5.1", "utlx-builds/triton-utlx-3.8.0.post14".
inline std::string triton_env_python(const std::string& env) {
  const std::string py = triton::triton_env_root() + "/" + env + "/bin/python";
  if (!file_exists(py)) throw std::runtime_error(py + " missing: run scripts/install-deps");
  return py;
}

}  // namespace kb::test
