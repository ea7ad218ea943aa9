// One range of the expensive-sample loop (bisect/expensive.cpp): its posterior, where to run next, the
// position taken and checked against its parent, and what the range's runs say of further changes.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "bisect/loop.h"
#include "core/error.h"

namespace kb::bisect::loop {

using git::short_sha;

Loop::L3State Loop::l3_state(const Seg& g) {
  const int n = g.b - g.a + 1;
  std::vector<double> prior(size_t(n), 1.0);
  if (!plan_.weights.empty())
    for (int h = 1; h < n; ++h) prior[size_t(h)] = plan_.weights[size_t(g.a + h)];
  if (plan_.use_hashes && is_timed(plan_.metric)) {
    // Identical machine code means one level: the step is not between two commits that share their code.
    std::map<std::string, std::pair<int, int>> span;
    for (int c = 0; c < n; ++c) {
      const Probe& p = o_.probes[size_t(g.a + c)];
      if (!o_.probed[size_t(g.a + c)] || !p.ok) continue;
      auto [it, fresh] = span.emplace(p.hash_key(), std::make_pair(c, c));
      if (!fresh) it->second.second = c;
    }
    for (const auto& [key, s] : span)
      for (int h = s.first + 1; h <= s.second; ++h) prior[size_t(h)] = 0;
  }
  L3State st;
  // A step that matters is at least half the threshold, no change is within it: the two lines the threshold
  // rule (stats::classify) draws for "worse" and "same".
  st.post = stats::step_posterior(n, l3_runs_in(g.a, g.b), prior, std::log1p(plan_.threshold));
  if (st.post.none >= plan_.confidence) {
    st.mode = L3State::Mode::none;
    return st;
  }
  std::vector<bool> skipped(size_t(n), false);
  for (int c = 1; c + 1 < n; ++c) skipped[size_t(c)] = skipped_[size_t(g.a + c)];
  for (const HypothesisClass& k : hypothesis_classes(st.post.step, skipped))
    if (k.mass > st.best.mass) st.best = k;
  if (st.best.mass < plan_.confidence) return st;
  if (st.best.first != st.best.last) {
    st.mode = L3State::Mode::ambiguous;
    return st;
  }
  st.culprit = g.a + st.best.first;
  st.check = l3_contrast(st.culprit - 1, st.culprit, st.post.sigma, st.post.dof, 1 - plan_.alpha);
  // The check wants two runs of each of the two (one run each can carry the whole posterior when the noise
  // estimate is small by chance: the simulation saw a wrong commit at 0.9996 from 11 runs).
  const bool replicated = runs_at_[size_t(st.culprit - 1)] >= 2 && runs_at_[size_t(st.culprit)] >= 2;
  st.mode = st.check.verdict == stats::Verdict::unsure || !replicated ? L3State::Mode::verify : L3State::Mode::culprit;
  return st;
}

std::optional<int> Loop::l3_next(const Seg& g) {
  const L3State st = l3_state(g);
  if (st.mode != L3State::Mode::search && st.mode != L3State::Mode::verify) return std::nullopt;
  auto load = [&](int i) { return runs_at_[size_t(i)] + flying_at_[size_t(i)]; };
  if (st.mode == L3State::Mode::verify) {
    // The position is taken; its check against the parent needs more runs of the two.
    const int p = st.culprit - 1, c = st.culprit;
    return load(p) <= load(c) ? p : c;
  }
  const int n = g.b - g.a + 1;
  std::vector<int> flying;
  std::vector<bool> skipped(size_t(n), false), built(size_t(n), false);
  for (const auto& [t, i] : flying_)
    if (i > g.a && i < g.b) flying.push_back(i - g.a);
  for (int c = 1; c + 1 < n; ++c) {
    const int i = g.a + c;
    skipped[size_t(c)] = skipped_[size_t(i)];
    built[size_t(c)] = o_.probed[size_t(i)] || (j_ && j_->probe(plan_.shas[size_t(i)]));
  }
  const std::vector<int> cands = probe_candidates(st.post.cdf, skipped, 8);
  const std::vector<double> info = stats::expected_information(st.post, cands);
  std::vector<bool> built_end = built;  // the ends have runs: built
  built_end[0] = built_end[size_t(n - 1)] = true;
  const std::optional<int> c = choose_probe(cands, info, st.post.cdf, flying, built_end, l3_build_cost());
  if (c) return g.a + *c;
  return std::nullopt;
}

void Loop::l3_search(Seg g, std::deque<Seg>& work) {
  say(fmt::format("range {}..{} ({} candidates{}): runs where they split the posterior best",
                  short_sha(plan_.shas[size_t(g.a)]), short_sha(plan_.shas[size_t(g.b)]), g.b - g.a,
                  g.improvement ? ", an improvement" : ""));
  int seen = -1;
  for (;;) {
    // The ends fix the two levels: each needs a run, and the range three.
    int in_range = 0;
    for (const stats::Run& r : runs_) in_range += r.commit >= g.a && r.commit <= g.b;
    if (runs_at_[size_t(g.a)] == 0 || runs_at_[size_t(g.b)] == 0 || in_range < 3) {
      if (l3_out_of_runs() && flying_.empty()) {
        budget_out_ = true;
        o_.unresolved.push_back({g.a, g.b, g.improvement, "budget-exhausted", range_candidates(g)});
        return;
      }
      l3_fill([&]() -> std::optional<int> {
        auto load = [&](int i) { return runs_at_[size_t(i)] + flying_at_[size_t(i)]; };
        if (load(g.a) > 0 && load(g.b) > 0 && int(flying_.size()) + in_range >= 3) return std::nullopt;
        return load(g.a) <= load(g.b) ? g.a : g.b;
      });
      if (flying_.empty()) throw Error("internal: no run could start at a range's ends");
      l3_wait();
      continue;
    }
    const L3State st = l3_state(g);
    if (int(runs_.size()) != seen) {
      seen = int(runs_.size());
      const stats::Run& last = runs_.back();
      say(fmt::format("  run {} at {} ({}): {} vs good; most likely first {} commit {} ({}), P = {:.3f}", runs_.size(),
                      short_sha(plan_.shas[size_t(last.commit)]), last.commit, pct(last.y - l3_mean(0)),
                      g.improvement ? "better" : "worse", short_sha(plan_.shas[size_t(g.a + st.best.first)]),
                      g.a + st.best.first, st.best.mass));
    }
    if (st.mode == L3State::Mode::culprit) return l3_found(g, st, work);
    if (st.mode == L3State::Mode::ambiguous) return l3_open(g, st, "ambiguous");
    if (st.mode == L3State::Mode::none) {
      // The runs put the range's levels within the threshold of each other: no change to find here (a range an
      // earlier one's runs pointed at by chance, or good and bad closer than the reproduction said).
      say(fmt::format("  range {}..{}: no change beyond the threshold, P = {:.4f}", short_sha(plan_.shas[size_t(g.a)]),
                      short_sha(plan_.shas[size_t(g.b)]), st.post.none));
      if (g.a == 0 && g.b + 1 == int(plan_.shas.size())) o_.unresolved.push_back({g.a, g.b, g.improvement, "not-reproduced", {}});
      l3_steps(g, st);
      return;
    }
    if (!budget_out_ && !l3_out_of_runs() && l3_fill([&] { return l3_next(g); }) > 0) ++o_.rounds;
    if (flying_.empty()) {
      // Nothing started: a build that failed may have decided the range (its class now holds the mass), else
      // the budget is out, or every commit that could tell the candidates apart is skipped.
      const L3State now = l3_state(g);
      if (now.mode != L3State::Mode::search && now.mode != L3State::Mode::verify) continue;
      const bool out = budget_out_ || l3_out_of_runs();
      budget_out_ = budget_out_ || out;
      if (now.mode == L3State::Mode::verify) return l3_found(g, now, work);  // taken, not confirmed
      return l3_open(g, now, out ? "budget-exhausted" : "ambiguous");
    }
    l3_wait();
  }
}

void Loop::l3_found(const Seg& g, const L3State& st, std::deque<Seg>& work) {
  const double t0 = now_s();
  const int c = st.culprit, parent = c - 1;
  const stats::Decision& d = st.check;
  Culprit cu;
  cu.index = c;
  cu.improvement = g.improvement;
  cu.seg_lo = g.a;
  cu.seg_hi = g.b;
  cu.posterior = st.best.mass;
  Step v;
  v.phase = "verify";
  v.index = c;
  v.base_index = parent;
  v.sha = plan_.shas[size_t(c)];
  v.how = "runs";
  v.measured = true;
  v.rounds = v.samples = v.units = runs_at_[size_t(parent)] + runs_at_[size_t(c)];
  v.decision = d;
  v.has_level = true;
  v.level = l3_mean(c) - l3_mean(0);
  v.level_lo = v.level + d.ci.lo - d.effect;
  v.level_hi = v.level + d.ci.hi - d.effect;
  cu.verified = d.verdict == (g.improvement ? stats::Verdict::better : stats::Verdict::worse);
  cu.effect = d.effect;
  cu.effect_lo = d.ci.lo;
  cu.effect_hi = d.ci.hi;
  const char* what = g.improvement ? "improvement" : "culprit";
  v.reason = fmt::format("{} vs parent: {} [{}, {}] from {} + {} runs (noise {:.2f}% pooled over {} runs): {}; "
                         "posterior {:.4f}",
                         what, pct(d.effect), pct(d.ci.lo), pct(d.ci.hi), runs_at_[size_t(parent)], runs_at_[size_t(c)],
                         100 * st.post.sigma, st.post.dof + 2, stats::to_string(d.verdict), st.best.mass);
  say("verify: " + v.reason);
  decision_event("verify:" + v.sha, v);
  cu.verify = v;
  o_.culprits.push_back(cu);
  o_.verify_s += now_s() - t0;
  l3_steps(g, st);
  if (!plan_.several || !cu.verified) return;
  // Further changes: the single step put a..c-1 at one level and c..b at the other. Each side's own runs, under
  // the same model, say whether it holds a change beyond the threshold too: where that is more likely than not
  // (its `none` below one half), the side is searched as a range of its own (it ends without a culprit when
  // its runs then put both ends within the threshold). Only the runs already made decide this.
  std::vector<Seg> more;
  auto side = [&](int x, int y) {
    const std::vector<stats::Run> runs = l3_runs_in(x, y);
    if (y <= x || runs_at_[size_t(x)] == 0 || runs_at_[size_t(y)] == 0 || runs.size() < 3) return;
    const stats::StepPosterior sp = stats::step_posterior(y - x + 1, runs, {}, std::log1p(plan_.threshold));
    if (sp.none >= 0.5) return;
    const bool worse = l3_mean(y) > l3_mean(x);  // larger is worse
    say(fmt::format("  {}..{}: another change likely (P = {:.3f}; {} vs {} {})", short_sha(plan_.shas[size_t(x)]),
                    short_sha(plan_.shas[size_t(y)]), 1 - sp.none, short_sha(plan_.shas[size_t(y)]),
                    short_sha(plan_.shas[size_t(x)]), pct(l3_mean(y) - l3_mean(x))));
    if (worse || plan_.report_improvements) more.push_back({x, y, 0, 1, !worse});
  };
  side(g.a, parent);
  side(c, g.b);
  for (auto it = more.rbegin(); it != more.rend(); ++it) work.push_front(*it);
}

void Loop::l3_open(const Seg& g, const L3State& st, const std::string& why) {
  std::vector<int> cands;
  if (why == "ambiguous") {
    for (int h = st.best.first; h <= st.best.last; ++h) cands.push_back(g.a + h);
  } else {
    // The most probable positions holding the configured confidence (at most 64).
    std::vector<int> order(st.post.p.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) { return st.post.p[size_t(x)] > st.post.p[size_t(y)]; });
    double mass = 0;
    for (int h : order) {
      if (h == 0 || mass >= plan_.confidence || cands.size() >= 64) break;
      mass += st.post.p[size_t(h)];
      cands.push_back(g.a + h);
    }
    std::sort(cands.begin(), cands.end());
  }
  o_.unresolved.push_back({g.a, g.b, g.improvement, why, cands});
  say(fmt::format("  range {}..{}: {}: {} candidates hold P = {:.3f}", short_sha(plan_.shas[size_t(g.a)]),
                  short_sha(plan_.shas[size_t(g.b)]), why, cands.size(),
                  why == "ambiguous" ? st.best.mass : [&] {
                    double m = 0;
                    for (int i : cands) m += st.post.p[size_t(i - g.a)];
                    return m;
                  }()));
  l3_steps(g, st);
}

