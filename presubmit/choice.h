// Which changed cases get device time: value per expected device-second, picked by a 0/1 knapsack within the
// budget (docs/presubmit.md, "The choice rule", has a worked example).
//
//   value = weight × (1 + change points in the case's nightly history) × (1 + size of its static change)
//   cost  = blocks the sequential decision needs at the threshold (stats/sample_size.h) × seconds per block
//
// The cost comes from the case's history (time per execution and noise of its last nightly) or, for a case
// with none, from a first short measurement (a pilot of a few blocks). The bench bench/presubmit_value
// drives these same functions over generated diffs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "presubmit/config.h"

namespace kb::presubmit {

// What the choice rule knows of a changed case.
struct Candidate {
  double weight = 1;        // the config's weight of the case
  int change_points = 0;    // change points its nightly series carried (either direction)
  double static_size = 0;   // StaticCase::static_size: how far its static metrics moved
  double cost_s = 0;        // expected device seconds to decide it (> 0)
};
double value_of(const Candidate& c);

// The 0/1 knapsack: the subset of items of largest total value whose total cost is at most `capacity`.
// Dynamic programming over costs rounded UP to multiples of capacity/units: every answer fits the real
// budget, and it is optimal for the rounded costs, so it loses against the true optimum at most what the
// rounding takes (at most one unit per chosen item: with the default 4096 units and tens of chosen items,
// about 1% of the budget). O(items × units) time, exact and bounded, unlike branch and bound, whose worst
// case is exponential when many cases have nearly the same value per second (an LLVM bump).
std::vector<bool> knapsack(const std::vector<double>& values, const std::vector<double>& costs, double capacity,
                           int units = 4096);

struct Choice {
  std::vector<bool> chosen;  // per candidate
  double value = 0, cost_s = 0;
};
// The knapsack over value_of(candidate) and candidate.cost_s within budget_s.
Choice choose(const std::vector<Candidate>& candidates, double budget_s);

// What to measure next within `budget_s`: the knapsack's choice, most value per second first (should the
// measurements run long, what is left is the least valuable). Measurements that end under their predicted
// cost leave budget: the caller asks again with the cases not yet measured and what is left, until this is
// empty. Indices into `candidates`.
std::vector<size_t> measuring_order(const std::vector<Candidate>& candidates, double budget_s);

// How a measurement is priced: the decision's plan and what a block costs besides its pairs.
struct CostModel {
  double threshold = 0.005, alpha = 0.05;
  int block_pairs = 16, min_blocks = 10, max_blocks = 160;
  double block_overhead_s = 0.02, placement_sd = 0.006;
};
CostModel cost_model(const PresubmitConfig& cfg);

struct Cost {
  double seconds = 0;        // blocks × block_s
  int64_t blocks = 0;        // the planned look at which the decision is expected
  bool reached = true;       // false: even max_blocks leaves the CI wider than half the band (cost of max_blocks)
  double block_sd = 0;       // spread of the block medians of log(change/base) it assumed
  double block_s = 0;        // seconds per block it assumed
  double effect = 0;         // pilot: the |log-ratio| it expects (one standard error short of the pilot's)
  std::string from;          // "history" | "pilot"
};
// From the nightly history: seconds per execution and the per-sample relative spread. A block's median of P
// pairs spreads by kMedianSe·√2·cv/√P, and the placement of its loads adds placement_sd.
Cost cost_from_history(const CostModel& m, double sample_s, double sample_cv);
// From a pilot: its wall seconds per block and its blocks' medians of log(change/base); a pilot effect beyond
// the threshold shortens the decision it expects (stats/sample_size.h).
Cost cost_from_pilot(const CostModel& m, double block_s, const std::vector<double>& block_effects);

}  // namespace kb::presubmit
