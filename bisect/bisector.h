// The bisection driver.
//
//   1. validate the range (refs exist, good is an ancestor of bad, range not empty);
//   2. reproduce first: probe good and bad; static metrics compare values, identical code means nothing
//      to find, otherwise measure good vs bad interleaved against the threshold -> `not-reproduced` with
//      the evidence unless bad is worse beyond the threshold;
//   3. steps: the strategy picks a commit; its probe (toolchain + compile) either fails (skip), has the
//      code hash of an already-classified commit (that side, no measurement), has static values (side by
//      value) or is measured interleaved with good and bad until decided (unsure at budget -> skip);
//   4. verify: the culprit against its parent with a fresh, larger sample.
// run_bisection() is that loop over an abstract Lab (oracle.h), so the simulation drives the same code;
// bisect() wires it to git, the provider, the real lab, the journal and the reports.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/config.h"
#include "bisect/git.h"
#include "bisect/journal.h"
#include "bisect/oracle.h"
#include "bisect/strategy.h"
#include "harness/stats.h"

namespace kb::bisect {

struct Plan {
  std::vector<std::string> shas;  // walk order: [0] good ... [n-1] bad
  Metric metric = Metric::time;
  double threshold = 0.005;
  bool threshold_absolute = false;
  Budgets budgets;
  int min_samples = 16;           // first look (rounds)
  double alpha = 0.05;
  double max_step_s = 120;
  uint64_t seed = 1;
  std::vector<double> weights;    // prior weight per commit (empty: all equal)
  bool use_hashes = true;         // classify equal code hashes without measuring
};

struct Step {
  std::string phase;            // reproduce | step | verify
  int index = -1;               // the commit asked about (walk index)
  int base_index = -1;          // reproduce / verify: the commit it is compared with
  std::string sha;
  std::optional<Side> side;     // step: good / bad / skip
  std::string how;              // same-code | static | measured | build-failed | unsure | ...
  std::string reason;           // failure reason or evidence in words
  int same_code_as = -1;        // how == same-code: the classified commit with identical code
  bool measured = false;
  int64_t rounds = 0, samples = 0;
  stats::Decision decision;     // when measured
  // The metric at this commit relative to good, for the plot: timed metrics as a log-ratio with a 95%
  // CI (interval of the Hodges-Lehmann shift), static metrics as the value summed over the cases.
  bool has_level = false;
  double level = 0, level_lo = 0, level_hi = 0;
  bool built = false;
  double build_s = 0, wall_s = 0;
};

struct Outcome {
  // culprit | not-reproduced | ambiguous | inconclusive | budget-exhausted | unverified
  std::string verdict;
  std::string summary;          // one line in words, with the evidence
  int culprit = -1;             // walk index
  std::vector<int> candidates;  // ambiguous / budget-exhausted: indices that may hold the culprit
  std::optional<Step> reproduce, verify;
  std::vector<Step> steps;      // every commit asked about, in order
  std::vector<Probe> probes;    // per walk index (ok = false and empty reason when never probed)
  std::vector<bool> probed;
  double good_level = 0;        // the good level in plot units (static: value; timed: 0 = log-ratio vs good)
  int builds = 0;               // toolchain builds that ran (cached ones are free)
  int64_t samples = 0;          // timing samples taken (every executable, every round)
  int visited = 0, measured_steps = 0;
  double wall_s = 0;
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
BisectRun bisect(const BisectConfig& cfg, const std::string& workdir, bool resume, const Log& log = nullptr);

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
