#include "presubmit/measure.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/error.h"
#include "harness/runner.h"

namespace kb::presubmit {

namespace {
std::string side_status(const char* side, const CaseResult& r) {
  return fmt::format("{} {}: {}", side, to_string(r.status), tail(r.reason, 600));
}
}  // namespace

bool Lab::prepare(CaseReport& c) {
  if (loads_.count(c.s.name)) return true;
  const double t0 = now_s();
  PreparedCase b = prepare_case(*c.s.base, cache_, refs_);
  PreparedCase n = prepare_case(*c.s.change, cache_, refs_);
  c.spent_s += now_s() - t0;
  if (b.ready() && n.ready()) {
    c.check = "ok";
    // The loads made for the check are not measured: every block loads both sides again (harness/ab.h).
    loads_.emplace(c.s.name, std::make_pair(b.reload, n.reload));
    return true;
  }
  if (b.ready() && n.result.status == CaseStatus::incorrect) {
    c.incorrect = true;
    c.check = side_status("change", n.result);
  } else if (!b.ready() && !n.ready()) {
    c.check = side_status("base", b.result) + "; " + side_status("change", n.result);
  } else {
    c.check = b.ready() ? side_status("change", n.result) : side_status("base", b.result);
  }
  return false;
}

PairOutcome Lab::ab(const CaseReport& c, const PresubmitConfig& cfg, int min_blocks, int max_blocks, double budget_s,
                    uint64_t seed) {
  const auto& [base, change] = loads_.at(c.s.name);
  stats::DecisionConfig d;
  d.threshold = cfg.threshold;
  d.alpha = cfg.measure.alpha;
  d.min_n = min_blocks;
  d.max_n = max_blocks;
  MeasureConfig mc = c.s.change->measure;
  mc.placement = cfg.measure.placement;
  mc.seed = seed;
  return measure_and_decide_blocks(std::vector<ExecutableFactory>{base, change}, mc, d, budget_s,
                                   cfg.measure.block_pairs);
}

std::optional<Cost> Lab::pilot(CaseReport& c, const PresubmitConfig& cfg, double budget_s) {
  if (!(budget_s > 0)) return std::nullopt;
  const int k = cfg.measure.pilot_blocks;
  // One look at k blocks: its verdict is not used (the decision is the A/B's own, from fresh blocks); its
  // blocks say what a block costs here and how much their medians spread.
  const PairOutcome p = ab(c, cfg, k, k, budget_s, cfg.measure.seed + 7919);
  c.spent_s += p.wall_s;
  if (p.block_effects.size() < 2) return std::nullopt;
  return cost_from_pilot(cost_model(cfg), p.wall_s / double(p.block_effects.size()), p.block_effects);
}

void Lab::measure(CaseReport& c, const PresubmitConfig& cfg, double budget_s) {
  const double t0 = now_s();
  // Up to twice the predicted cost: the prediction is for a change at the threshold; an undecided case at the
  // end of it is `unsure`, and the budget goes to the next case.
  const double cap = std::min(budget_s, c.cost ? std::max(2 * c.cost->seconds, c.cost->block_s * 4) : budget_s);
  c.ab = ab(c, cfg, cfg.measure.min_blocks, cfg.measure.max_blocks, cap, cfg.measure.seed);
  if (c.ab->decision.verdict == stats::Verdict::worse) {
    const double left = budget_s - (now_s() - t0);
    if (left > 0) {
      c.confirm = ab(c, cfg, cfg.measure.min_blocks, cfg.measure.max_blocks, std::min(left, 2 * c.ab->wall_s),
                     cfg.measure.seed + 104729);
      // Only a second measurement that says otherwise (same or better) clears it; an undecided one (its time
      // ran out) leaves it standing, unconfirmed.
      const stats::Verdict v = c.confirm->decision.verdict;
      c.regression = v == stats::Verdict::worse || v == stats::Verdict::unsure;
      c.unconfirmed = v == stats::Verdict::unsure;
    } else {
      c.regression = c.unconfirmed = true;  // no time left to confirm: a `worse` still fails the diff
    }
  }
  c.spent_s += now_s() - t0;
}

}  // namespace kb::presubmit
