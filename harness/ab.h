// Interleaved A/B measurement: two executables of one case (built by toolchains A and B) loaded in one
// process and measured in randomized blocks (harness/measure), so round i of A and B is a pair that
// shares the machine's drift. The paired log-ratios log(B_i/A_i) are decided sequentially
// (stats::SequentialPaired: looks at 16, 32, 64 ... pairs, Bonferroni over the planned looks) until the
// verdict is worse / better / same or the case's time budget runs out (then: unsure).
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"
#include "harness/compare.h"
#include "harness/measure.h"
#include "harness/results.h"
#include "harness/stats.h"

namespace kb {

struct PairOutcome {
  std::vector<Measurement> m;   // [0] = A (base), [1] = B (new); round i of each is a pair
  stats::Decision decision;
  double wall_s = 0;            // measurement time including warmup
  int looks = 0;
};

// Measures a and b (both prepare()d) interleaved until decided or `budget_s` is spent. `measure` gives
// warmup, mode and batch sizing; its stop settings are replaced by the decision's (min/max pairs, the
// budget). Throws Error if a run throws.
PairOutcome measure_and_decide(Executable& a, Executable& b, const MeasureConfig& measure,
                               const stats::DecisionConfig& decision, double budget_s);

struct AbOptions {
  std::string sweep_file;
  std::string toolchain_a, toolchain_b;  // names or toolchain files
  double threshold = 0.005;
  double alpha = 0.05;
  double budget_s = 60;      // per case: measurement stops here at the latest (verdict unsure)
  int min_pairs = 16;        // first look
  int max_pairs = 2048;      // last planned look
  std::string out_dir;       // results written here (atomic) when not empty
  std::string filter;        // regex on case ids
  uint64_t seed = 1;
  bool progress = false;     // per-case lines on stderr
};

struct AbRun {
  RunResults results;        // kind "ab": both cases' raw samples; extra: pairs and verdicts
  Comparison comparison;     // the verdict table (same shape as `compare`)
  std::string results_path;  // where results were written ("" if not)
};

// Expands the sweep once per toolchain, pairs cases by key, prepares both (compile, load, correctness)
// and decides each pair. Cases that cannot run on either side are listed as not compared with the
// reason. Throws InputError for a bad sweep / toolchain.
AbRun run_ab(const AbOptions& opts);

}  // namespace kb
