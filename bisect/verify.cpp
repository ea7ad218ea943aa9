// The end of the bisection loop (bisect/loop.h): a culprit re-measured against its parent, and the
// outcome's verdict and summary.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bisect/loop.h"

namespace kb::bisect::loop {

using git::short_sha;

void Loop::verify_culprit(const Seg& g) {
  const double t0 = now_s();
  const int c = g.b, parent = c - 1;
  Culprit cu;
  cu.index = c;
  cu.improvement = g.improvement;
  cu.seg_lo = g.a;
  cu.seg_hi = g.b;
  Step v;
  v.phase = "verify";
  v.index = c;
  v.base_index = parent;
  v.sha = plan_.shas[size_t(c)];
  const Probe& pp = probe(parent);
  const Probe& pc = probe(c);
  bool confirmed = false;
  const char* what = g.improvement ? "improvement" : "culprit";
  if (!is_timed(plan_.metric)) {
    v.how = "static";
    v.has_level = true;
    v.level = v.level_lo = v.level_hi = sum_of(pc.values, regressed_);
    auto reg = static_regressed(pp.values, pc.values, plan_.threshold, plan_.threshold_absolute);
    confirmed = std::any_of(reg.begin(), reg.end(), [](bool b) { return b; });
    cu.parent_value = sum_of(pp.values, regressed_);
    cu.value = v.level;
    cu.effect = cu.value - cu.parent_value;
    cu.effect_lo = cu.effect_hi = cu.effect;
    v.reason = fmt::format("{}: parent {:g} -> {} {:g}", metric_label(plan_.metric, plan_.metric_column), cu.parent_value, what, v.level);
  } else {
    say(fmt::format("verifying {} {}: against its parent with a fresh, larger sample", what, short_sha(v.sha)));
    auto rule = threshold_rule(plan_.threshold, plan_.alpha, 2 * plan_.first_units(), 2 * plan_.max_units());
    Rounds r = measure("verify:" + plan_.shas[size_t(parent)] + ":" + v.sha, {parent, c}, rule,
                       2 * plan_.max_units(), v);
    v.how = "measured";
    set_level(v, r[0], r[1]);
    const auto& d = v.decision;
    confirmed = d.verdict == (g.improvement ? stats::Verdict::better : stats::Verdict::worse);
    cu.effect = d.effect;
    cu.effect_lo = d.ci.lo;
    cu.effect_hi = d.ci.hi;
    // For the plot: the level of the culprit vs good (its parent's level plus the verified step).
    v.level += levels_[size_t(g.la)].est;
    v.level_lo += levels_[size_t(g.la)].est;
    v.level_hi += levels_[size_t(g.la)].est;
    v.reason = fmt::format("{} vs parent: {:+.3f}% [{:+.3f}%, {:+.3f}%] {}: {}", what, 100 * d.effect_pct(),
                           100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), amount(v), stats::to_string(d.verdict));
  }
  say("verify: " + v.reason);
  decision_event("verify:" + v.sha, v);
  cu.verified = confirmed;
  cu.verify = v;
  o_.culprits.push_back(cu);
  o_.verify_s += now_s() - t0;
}

void Loop::finish_outcome() {
  std::sort(o_.culprits.begin(), o_.culprits.end(), [](const Culprit& a, const Culprit& b) { return a.index < b.index; });
  const Culprit* main = nullptr;
  auto bigger = [](const Culprit& a, const Culprit* b) { return !b || std::abs(a.effect) > std::abs(b->effect); };
  for (const auto& c : o_.culprits)
    if (!c.improvement && c.verified && bigger(c, main)) main = &c;
  bool verified = main != nullptr;
  if (!main)
    for (const auto& c : o_.culprits)
      if (!c.improvement && bigger(c, main)) main = &c;
  int regressions = 0, improvements = 0;
  for (const auto& c : o_.culprits) (c.improvement ? improvements : regressions) += c.verified ? 1 : 0;
  std::string open;
  for (const auto& u : o_.unresolved)
    open += fmt::format("{}{} {} commits ({}..{}, {})", open.empty() ? "" : "; ", u.why, u.candidates.size(),
                        short_sha(plan_.shas[size_t(u.lo)]), short_sha(plan_.shas[size_t(u.hi)]),
                        u.improvement ? "an improvement" : "a regression");
  if (main) {
    o_.culprit = main->index;
    o_.verify = main->verify;
    o_.verdict = verified ? "culprit" : "unverified";
    if (verified) {
      o_.summary = "culprit confirmed: " + main->verify.reason;
      if (regressions > 1) o_.summary += fmt::format(" ({} regressions found, this the largest)", regressions);
      if (improvements > 0) o_.summary += fmt::format("; {} improvement(s) in the range", improvements);
    } else {
      o_.summary = "the bisection points at this commit, but re-measuring it against its parent did not confirm it: " +
                   main->verify.reason;
    }
    if (!open.empty()) o_.summary += "; left open: " + open;
    return;
  }
  // No regression commit: the first open regression range says why.
  for (const auto& u : o_.unresolved)
    if (!u.improvement) {
      o_.verdict = u.why;
      o_.candidates = u.candidates;
      break;
    }
  if (o_.verdict.empty()) {
    o_.verdict = budget_out_ ? "budget-exhausted" : "ambiguous";
  }
  o_.summary = fmt::format("{} candidate commits remain ({}); {}", o_.candidates.size(),
                           o_.verdict == "ambiguous" ? "the commits between them were skipped" : "the budget ran out",
                           "see the steps for why");
}

}  // namespace kb::bisect::loop