// A step per commit of the range that ran: its level against good, and which side the posterior puts it on.
void Loop::l3_steps(const Seg& g, const L3State& st) {
  const double good = l3_mean(0);
  for (int i = g.a + 1; i < g.b; ++i) {
    const int k = runs_at_[size_t(i)];
    if (k == 0) continue;
    Step s = step_at(i, &g);
    s.how = "runs";
    s.measured = true;
    s.rounds = s.samples = s.units = k;
    const double at_b = st.post.cdf[size_t(i - g.a)];
    s.side = at_b >= 0.5 ? Side::bad : Side::good;
    s.klass = to_string(at_b >= 0.5 ? Level::b : Level::a);
    s.has_level = true;
    s.level = l3_mean(i) - good;
    const double half = st.post.dof > 0 ? stats::t_quantile(0.975, st.post.dof) * st.post.sigma / std::sqrt(double(k)) : 0;
    s.level_lo = s.level - half;
    s.level_hi = s.level + half;
    s.decision.effect = s.level;
    s.decision.ci = {s.level_lo, s.level_hi};
    s.reason = fmt::format("{} run{}: {} vs good; P(at the level of {}) = {:.3f}", k, k == 1 ? "" : "s", pct(s.level),
                           short_sha(plan_.shas[size_t(g.b)]), at_b);
    decision_event("step:" + s.sha, s);
    o_.steps.push_back(s);
  }
}

}  // namespace kb::bisect::loop
