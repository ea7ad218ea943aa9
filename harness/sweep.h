// Sweeps in YAML (yaml-cpp): kernels x parameter axes x dtypes x shapes x toolchains, expanded into
// planned cases. Unsupported combinations are kept as skipped cases with a recorded reason.
//
//   name: smoke
//   tier: l1                         # default tier of the benchmarks
//   tiers: {l1: {budget_s: 60}, l2: {budget_s: 3600}}   # optional: measuring-time budget per tier, split
//                                    # evenly over the tier's runnable cases (caps measure.max_time_s)
//   toolchains: [clang-19, my-tc.yaml]
//   measure: {mode: hot, warmup_s: 0.05, min_samples: 10, max_samples: 2000, min_time_s: 0.05,
//             max_time_s: 3, noise: 0.5%, min_sample_s: 0.0005}
//   shape_sets: {mine: shapes/mine.yaml}   # extra named sets; built in: tritonbench-square, llama
//   benchmarks:
//     - kernel: matmul_tiled
//       backend: cpu                 # optional: only toolchains of this backend
//       config: best                 # optional: start from a built-in config
//       params: {BM: [64, 96], BK: {range: [128, 512, 128]}, NR: {pow2: [16, 32]}}
//       zip: {MR: [4, 6], NR: [16, 32]}   # optional: parameters that go together
//       dtypes: [f32, bf16]
//       shapes: [[512, 512, 512], {M: 256, N: 512, K: 128}]   # or {set: llama}, {zip: {M: [..], ..}},
//                                                              # or {M: [..], N: [..], K: [..]} (product)
//       tier: l2
//       toolchains: [g++]            # optional per-benchmark override
//       measure: {...}               # optional per-benchmark override
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/toolchain.h"
#include "harness/case.h"
#include "harness/measure.h"

namespace kb {

struct PlannedCase {
  Case c;
  std::shared_ptr<const Toolchain> toolchain;  // identity resolved; shared by the sweep's cases
  std::optional<std::string> skip_reason;  // set when the combination cannot run (kept in results)
  MeasureConfig measure;
};

struct SweepOptions {
  std::vector<std::string> toolchains;  // overrides the sweep's toolchains (names or files)
  std::string filter;                   // ECMAScript regex matched against Case::id()
  std::string tier;                     // keep only benchmarks of this tier ("" = all)
};

struct Sweep {
  std::string name, file;
  std::vector<std::shared_ptr<const Toolchain>> toolchains;  // resolved (identity computed)
  std::vector<PlannedCase> cases;      // expanded, filtered
  std::map<std::string, double> tier_budget_s;  // `tiers: {l1: {budget_s: 60}}`: measuring time per tier
};

// Parses and expands a sweep file. Throws InputError with file:line:col and the field for bad input.
Sweep load_sweep(const std::string& path, const SweepOptions& opts = {});
Sweep parse_sweep(const std::string& yaml_text, const std::string& origin, const SweepOptions& opts = {});

// Shape sets: built-in names resolve to sweeps/shapes/<name>.yaml under the sweeps directory.
std::vector<Shape> load_shape_set(const std::string& name_or_path, const std::string& relative_to);
std::string sweeps_dir();  // $KBISECT_SWEEPS_DIR, installed share/kbisect/sweeps, or the source tree's

// "0.5%" -> 0.005, "0.005" -> 0.005. Throws InputError naming `what`.
double parse_fraction(const std::string& text, const std::string& what);

}  // namespace kb
