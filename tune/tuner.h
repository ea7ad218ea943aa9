// `kbisect tune`: search a kernel's declared space for one toolchain, dtype and shape(s) on this machine.
//   1. enumerate the space (tune/space.h); points the kernel's checks refuse are kept with the reason;
//   2. compile the rest in parallel through the compile cache and prune on static metrics (tune/prune.h);
//   3. check every survivor's correctness, then race them (tune/race.h) within the budget;
//   4. confirm the winner against the built-in default in an interleaved A/B with fresh loads
//      (harness/ab.h) and report the gain with its CI.
// GPU candidates are ordered by the static model (tune/model.h): the race runs in its order, and without a
// device (or with --static-only) the order is the result, printed as an estimate (ShapeTune::static_only).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "harness/measure.h"
#include "harness/tuned_table.h"
#include "stats/stats.h"
#include "tune/model.h"
#include "tune/prune.h"
#include "tune/race.h"

namespace kb::tune {

struct TuneOptions {
  std::string kernel, toolchain;  // kernel name; toolchain name or file
  std::vector<Shape> shapes;
  DType dtype = DType::f32;
  double budget_s = 120;          // measuring time per shape: 3/4 racing, 1/4 confirming
  double alpha = 0.05;            // race: chance of dropping the true best; A/B: of a wrong verdict
  double threshold = 0.005;       // A/B: smallest gain that counts
  // Replaces the declared values of these parameters ("unknown parameter" / "empty space" are InputErrors).
  std::vector<std::pair<std::string, std::vector<ParamValue>>> space;
  PruneRule prune;
  std::string device;             // the device whose facts the model uses ("": the target's default; tune/target.h)
  bool static_only = false;       // rank on the static model even where the device can run
  int jobs = 0;                   // parallel compiles (0: one per core)
  int confirm_pairs_per_block = 8;
  uint64_t seed = 1;
};

struct Candidate {
  Params params;
  // "invalid" (the kernel's checks), "failed" (compile), "pruned" (static metrics), "incorrect",
  // "dropped" (race), "tied", "winner", "ranked" (static-only, in the model's order)
  std::string status;
  std::string reason;
  std::map<std::string, double> metrics;
  double prior = 0;
  RaceEntry race;
  std::optional<Estimate> estimate;  // the static model's (GPU candidates that compiled and were not pruned)
};

struct ShapeTune {
  Shape shape;
  Params default_params;          // the kernel's first built-in config
  std::vector<Candidate> candidates;
  std::optional<size_t> winner;   // index into candidates
  bool static_only = false;       // ranked by the static model, nothing measured
  std::string static_only_reason;
  std::string model;              // what ordered the candidates: the device facts used, or why the generic order
  int compiles = 0;               // compiles not served by the cache
  RaceResult race;                // rounds, looks, measuring time, stop
  double calibrate_s = 0;         // batch calibration of the survivors before the race (measuring time)
  // CPU clang: the survivors race on the builds with -Rpass-missed=regalloc (compiled once, for pruning);
  // what compiling the winner with the real toolchain found (same code hash or not). "" otherwise.
  std::string build_check;
  std::optional<stats::Decision> confirm;  // effect = log(winner / default) (negative: winner faster)
  double confirm_s = 0;
  double measuring_s() const { return calibrate_s + race.measured_s + confirm_s; }
  double gain_pct() const;        // default time / winner time - 1, in %
  stats::Interval gain_ci_pct() const;
};

struct TuneRun {
  std::string kernel, backend, toolchain, toolchain_identity, machine;
  DType dtype = DType::f32;
  std::vector<ShapeTune> shapes;
  // The table entries of this run (one per shape with a winner).
  std::vector<TunedEntry> entries() const;
};

// Throws InputError naming the field for bad options (unknown kernel or parameter, empty space, budget
// too small to measure anything); progress lines go to `log`.
TuneRun run_tune(const TuneOptions& opts, Log& log = quiet_log());

// The static stage alone over given points instead of the declared space (Triton's published configs, say):
// each compiled once, pruned, then estimated and ranked per shape; nothing is measured. Points the kernel's
// checks refuse stay as "invalid" with the reason.
TuneRun rank_points(const TuneOptions& opts, const std::vector<Params>& points, Log& log = quiet_log());

// The smallest --budget-s that measures anything: the race's first look for two candidates.
double minimum_budget_s();

}  // namespace kb::tune
