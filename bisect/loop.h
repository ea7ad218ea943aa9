// The bisection loop behind run_bisection (bisect/bisector.h), shared by the files that implement its
// phases: bisector.cpp (start, reproduce, the work list), search.cpp (the steps over one range) and
// verify.cpp (a culprit against its parent, the outcome). Not a public header.
#pragma once
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bisect/bisector.h"
#include "bisect/locate.h"
#include "core/clock.h"
#include "stats/step_posterior.h"

#include <fmt/format.h>

namespace kb::bisect::loop {

// A log ratio as a signed percentage, "+1.00%" (the runs' effects in the expensive-sample log lines).
inline std::string pct(double log_ratio) { return fmt::format("{:+.2f}%", 100 * std::expm1(log_ratio)); }

// The seed of one measurement: the run's seed mixed with a hash of the measurement's key.
uint64_t seed_for(uint64_t seed, const std::string& key);
// The level of `t` relative to `g` (log-ratio, 95% CI) from paired rounds.
void set_level(Step& s, const std::vector<double>& g, const std::vector<double>& t);
// Sets how much a measured decision saw (units, rounds) from what a measurement returned.
void set_amount(Step& s, const Measured& m, int block_rounds);
// "after 160 rounds (20 blocks)" / "after 64 rounds": what a measured decision saw.
std::string amount(const Step& s);
// The sum of v over the cases in mask (all when empty).
double sum_of(const std::vector<double>& v, const std::vector<bool>& mask);

class Loop {
 public:
  Loop(const Plan& plan, Lab& lab, Journal* j, const Log& log) : plan_(plan), lab_(lab), j_(j), log_(log) {}

  Outcome run();

 private:
  void say(const std::string& s) {
    if (log_) log_(s);
  }
  const Probe& probe(int i);
  // Measurements return their units (blocks, or rounds without blocks; oracle.h), which the rules decide on.
  Rounds measure(const std::string& key, const std::vector<int>& idx, SequentialRule& rule, int max_units,
                 Step& step);
  Rounds measure_units(const std::string& key, const std::vector<int>& idx, const RoundsStop& stop, int max_units,
                       Step& step);
  Rounds measure_with(const std::string& key, const std::vector<int>& idx, StepRule& rule, Step& step) {
    return measure_units(key, idx, [&](const Rounds& r) { return rule(r); }, plan_.max_units(), step);
  }
  // A range (a, b] whose end levels differ: level ids la (at a) and lb (at b); improvement: the metric
  // gets better from a to b.
  struct Seg {
    int a, b, la, lb;
    bool improvement;
  };
  struct LevelEst {
    double est, lo, hi;  // plot units: timed log-ratio vs good; static value
  };
  // The commits of one round in a range, each with its step and the level it was placed at (none: a skip).
  struct Picked {
    std::vector<int> picks;
    std::vector<Step> steps;
    std::vector<std::optional<Level>> lv;
  };

  // bisector.cpp
  void journal_start();
  // Builds ahead (plan_.builders > 1): tells the lab which commits the next round needs, which the rounds
  // after a decision in (lo, hi] at `picks` can need, and which of those asked before lie outside every
  // range still open (useless: their builds are cancelled), then journals what the builds did.
  void want_ahead(int lo, int hi, const std::vector<int>& needs, const std::vector<int>& picks);
  void drain_build_events();
  void end_builds();  // the search is over: builds ahead still in flight are cancelled
  // Appends a build event to the journal and counts it (started, cancelled, built ahead and used).
  void build_event(const nlohmann::json& ev);
  void count_build_event(const nlohmann::json& ev);
  bool reproduce(Step& rep);
  void init_levels(const Step& rep);

