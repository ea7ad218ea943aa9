// Sweeps in YAML (yaml-cpp): kernels x parameter axes x dtypes x shapes x toolchains, expanded into
// planned cases. Unsupported combinations are kept as skipped cases with a recorded reason.
// The grammar: docs/sweeps.md.
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
  // `config: tuned` only: how the params were found ("exact", "nearest: ..." or "fallback: <reason>").
  std::string tuned;
};

// A skip reason when a shape's operands (A, B and C as fp32) need more than `memory_bytes`, e.g.
// "needs 12 TB of operands, more than the 135 GB of memory" for 1e6 x 1e6 x 1e6; 0 means this machine's
// physical memory. Sweeps check it before anything is allocated.
std::optional<std::string> shape_memory_reason(const Shape& s, double memory_bytes = 0);

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
