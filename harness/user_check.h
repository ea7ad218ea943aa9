// The correctness of a user's Triton kernel (docs/triton.md, "Checked against the baseline"): there is no
// reference implementation, so the baseline toolchain's outputs are the reference. The first toolchain that
// runs a case in this process is its baseline (a sweep's or compare's first toolchain, ab's A, a bisection's
// good commit, which the loop loads first); its outputs stay where they live (OutputSnapshot) and every other
// build of the same kernel, dtype, shape and fixed parameters runs on the same inputs and is compared with
// them: bitwise when both are the same Triton release with the same parameters, else within the kernel
// file's per-dtype tolerance. Tunable parameters (the file's `space`) must not change what the kernel
// computes, so a point of `kbisect tune` or another config is held to the same baseline, within tolerance.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "harness/check.h"

namespace kb {

class OutputReferences {
 public:
  struct Ref {
    std::shared_ptr<const OutputSnapshot> outputs;
    std::string toolchain, release;  // the baseline's name and Triton release
    std::string params;              // its parameters (Params::str())
  };
  // Snapshots are dropped oldest first beyond `max_bytes` of device memory (a dropped case's next build
  // becomes its new baseline, and says so).
  explicit OutputReferences(int64_t max_bytes = int64_t(8) << 30) : max_bytes_(max_bytes) {}
  std::optional<Ref> find(const std::string& key);
  void put(const std::string& key, Ref ref);

 private:
  std::mutex mu_;
  int64_t max_bytes_;
  std::list<std::pair<std::string, Ref>> items_;  // oldest first
};

// The Triton release of a toolchain (backends/triton/triton_compile.h).
using triton::triton_release;

// The reference a case of a user kernel is held to: kernel, dtype, shape and the parameters outside the
// kernel's tunable space.
std::string user_reference_key(const KernelDecl& k, const Params& p, DType d, const Shape& s);

// The check of a user kernel's executable after its first run on `key`'s inputs (user_reference_key): the
// baseline keeps its outputs and passes ("baseline"); any other build is compared with them.
Check check_user_outputs(const std::string& key, const Toolchain& tc, const Params& params,
                         const triton::UserKernel& kernel, Executable& exe, OutputReferences& refs);

}  // namespace kb
