// The one Triton compile path (docs/triton.md), used by the cuda and hip backends alike for toolchains of
// kind "triton": the toolchain's `compiler` is a Python whose environment has a Triton (a virtual
// environment, or a source build on PYTHONPATH through `env`), and kbisect runs its compile driver
// (kernels/triton/kb_triton_aot.py) with it, ahead of time, for the toolchain's explicit target. No GPU
// and no driver are needed. The backends read the static metrics from the binary it leaves.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/triton/triton_kernels.h"

namespace kb::triton {

// The Triton target of a toolchain: "sm_90a" -> cuda 90 (Triton emits sm_90a for 90), "sm_80" -> 80,
// "sm_100a" -> 100, "gfx942" -> hip gfx942 (wave 64). Throws InputError naming the toolchain otherwise.
struct Target {
  std::string backend;  // "cuda" | "hip"
  std::string arch;     // "90" | "gfx942"
  int warp_size = 32;
};
Target parse_target(const Toolchain& tc);

// What a compile left in req.out_dir: the binary, every IR stage, kernel.json (Triton's metadata) and
// launch.json (what the launcher needs: the parameters in order, the grid, warps, shared memory and the
// scratch buffers). Throws CompileSkipped (the release or target cannot take the kernel), CompileError
// (the compiler rejected it: its own message) or EnvError (the Python cannot run or Triton cannot be
// imported).
struct Compiled {
  std::string binary_path;   // kernel.cubin | kernel.hsaco
  std::string entry;         // the kernel's symbol (metadata "name")
  std::string version;       // triton.__version__
  double compile_s = 0;      // triton.compile's own wall time
  std::string log;           // ptxas -v as the release ran it (CUDA), else the driver's stderr tail
  nlohmann::json metadata;   // kernel.json
  int num_warps = 0;         // total warps per program (after warp specialization)
  int64_t shared_bytes = 0;  // dynamic shared memory / LDS Triton asks for at launch
};
Compiled compile(const CompileRequest& req);

// The compile-driver spec for a request (also what `explain` and tests use to compile by hand): every
// argument with the value the kernel is called with (a user kernel's shape's arguments, or, without one, a
// value of the declared kind and divisibility), the typed constexprs, and the options (the toolchain's flags
// and the kernel's opt.* parameters).
nlohmann::json driver_spec(const CompileRequest& req, const TritonSpec& spec, const std::string& out_dir);

// What of a user kernel's shape decides how Triton's JIT specializes it: per argument, an integer's class (equal
// to 1; i32 or i64; divisible by 16), a tensor's dtype and whether its storage fits a 32-bit pointer range
// (AMD buffer ops). Every release from 3.2 on specializes on these and nothing else, so two shapes with the
// same classes compile to the same kernel. "" for any other kernel, or a case without a shape's arguments;
// part of the compile cache's key.
std::string jit_specialization_key(const CompileRequest& req);

// The identity of a Triton toolchain: the Triton version and git hash, libtriton's and the bundled
// ptxas' SHA-256, the Python, the target, the options (flags), the toolchain's environment and the
// TRITON_* / AMDGCN_* knobs this process would pass on. Sets tc.version_text to "triton X.Y.Z (...)".
void identify(Toolchain& tc);

// The Triton release of a toolchain from its identified version text ("3.5.1" from "triton 3.5.1 git abc
// (...)"); "" when it is not a Triton toolchain.
std::string triton_release(const Toolchain& tc);

// Toolchains for the Triton environments found under triton_env_root(): one per environment and target.
std::vector<Toolchain> presets(const std::string& backend);
// $KBISECT_TRITON_DIR, else $XDG_CACHE_HOME/kbisect/triton, else ~/.cache/kbisect/triton (where
// scripts/install-deps makes one virtual environment per release: triton-X.Y.Z/).
std::string triton_env_root();

// Triton compile options from a toolchain's flags ("key=value": enable_fp_fusion=false, maxnreg=128, ...).
nlohmann::json flag_options(const Toolchain& tc);

}  // namespace kb::triton
