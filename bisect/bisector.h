// The bisection driver.
//
//   1. validate the range (refs exist, good is an ancestor of bad, range not empty);
//   2. reproduce first: probe good and bad; static metrics compare values, identical code means nothing
//      to find, otherwise measure good vs bad interleaved against the threshold -> `not-reproduced` with
//      the evidence unless bad is worse beyond the threshold;
//   3. steps, over a work list of ranges (a, b] whose two end levels differ (first: good..bad): the
//      strategy picks the commit(s) that split the range's prior weight (workers > 1: several commits per
//      round, probed concurrently and measured together); a probe (toolchain + compile) either fails
//      (skip), has the code hash of a commit at one of the range's end levels (that level, no
//      measurement), has static values (level by value) or is measured interleaved with the range's two
//      end commits until decided (unsure at budget -> skip). A commit clearly apart from both end levels
//      is an intermediate level: both sub-ranges are searched (several culprits). A commit clearly past
//      the last level marks a step back (an improvement) after it, searched with report_improvements;
//   4. verify: each culprit against its parent with a fresh, larger sample; the main culprit is the
//      verified regression with the largest effect.
// run_bisection() is that loop over an abstract Lab (oracle.h), so the simulation drives the same code;
// bisect() wires it to git, the provider, the real lab, the journal and the reports.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/config.h"
#include "git/git.h"
#include "bisect/journal.h"
#include "bisect/oracle.h"
#include "bisect/strategy.h"
#include "stats/stats.h"

namespace kb::bisect {

struct Plan {
  std::vector<std::string> shas;  // walk order: [0] good ... [n-1] bad
  Metric metric = Metric::time;
  std::string metric_column;  // metric == column: its name (metric_label)
  double threshold = 0.005;
  bool threshold_absolute = false;
  Budgets budgets;
  int min_samples = 16;           // first look (rounds)
  // Loaded executables (time, tflops): measure in blocks of this many rounds with fresh loads per block
  // (oracle.h); 0: one load per commit, units are rounds. Other metrics: 0.
  int block_rounds = 0;
  // A measurement's units: the first planned look and the last (blocks: at least kMinBlocks first, and
  // budgets.max_samples_per_step rounds as whole blocks; rounds: min_samples and max_samples_per_step).
  int first_units() const;
  int max_units() const;
  static constexpr int kMinBlocks = 8;  // signed-rank on fewer blocks cannot reach alpha/looks
  double alpha = 0.05;
  double max_step_s = 120;
  uint64_t seed = 1;
  std::vector<double> weights;    // prior weight per commit (empty: all equal)
  bool use_hashes = true;         // classify equal code hashes without measuring
  bool several = true;            // search both sides of an intermediate level (several culprits)
  bool report_improvements = false;  // also search ranges where the metric gets better
  int workers = 1;                // commits probed and measured per round (parallel rounds)
  // Builds in flight (> 1: the loop tells the lab, before each round, which commits it needs and which
  // the next rounds can need, Lab::want; speculation changes when a build is ready, never a decision).
  int builders = 1;
  int speculation_depth = 3;      // levels of sub-ranges built ahead while a round waits for a build
  // Expensive samples (measure.sample_cost: expensive; bisect/expensive.cpp): every run of the metric at a
  // commit is one observation, the decisions are on the posterior of the step's position given every run
  // (stats/step_posterior.h), the next run goes where it splits that posterior best (bisect/locate.h), up to
  // `workers` runs in flight. budgets.max_runs caps the runs.
  bool expensive = false;
  double confidence = 0.999;      // a position is taken when it holds this posterior probability
  double build_cost = -1;         // a build's cost in runs when choosing where to run (< 0: measured)
};

struct Step {
  std::string phase;            // reproduce | step | verify
  int index = -1;               // the commit asked about (walk index)
  int seg_lo = -1, seg_hi = -1; // step: the range (a, b] searched; side good = a's level, bad = b's level
  int round = 0;                // step: the round (1-based) that asked about it
  std::string klass;            // step: first | last | intermediate | beyond-first | beyond-last ("" skip)
  int base_index = -1;          // reproduce / verify: the commit it is compared with
  std::string sha;
  std::optional<Side> side;     // step: good / bad / skip
  std::string how;              // same-code | static | measured | build-failed | unsure | ...
  std::string reason;           // failure reason or evidence in words
  int same_code_as = -1;        // how == same-code: the classified commit with identical code
  bool measured = false;
  int64_t rounds = 0, samples = 0;  // rounds timed (every block's), samples (rounds x executables' commits)
  int64_t units = 0;                // what the decision counted: blocks, or rounds without blocks
  int block_rounds = 0;
  stats::Decision decision;     // when measured
  // The metric at this commit relative to good, for the plot: timed metrics as a log-ratio with a 95%
  // CI (interval of the Hodges-Lehmann shift), static metrics as the value summed over the cases.
  bool has_level = false;
  double level = 0, level_lo = 0, level_hi = 0;
  bool built = false;
  double build_s = 0, wall_s = 0;

