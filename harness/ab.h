// Interleaved A/B measurement: two executables of one case (built by toolchains A and B) loaded in one
// process and measured in randomized rounds (harness/measure), so round i of A and B is a pair that
// shares the machine's drift.
//
// Loads, not rounds, are the unit of replication. Two loads of byte-identical code can run at
// different speeds for as long as they stay loaded (where their buffers and code landed: physical pages,
// cache-set and 4K-aliasing conflicts between the operands); pairing removes drift, not that. Measured
// here with one load per side: A/A "worse" or "better" in 57% of trials, e.g. +0.44% [+0.17%, +0.71%]
// after 512 pairs of identical code. So `kbisect ab` measures in BLOCKS: each block re-creates both
// executables (load again, fresh buffers, random creation order), measures a few interleaved pairs and
// summarizes them by the median of log(B_i/A_i); the block summaries are decided sequentially
// (stats::SequentialPaired: looks at min, 2 min, 4 min ... blocks, Bonferroni over the planned looks)
// until worse / better / same, or the budget runs out (unsure). Placement luck then varies between
// blocks and widens the CI honestly instead of biasing it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/log.h"
#include "harness/compare.h"
#include "harness/measure.h"
#include "harness/results.h"
#include "stats/stats.h"

namespace kb {

struct PairOutcome {
  std::vector<Measurement> m;   // [0] = A (base), [1] = B (new); round i of each is a pair
  stats::Decision decision;
  double wall_s = 0;            // measurement time including warmup
  int looks = 0;
  std::vector<double> block_effects;  // block design: median log(B/A) per block (empty otherwise)
  // m[i].placements: block design, where side i's load of each block landed (code and operand addresses)
};

// Measures a and b (both prepare()d) interleaved until decided or `budget_s` is spent. `measure` gives
// warmup, mode and batch sizing; its stop settings are replaced by the decision's (min/max pairs, the
// budget). Throws Error if a run throws.
PairOutcome measure_and_decide(Executable& a, Executable& b, const MeasureConfig& measure,
                               const stats::DecisionConfig& decision, double budget_s);

// A fresh executable of side 0 (A) or 1 (B) for one block: loaded again, prepared with new buffers.
using PairFactory = std::function<std::unique_ptr<Executable>(int side)>;

// The block design above. `decision` counts blocks (min_n / max_n = first / last planned look); each
// block measures `pairs_per_block` interleaved pairs after a short warmup. PairOutcome::m holds every
// pair of every block in order; block_effects the per-block medians of log(B/A).
PairOutcome measure_and_decide_blocks(const PairFactory& make, const MeasureConfig& measure,
                                      const stats::DecisionConfig& decision, double budget_s, int pairs_per_block);
// The same with a factory per side ({A, B}); factories that carry recipes measure every block in a worker
// process (harness/measure.h).
PairOutcome measure_and_decide_blocks(const std::vector<ExecutableFactory>& sides, const MeasureConfig& measure,
                                      const stats::DecisionConfig& decision, double budget_s, int pairs_per_block);

struct AbOptions {
  std::string sweep_file;
  std::string toolchain_a, toolchain_b;  // names or toolchain files
  double threshold = 0.005;
  double alpha = 0.05;
  double budget_s = 60;      // per case: measurement stops here at the latest (verdict unsure)
  int pairs_per_block = 16;  // pairs measured per pair of fresh loads; 0 = one load, looks on pairs
  int min_blocks = 10;       // first look (block design)
  int max_blocks = 160;      // last planned look (block design)
  int min_pairs = 16;        // first look (pairs_per_block = 0)
  int max_pairs = 2048;      // last planned look (pairs_per_block = 0)
  // Where each block is measured (MeasureConfig::placement): "process", a worker process per block of CPU
  // loads, is the only one whose CIs held across processes on bench/layout_calibration (docs/statistics.md).
  std::string placement = "process";
  std::string out_dir;       // results written here (atomic) when not empty
  std::string filter;        // regex on case ids
  uint64_t seed = 1;
  Log* log = nullptr;        // per-case progress lines (none when null)
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