  // search.cpp
  void search(Seg g, std::deque<Seg>& work);
  std::optional<std::vector<int>> next_picks(const Seg& g);
  std::vector<size_t> classify(const Seg& g, Picked& pk);
  void measure_steps(const Seg& g, const std::vector<size_t>& to_measure, Picked& pk);
  std::vector<Seg> record_and_split(const Seg& g, Picked& pk);
  void probe_all(const std::vector<int>& picks);
  std::optional<Level> static_level(const Seg& g, const Probe& p);
  std::vector<int> range_candidates(const Seg& g) const;

  // verify.cpp
  void verify_culprit(const Seg& g);
  void finish_outcome();

  // expensive.cpp: expensive samples (plan_.expensive), every run one observation. A range's state: the
  // posterior of its step's position, the classes runs can tell apart, the most probable one, and what to do.
  struct L3State {
    stats::StepPosterior post;
    HypothesisClass best;
    // none: no change beyond the threshold in the range (its levels closer than that)
    enum class Mode { search, verify, culprit, ambiguous, none } mode = Mode::search;
    int culprit = -1;         // verify / culprit: the commit (walk index)
    stats::Decision check;    // verify / culprit: it against its parent, from the runs
  };
  Outcome l3_run();
  void l3_replay();
  bool l3_reproduce(Step& rep);
  stats::Decision l3_ends(int a, int b);
  void l3_search(Seg g, std::deque<Seg>& work);
  L3State l3_state(const Seg& g);
  std::optional<int> l3_next(const Seg& g);
  // Starts runs at the commits `pick` names (probing them first: a failed build is a skip and `pick` is
  // asked again) while fewer than plan_.workers are in flight and the run budget allows; the number started.
  int l3_fill(const std::function<std::optional<int>()>& pick);
  void l3_wait();  // one run ends: journaled and pooled
  void l3_found(const Seg& g, const L3State& st, std::deque<Seg>& work);
  void l3_open(const Seg& g, const L3State& st, const std::string& why);
  void l3_steps(const Seg& g, const L3State& st);
  std::vector<stats::Run> l3_runs_in(int a, int b) const;  // local commit indices (0 = a)
  stats::Decision l3_contrast(int i, int j, double sigma, int dof, double conf) const;
  double l3_mean(int i) const;
  bool l3_out_of_runs() const {
    return int(runs_.size() + flying_.size()) >= plan_.budgets.max_runs || over_wall_budget();
  }
  double l3_build_cost() const;
  std::vector<stats::Run> runs_;  // every run: walk index, log value (larger = worse)
  std::vector<int> runs_at_, flying_at_;
  std::map<int, int> flying_;     // ticket -> walk index
  double run_wall_sum_ = 0;

  void decision_event(const std::string& key, const Step& s);
  // A step about commit i (of range g when given), asked in the current round, with its build's figures.
  Step step_at(int i, const Seg* g = nullptr) const;
  // The outcome when the reproduction did not show the regression (or could not tell).
  Outcome not_reproduced(const Step& rep);
  bool over_wall_budget() const {
    return plan_.budgets.max_wall_s > 0 && elapsed() > plan_.budgets.max_wall_s;
  }
  double elapsed() const { return now_s() - t0_ + (j_ ? j_->replayed_wall_s() : 0); }

  const Plan& plan_;
  Lab& lab_;
  Journal* j_;
  Log log_;
  Outcome o_;
  double t0_ = now_s();
  std::vector<bool> regressed_;  // static metrics: cases where bad moved beyond the threshold
  double gap_ = 0;               // timed: measured good -> bad log-ratio
  std::vector<bool> skipped_;
  std::vector<LevelEst> levels_;  // level id -> estimate
  std::map<std::string, int> level_of_hash_;  // code hash key -> level id
  bool budget_out_ = false;
  std::set<std::string> ahead_;  // commits built ahead (speculatively), neither used nor cancelled yet
  std::set<int> asked_;          // commits passed to Lab::want and not yet declared useless
  const std::deque<Seg>* work_ = nullptr;  // the ranges still to search (besides the current one)
};

}  // namespace kb::bisect::loop
