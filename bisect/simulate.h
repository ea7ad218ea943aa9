// Seeded synthetic histories for the bisector: a range of N compiler commits with one step of the
// kernel's time at a random commit, per-sample lognormal noise with outliers (stats/noise), builds that
// fail at some commits, and commits that leave the kernel's machine code unchanged. SimLab implements
// the oracle's Lab interface on such a history, so run_bisection() — the real strategy, the real
// decisions, the real loop — runs on it unchanged. Two baselines run on the same histories:
//  - plain bisect: fixed samples per side (mid vs good), two-sided Mann-Whitney at alpha, no hashes;
//  - a Pinpoint emulation: compare good vs bad, then bisect comparing the lower end with the midpoint;
//    each comparison starts at n per side and doubles up to a maximum while unsure; different at
//    p <= p_diff, same at p > p_same; samples of a commit are kept and reused across comparisons.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bisect/oracle.h"
#include "stats/noise.h"

namespace kb::bisect {

struct SimConfig {
  int commits = 1024;          // commits after good (the last is bad)
  double step = 0.005;         // relative slowdown at the culprit
  double base_time = 1e-3;
  NoiseModel noise{.cv = 0.01, .outlier_rate = 0.02};
  double build_fail = 0.03;    // probability a commit (not an endpoint) fails to build
  double code_change = 0.30;   // probability a commit changes the kernel's code (the culprit always does)
  // kbisect's decision settings. The threshold is the smallest change that matters; set below the step
  // (a step exactly at the threshold is a coin flip between "worse" and "same" by definition).
  double threshold = 0.0025;
  // The rest as a bisect config's defaults.
  double alpha = MeasureSettings{}.alpha;
  int min_samples = MeasureSettings{}.min_samples;
  int max_samples_per_step = Budgets{}.max_samples_per_step;
  // Placement (bisect/oracle.h): every load of a commit's executable runs at a fixed lognormal offset of
  // this sd for as long as it stays loaded (0: the spec's model, no placement effect). kbisect measures in
  // blocks of block_rounds rounds with fresh loads (0: one load per commit for the whole bisection).
  double load_sd = 0;
  int block_rounds = MeasureSettings{}.block_rounds;
  // baselines
  int plain_samples = 10;
  double plain_alpha = 0.05;
  int pinpoint_start = 10, pinpoint_max = 160;
  double pinpoint_p_diff = 0.05, pinpoint_p_same = 0.10;
  // Expensive samples (Plan::expensive): the posterior's stop, the runs cap, a build's cost in runs for the
  // choice of where to run, and how much run durations vary (runs in flight end in that order).
  double confidence = MeasureSettings{}.confidence;
  int max_runs = 5000;
  double build_cost = 0;
  double run_spread = 0.2;
};

struct History {
  int n = 0;                    // commits including good (index 0) and bad (index n-1)
  int culprit = 0;              // first slow commit, 1..n-1 (with `changes`: the largest regression)
  // Several changes: (commit, relative step) in commit order, e.g. {{300, +0.01}, {700, +0.005},
  // {900, -0.004}}: two regressions and a partial recovery. Empty: one step of SimConfig::step at culprit.
  std::vector<std::pair<int, double>> changes;
  std::vector<bool> build_fails;
  std::vector<uint64_t> code;   // code identity per commit
  double time_at(int i, const SimConfig& c) const {
    if (changes.empty()) return c.base_time * (i >= culprit ? 1 + c.step : 1.0);
    double t = c.base_time;
    for (const auto& [k, step] : changes)
      if (i >= k) t *= 1 + step;
    return t;
  }
  std::vector<int> regressions() const;   // commits of the changes > 0 (or {culprit})
  std::vector<int> improvements() const;  // commits of the changes < 0
};

History make_history(const SimConfig& c, uint64_t seed);
// A history with several changes of the given relative sizes at random distinct commits (at least
// min_gap commits apart, in the order given).
History make_history_steps(const SimConfig& c, uint64_t seed, const std::vector<double>& steps, int min_gap = 8);

struct MethodResult {
  bool exact = false;    // named the true culprit
  bool correct = false;  // exact, or ambiguous with the true culprit among candidates that only skips hide
  std::string verdict;
  int named = -1;        // the commit named (the main culprit), -1 for none
  int builds = 0;
  int64_t samples = 0;
  int visited = 0, measured = 0;
  int rounds = 0;
  double wall = 0;       // expensive samples: simulated time to the verdict, in runs (SimLab::clock)
  // Several changes: verified regressions / improvements named, those that are true, and spurious ones.
  int regressions_found = 0, regressions_true = 0, improvements_found = 0, improvements_true = 0;
  bool all_found = false;  // every true regression (and improvement, when asked) named, nothing else
};

struct Outcome;  // bisect/bisector.h

// kbisect's settings beyond SimConfig for one run.
struct RunOptions {
  std::vector<double> weights;  // prior weights per commit (empty: uniform)
  int workers = 1;
  bool several = true, report_improvements = false;
  bool use_hashes = true;
  bool expensive = false;       // single runs, probabilistic bisection (docs/bisect.md, "L3")
  Outcome* outcome = nullptr;  // when set, receives the loop's outcome (the wall-clock model replays it)
  std::function<void(const std::string&)> log;  // the loop's progress lines (bisect_sim --trace)
};

// Single runs (expensive samples): each run is a fresh process, its own lognormal noise, outlier and
// placement offset, seeded by the commit and the run's ordinal; it takes 1 + U(0, run_spread) time units, so
// that runs in flight together end in a seeded order. clock() is the simulated time at the last run's end.
class SimLab : public Lab {
 public:
  SimLab(const SimConfig& c, const History& h, uint64_t seed);
  Probe probe(const std::string& sha) override;
  Measured measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) override;
  int start_run(const std::string& sha, int ordinal) override;
  RunDone wait_run() override;
  double clock() const { return clock_; }
  static std::string sha_of(int i);
  static int index_of(const std::string& sha);

 private:
  const SimConfig& c_;
  const History& h_;
  uint64_t seed_;
  struct Flying {
    int ticket;
    double end;
    RunDone done;
  };
  std::vector<Flying> flying_;
  int tickets_ = 0;
  double clock_ = 0;
};

MethodResult run_kbisect(const SimConfig& c, const History& h, uint64_t seed, const RunOptions& opts = {});
MethodResult run_plain_bisect(const SimConfig& c, const History& h, uint64_t seed);
// told: Pinpoint is told the regression exists (its good-vs-bad reproduction gate is skipped).
MethodResult run_pinpoint(const SimConfig& c, const History& h, uint64_t seed, bool told = false);

}  // namespace kb::bisect