  // Takes a measurement's effort (rounds, units, block size, samples, wall time) and marks this measured.
  void take_effort(const Step& m) {
    measured = true;
    std::tie(rounds, units, block_rounds, samples, wall_s) = std::tie(m.rounds, m.units, m.block_rounds, m.samples, m.wall_s);
  }
};

// A commit where the metric steps (a culprit, or an improvement when asked for), verified against its parent.
struct Culprit {
  int index = -1;               // walk index
  bool improvement = false;     // the metric got better at this commit
  bool verified = false;        // the verify step confirmed the step against the parent
  int seg_lo = -1, seg_hi = -1; // the range it was found in
  Step verify;
  // Effect vs the parent: timed metrics as a log-ratio with its CI, static metrics as values.
  double effect = 0, effect_lo = 0, effect_hi = 0;
  double parent_value = 0, value = 0;  // static metrics
  double posterior = -1;        // expensive samples: its posterior probability in its range when taken
};

// A range whose step could not be pinned to one commit (skips, or the budget ran out).
struct Unresolved {
  int lo = -1, hi = -1;
  bool improvement = false;
  std::string why;              // ambiguous | budget-exhausted
  std::vector<int> candidates;
};

struct Outcome {
  // culprit | not-reproduced | ambiguous | inconclusive | budget-exhausted | unverified
  std::string verdict;
  std::string summary;          // one line in words, with the evidence
  int culprit = -1;             // walk index of the main culprit (largest verified regression)
  std::vector<Culprit> culprits;       // every step found: regressions (and improvements when asked), in walk order
  std::vector<Unresolved> unresolved;  // ranges left open
  std::vector<int> candidates;  // ambiguous / budget-exhausted: indices that may hold the culprit
  std::optional<Step> reproduce, verify;  // verify: the main culprit's
  std::vector<Step> steps;      // every commit asked about, in order
  std::vector<Probe> probes;    // per walk index (ok = false and empty reason when never probed)
  std::vector<bool> probed;
  double good_level = 0;        // the good level in plot units (static: value; timed: 0 = log-ratio vs good)
  int builds = 0;               // toolchain builds that ran for commits the loop asked about (cached ones are free)
  // Builds ahead (builders > 1; else builds_started == builds): every build started, speculative ones
  // included; those cancelled because a decision made them useless; those built ahead that a round used.
  int builds_started = 0, builds_cancelled = 0, builds_ahead_used = 0;
  // Wall time per phase (seconds, this session and the journaled ones): reproduce (endpoints built and
  // compared), search (the steps), verify; and across them, waiting for builds and measuring.
  double reproduce_s = 0, search_s = 0, verify_s = 0, build_wait_s = 0, measure_s = 0;
  int64_t samples = 0;          // timing samples taken (every executable, every round)
  int visited = 0, measured_steps = 0;
  int rounds = 0;               // step rounds (one commit per round, or `workers` commits per round)
  std::vector<double> weights;  // the prior weights used (empty: uniform)
  double wall_s = 0;
  // Expensive samples: runs of the metric that ended (journaled ones included) and their wall time summed
  // (queueing included), runs cancelled in flight when the search ended, and the largest number in flight.
  bool expensive = false;
  int runs = 0, runs_cancelled = 0, max_in_flight = 0;
  double run_s = 0;
  double posterior = -1;        // the main culprit's posterior probability when it was taken (-1: none)
};


using Log = std::function<void(const std::string&)>;

// The loop over an abstract lab. `journal` may be null (simulation). Throws InputError when an endpoint
// cannot be built or compiled (with the reason).
Outcome run_bisection(const Plan& plan, Lab& lab, Journal* journal, const Log& log = nullptr);

struct BisectRun {
  Outcome outcome;
  std::vector<git::CommitInfo> commits;  // walk order, [0] = good
  std::string workdir, result_json, report_md, report_html;
};

// The whole command: validates refs, runs (or resumes) the bisection in `workdir`, writes the reports.
// report_improvements / workers > 0 override the config's (the CLI's --report-improvements / --parallel).
BisectRun bisect(const BisectConfig& cfg, const std::string& workdir, bool resume, const Log& log = nullptr,
                 bool report_improvements = false, int workers = 0);

// `kbisect check`: the side of one commit (good / bad / skip) for `git bisect run`, with the reason.
struct CheckResult {
  Side side = Side::skip;
  std::string reason;
};
CheckResult check_commit(const BisectConfig& cfg, const std::string& workdir, const std::string& rev,
                         const Log& log = nullptr);

// Default working directory for a config: <config dir>/kbisect-bisect-<name>.
std::string default_workdir(const BisectConfig& cfg);

}  // namespace kb::bisect
