// The pure decisions of a bisection step (no I/O): how measured units or static values place a commit
// on the good or the bad side, or at a level of its own. Shared by the real lab's bisection and the
// simulation (bisect/simulate).
//
//  - static metrics: compare values, no timing at all;
//  - timed metrics: the paired, interleaved rounds (good, bad, commit) are decided sequentially on
//    d_i = log(t_i / sqrt(g_i * b_i)), the commit's time relative to the midpoint of the two levels
//    measured in the same round: CI above 0 -> bad side, below 0 -> good side, else more rounds (looks at
//    min, 2 min, 4 min ... up to the step budget, Bonferroni over the looks, stats::SequentialPaired).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bisect/config.h"
#include "bisect/strategy.h"
#include "stats/stats.h"

namespace kb::bisect {

// Values of an interleaved measurement: [commit][i], each value the case-aggregated sample of that commit
// (geometric mean over the cases of their per-case samples) in round i, or its block summary in unit i.
using Rounds = std::vector<std::vector<double>>;
// The number of units every commit has (the shortest row).
int64_t common_units(const Rounds& r);

// A sequential paired decision over rounds: `pair` maps the rounds to (base, next); looks at
// min_n * 2^k rounds up to max_n. Use as the stop rule of a measurement, then finish() with all rounds.
class SequentialRule {
 public:
  using PairFn = std::function<std::pair<std::vector<double>, std::vector<double>>(const Rounds&)>;
  SequentialRule(stats::DecisionConfig cfg, PairFn pair);
  bool operator()(const Rounds& r);          // true when decided
  stats::Decision finish(const Rounds& r);   // the decision at the end (a final look if the budget ended between looks)
  bool decided() const { return decided_; }

 private:
  stats::SequentialPaired seq_;
  PairFn pair_;
  stats::Decision last_;
  bool decided_ = false;
  int64_t looked_at_ = 0;
};

// Rule for a step: rounds [good, bad, commit] -> d = log(commit / sqrt(good * bad)).
SequentialRule side_rule(double alpha, int min_n, int max_n);
// Rule for good vs bad (reproduce) or parent vs culprit (verify): rounds [base, new] -> log(new / base),
// decided against the regression threshold.
SequentialRule threshold_rule(double threshold, double alpha, int min_n, int max_n);
// Where a measured commit's level lies against the two reference levels of the range being searched:
// A (the range's first commit) and B (its last). `between`: clearly apart from both, on the way from A to
// B (an intermediate level: a second step lies on each side); `beyond_b` / `beyond_a`: clearly past B
// (or A) away from the other (a step back lies inside the range: an improvement after a regression).
enum class Level { a, b, between, beyond_a, beyond_b };
std::string to_string(Level l);

struct StepDecision {
  std::optional<Level> level;   // nullopt: undecided at the budget (a skip)
  stats::Decision side;         // d = log(t / sqrt(A * B)): the nearer level
  stats::Decision vs_a, vs_b;   // log(t / A), log(t / B) against the threshold
};

// The decision for one or more commits measured together with the two references: rounds
// [A, B, t_1 .. t_k]. `b_worse`: B is the slower (or larger) level. Each commit is decided at the first
// look where either the side rule (the sign of d, CI excluding 0) decides, or — with `levels` —
// it is clearly apart from both references (vs_a and vs_b each "worse"/"better" in the threshold rule:
// CI excluding 0 and not inside the equivalence band). At the deciding look an apartness from both
// levels makes it `between` / `beyond_*` rather than `a` / `b`. Looks at min_n * 2^k (Bonferroni over the
// planned looks, per test); the apartness tests use alpha / 10 (a false intermediate level costs a whole
// extra search, a false side only a wrong turn that verification catches). The stop rule of a measurement is "every commit decided".
class StepRule {
 public:
  // With `levels`, a commit whose side is decided but whose test against that side's level is still open
  // with an estimate beyond the threshold toward the other level is measured further (it may be an
  // intermediate level); with `extend` also when the estimate points away from the other level (past it:
  // an improvement inside the range, for report_improvements).
  StepRule(double threshold, double alpha, int min_n, int max_n, int commits, bool b_worse, bool levels,
           bool extend = false);
  bool operator()(const Rounds& r);                  // true when every commit is decided
  std::vector<StepDecision> finish(const Rounds& r);  // per commit (a final look if the budget ended between looks)

 private:
  void look(const Rounds& r, int64_t n, bool last);
  stats::DecisionConfig side_cfg_, lvl_cfg_;
  std::vector<stats::SequentialPaired> side_, va_, vb_;
  std::vector<StepDecision> out_;
  std::vector<bool> done_;
  bool b_worse_, levels_, extend_between_, extend_beyond_;
  double band_ = 0;
  int64_t looked_at_ = 0;
};

// Side of a step decision: worse -> bad, better -> good, otherwise nullopt (unsure).
std::optional<Side> side_of(const stats::Decision& d);

// Did a static value move from `from` to `to` by at least the threshold (relative, or absolute)?
bool moved_beyond(double from, double to, double threshold, bool absolute);
// Static metrics: per case, did bad move beyond the threshold from good (in either direction)?
std::vector<bool> static_regressed(const std::vector<double>& good, const std::vector<double>& bad, double threshold,
                                   bool absolute);
// Side of a commit's static values: bad when a regressed case moved from good by at least the threshold
// in the direction good -> bad, else good.
Side static_side(const std::vector<double>& good, const std::vector<double>& bad, const std::vector<double>& commit,
                 const std::vector<bool>& regressed, double threshold, bool absolute);

// The metric's value in a compiled case's static results (throws InputError when the backend does not
// report it); `column` names the metric when m is Metric::column.
double static_metric_value(Metric m, const std::string& backend, const std::map<std::string, double>& metrics,
                           int64_t code_bytes, double max_error, const std::string& column = "");

}  // namespace kb::bisect
