// The question asked of each commit: "is this commit's toolchain on the good or the bad side?"
//
// A Lab answers the two things the bisection needs from the world: probe(sha) builds the toolchain at a
// commit and compiles the cases with it (code hashes and static metrics, no timing), and measure() times
// several commits' executables interleaved in one process, unit by unit, until a stop rule says the
// question is decided. RealLab does this with the provider, the compile cache, the backends and
// harness/measure; the simulation (bisect/simulate) implements the same interface with synthetic commits.
//
// Units are BLOCKS for loaded executables (the time and tflops metrics, block_rounds > 0): every block
// loads all the commits' executables again (fresh code mapping and buffers, in a random order), times
// block_rounds interleaved rounds and is summarized per commit (block_summary). Two loads of identical code
// run at different speeds for as long as they stay loaded (placement: pages, cache sets, aliasing between
// operands; measured in #3 at a few tenths of a percent), so with one load per commit for the whole
// bisection the good and bad endpoints would carry one fixed placement offset into every step and bias
// each ±0.25% midpoint question the same way. Reloaded per block, placement varies between blocks and
// widens the CI instead of biasing it (the same design as `kbisect ab`, harness/ab.h). block_rounds = 0
// keeps one load per commit and decides on rounds.
//
// The decisions themselves are pure (no I/O) and shared by both:
//  - static metrics: compare values, no timing at all;
//  - equal code hashes: the commit has the same machine code as an already-classified commit, so it is on
//    that commit's side without measuring;
//  - otherwise the paired, interleaved rounds (good, bad, commit) are decided sequentially on
//    d_i = log(t_i / sqrt(g_i * b_i)), the commit's time relative to the midpoint of the two levels
//    measured in the same round: CI above 0 -> bad side, below 0 -> good side, else more rounds (looks at
//    min, 2 min, 4 min ... up to the step budget, Bonferroni over the looks, stats::SequentialPaired).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "bisect/config.h"
#include "bisect/provider.h"
#include "bisect/strategy.h"
#include "harness/reference.h"
#include "stats/stats.h"
#include "harness/sweep.h"

namespace kb::bisect {

// What a commit's toolchain produced for the cases (no timing). Journaled per commit.
struct Probe {
  bool ok = false;
  std::string reason;                     // build / compile / correctness failure (a skip)
  std::vector<std::string> case_ids;      // case keys, sorted (the same list for every commit)
  std::vector<std::string> code_hashes;   // per case
  std::vector<double> values;             // per case, the static metric (empty for timed metrics)
  bool built = false;                     // a toolchain build ran for this probe
  double build_s = 0;
  std::string toolchain_identity;
  std::string hash_key() const;           // all code hashes together ("" when not ok)
};
nlohmann::json to_json(const Probe& p);
Probe probe_from_json(const nlohmann::json& j);

// Values of an interleaved measurement: [commit][i], each value the case-aggregated sample of that commit
// (geometric mean over the cases of their per-case samples) in round i, or its block summary in unit i.
using Rounds = std::vector<std::vector<double>>;
using RoundsStop = std::function<bool(const Rounds&)>;  // called with the units so far

// One measurement's request: at most max_units units (blocks of block_rounds rounds, or single rounds when
// block_rounds is 0) within max_time_s.
struct MeasureAsk {
  int max_units = 0;
  int block_rounds = 0;
  double max_time_s = 0;
  uint64_t seed = 1;
};

struct Measured {
  Rounds units;  // [commit][unit]: what the decisions see
  Rounds raw;    // [commit][round]: every timed round of the complete units, in order (== units without blocks)
};

// A block's summary per commit, paired to the first commit within the block: commit 0 gets the median of
// its rounds, commit c that times exp(median_i log(x_c,i / x_0,i)). Ratios between two commits' summaries
// are then medians of paired log-ratios (drift inside the block cancels), as in `kbisect ab`.
std::vector<double> block_summary(const Rounds& block);
// Appends a complete block to m: its rounds to m.raw, its block_summary to m.units (sized per commit).
void add_block(Measured& m, const Rounds& block);

class Lab {
 public:
  virtual ~Lab() = default;
  virtual Probe probe(const std::string& sha) = 0;
  // Measures the commits interleaved (all already probed ok), calling stop after each unit; ends when stop
  // returns true, after ask.max_units, or after ask.max_time_s (a partial block is dropped).
  virtual Measured measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) = 0;
};

// ---- pure decisions ------------------------------------------------------------------------------

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

// Static metrics: per case, did bad move beyond the threshold from good (in either direction)?
std::vector<bool> static_regressed(const std::vector<double>& good, const std::vector<double>& bad, double threshold,
                                   bool absolute);
// Side of a commit's static values: bad when a regressed case moved from good by at least the threshold
// in the direction good -> bad, else good.
Side static_side(const std::vector<double>& good, const std::vector<double>& bad, const std::vector<double>& commit,
                 const std::vector<bool>& regressed, double threshold, bool absolute);

// The metric's value in a compiled case's static results (throws InputError when the backend does not
// report it).
double static_metric_value(Metric m, const std::string& backend, const std::map<std::string, double>& metrics,
                           int64_t code_bytes, double max_error);

// ---- the real lab ----------------------------------------------------------------------------------

// probe() may be called from several threads at once (parallel rounds): the toolchains are fetched or
// built concurrently (the provider builds each commit in its own worktree and cache directory), the
// compiles and everything else run one at a time.
class RealLab : public Lab {
 public:
  RealLab(const BisectConfig& cfg, Provider& provider);
  ~RealLab() override;
  Probe probe(const std::string& sha) override;
  Measured measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) override;

 private:
  struct Loaded;
  Loaded& load(const std::string& sha, Probe* probe_out, const ToolchainAtCommit* fetched = nullptr);
  std::mutex mu_;
  const BisectConfig& cfg_;
  Provider& provider_;
  CompileCache cache_;
  ReferenceCache refs_;
  std::map<std::string, std::unique_ptr<Loaded>> loaded_;
  std::vector<std::string> lru_;
  size_t keep_ = 6;  // commits kept loaded (at least those of the current measurement)
};

}  // namespace kb::bisect
