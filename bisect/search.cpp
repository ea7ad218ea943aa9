// The steps over one range of the bisection loop (bisect/loop.h): pick commits, classify them without
// measuring where possible, measure the rest with the two ends, then split the range at what was found.
#include <algorithm>
#include <cmath>
#include <future>

#include <fmt/format.h>

#include "bisect/loop.h"

namespace kb::bisect::loop {

using json = nlohmann::json;
using git::short_sha;

std::vector<int> Loop::range_candidates(const Seg& g) const {
  std::vector<int> c;
  for (int i = g.a + 1; i <= g.b; ++i) c.push_back(i);
  return c;
}

// Level of a commit's static values on the way from a to b (sums over the cases that regressed).
std::optional<Level> Loop::static_level(const Seg& g, const Probe& p) {
  const Probe& pa = o_.probes[size_t(g.a)];
  const Probe& pb = o_.probes[size_t(g.b)];
  if (!plan_.several) {
    auto reg = static_regressed(pa.values, pb.values, plan_.threshold, plan_.threshold_absolute);
    if (!std::any_of(reg.begin(), reg.end(), [](bool b) { return b; })) reg = regressed_;
    return static_side(pa.values, pb.values, p.values, reg, plan_.threshold, plan_.threshold_absolute) == Side::bad
               ? Level::b
               : Level::a;
  }
  const double A = sum_of(pa.values, regressed_), B = sum_of(pb.values, regressed_), T = sum_of(p.values, regressed_);
  auto beyond = [&](double from, double to) {
    return moved_beyond(from, to, plan_.threshold, plan_.threshold_absolute);
  };
  const double dir = B > A ? 1 : -1;
  if (!beyond(A, T)) return Level::a;
  if (!beyond(B, T)) return Level::b;
  if ((T - A) * dir > 0 && (B - T) * dir > 0) return Level::between;
  if ((T - B) * dir > 0) return Level::beyond_b;
  return Level::beyond_a;
}

void Loop::search(Seg g, std::deque<Seg>& work) {
  for (;;) {
    std::optional<std::vector<int>> picks = next_picks(g);
    if (!picks) return;
    want_ahead(g.a, g.b, *picks, *picks);
    probe_all(*picks);
    Picked pk;
    pk.picks = *picks;
    const std::vector<size_t> to_measure = classify(g, pk);
    if (!to_measure.empty()) measure_steps(g, to_measure, pk);
    std::vector<Seg> children = record_and_split(g, pk);
    if (children.size() == 1 && children[0].improvement == g.improvement) {
      g = children[0];
      continue;
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) work.push_front(*it);
    return;
  }
}

// The commits to test next in the range, within the budgets; nullopt when the range ends here (a culprit
// to verify, every commit between skipped, or the budget out).
std::optional<std::vector<int>> Loop::next_picks(const Seg& g) {
  // The range's strategy: prior weights of its commits, skips recorded.
  std::vector<double> w;
  if (!plan_.weights.empty()) w.assign(plan_.weights.begin() + g.a, plan_.weights.begin() + g.b + 1);
  Strategy st(g.b - g.a + 1, w);
  for (int i = g.a + 1; i < g.b; ++i)
    if (skipped_[size_t(i)]) st.record(i - g.a, Side::skip);
  std::vector<int> picks;
  for (int k : st.next_k(std::max(1, plan_.workers))) picks.push_back(g.a + k);
  if (picks.empty()) {
    if (g.b == g.a + 1) {
      verify_culprit(g);
    } else {
      o_.unresolved.push_back({g.a, g.b, g.improvement, "ambiguous", range_candidates(g)});
      say(fmt::format("  range {}..{}: every commit left between is skipped: ambiguous", short_sha(plan_.shas[size_t(g.a)]),
                      short_sha(plan_.shas[size_t(g.b)])));
    }
    return std::nullopt;
  }
  // Budgets: builds (a commit journaled earlier costs nothing new) and wall time.
  std::vector<int> affordable;
  int new_builds = 0;
  for (int m : picks) {
    const bool free = o_.probed[size_t(m)] || (j_ && j_->probe(plan_.shas[size_t(m)]));
    if (!free && o_.builds + new_builds >= plan_.budgets.max_builds) continue;
    if (!free) ++new_builds;
    affordable.push_back(m);
  }
  if (over_wall_budget() || affordable.empty()) {
    budget_out_ = true;
    o_.unresolved.push_back({g.a, g.b, g.improvement, "budget-exhausted", range_candidates(g)});
    return std::nullopt;
  }
  ++o_.rounds;
  const int n = int(plan_.shas.size());
  say(fmt::format("round {}: {} in {}..{} ({} candidates left{})", o_.rounds,
                  affordable.size() == 1
                      ? "commit " + short_sha(plan_.shas[size_t(affordable[0])]) + fmt::format(" ({} of {})", affordable[0], n - 1)
                      : fmt::format("{} commits", affordable.size()),
                  short_sha(plan_.shas[size_t(g.a)]), short_sha(plan_.shas[size_t(g.b)]), g.b - g.a,
                  g.improvement ? ", an improvement" : ""));
  return affordable;
}

// Classifies what needs no measurement (failures, static values, known code); returns the rest.
std::vector<size_t> Loop::classify(const Seg& g, Picked& pk) {
  const bool timed = is_timed(plan_.metric);
  pk.steps.assign(pk.picks.size(), Step{});
  pk.lv.assign(pk.picks.size(), std::nullopt);
  std::vector<size_t> to_measure;
  const Probe& pa = o_.probes[size_t(g.a)];
  for (size_t q = 0; q < pk.picks.size(); ++q) {
    const int m = pk.picks[q];
    Step& s = pk.steps[q];
    s = step_at(m, &g);
    const Probe& p = o_.probes[size_t(m)];
    ++o_.visited;
    if (!p.ok) {
      s.how = "build-or-compile-failed";
      s.reason = p.reason;
    } else if (p.case_ids != pa.case_ids) {
      s.how = "different-cases";
      s.reason = "this toolchain gives a different case list";
    } else if (!timed) {
      pk.lv[q] = static_level(g, p);
      s.how = "static";
      s.has_level = true;
      s.level = s.level_lo = s.level_hi = sum_of(p.values, regressed_);
      s.reason = fmt::format("{} = {:g} (range ends {:g} .. {:g})", metric_label(plan_.metric, plan_.metric_column), s.level,
                             sum_of(pa.values, regressed_), sum_of(o_.probes[size_t(g.b)].values, regressed_));
    } else if (auto it = level_of_hash_.find(p.hash_key());
               plan_.use_hashes && it != level_of_hash_.end() && (it->second == g.la || it->second == g.lb)) {
      pk.lv[q] = it->second == g.la ? Level::a : Level::b;
      s.how = "same-code";
      s.same_code_as = it->second == g.la ? g.a : g.b;
      s.reason = fmt::format("identical machine code to a commit at the level of {}", short_sha(plan_.shas[size_t(s.same_code_as)]));
    } else {
      to_measure.push_back(q);
    }
  }
  return to_measure;
}

// Measures the unclassified commits together with the range's two ends and places each one.
void Loop::measure_steps(const Seg& g, const std::vector<size_t>& to_measure, Picked& pk) {
  std::vector<int> idx = {g.a, g.b};
  for (size_t q : to_measure) idx.push_back(pk.picks[q]);
  const bool b_worse = !g.improvement;
  StepRule rule(plan_.threshold, plan_.alpha, plan_.first_units(), plan_.max_units(), int(to_measure.size()), b_worse,
                plan_.several || plan_.report_improvements, plan_.report_improvements);
  std::string key = "step:" + plan_.shas[size_t(pk.picks[to_measure[0]])];
  for (size_t k = 1; k < to_measure.size(); ++k) key += "," + plan_.shas[size_t(pk.picks[to_measure[k]])];
  Step meas;
  Rounds r = measure_with(key, idx, rule, meas);
  auto ds = rule.finish(r);
  o_.measured_steps += int(to_measure.size());
  for (size_t k = 0; k < to_measure.size(); ++k) {
    const size_t q = to_measure[k];
    Step& s = pk.steps[q];
    s.take_effort(meas);
    const StepDecision& d = ds[k];
    pk.lv[q] = d.level;
    // The decision shown: the apartness test that placed it, else the side test.
    s.decision = d.side;
    if (d.level == Level::between || d.level == Level::beyond_b) s.decision = d.level == Level::between ? d.vs_a : d.vs_b;
    if (d.level == Level::beyond_a) s.decision = d.vs_a;
    set_level(s, r[0], r[2 + k]);
    s.level += levels_[size_t(g.la)].est;
    s.level_lo += levels_[size_t(g.la)].est;
    s.level_hi += levels_[size_t(g.la)].est;
    s.how = d.level ? "measured" : "unsure";
    s.reason = fmt::format(
        "vs the midpoint of the range's levels: {:+.3f}% [{:+.3f}%, {:+.3f}%]; vs first {:+.3f}%, vs last {:+.3f}% "
        "{}",
        100 * d.side.effect_pct(), 100 * d.side.ci_lo_pct(), 100 * d.side.ci_hi_pct(), 100 * d.vs_a.effect_pct(),
        100 * d.vs_b.effect_pct(), amount(s));
  }
}

// Records the steps, then splits the range at the classified commits: the ranges left to search.
std::vector<Loop::Seg> Loop::record_and_split(const Seg& g, Picked& pk) {
  const bool timed = is_timed(plan_.metric);
  struct Point {
    int i;
    double rank;
    int level;
  };
  std::vector<Point> pts = {{g.a, 0, g.la}};
  for (size_t q = 0; q < pk.picks.size(); ++q) {
    Step& s = pk.steps[q];
    const int m = pk.picks[q];
    if (!pk.lv[q]) {
      s.side = Side::skip;
      skipped_[size_t(m)] = true;
    } else {
      const Level L = *pk.lv[q];
      s.side = L == Level::a || L == Level::beyond_a ? Side::good : Side::bad;
      int lid = L == Level::a ? g.la : L == Level::b ? g.lb : -1;
      if (lid < 0) {
        lid = int(levels_.size());
        levels_.push_back({s.level, s.level_lo, s.level_hi});
      }
      if (plan_.use_hashes && timed && o_.probes[size_t(m)].ok) level_of_hash_.emplace(o_.probes[size_t(m)].hash_key(), lid);
      const double rank = L == Level::a ? 0 : L == Level::b ? 1 : L == Level::between ? 0.5 : L == Level::beyond_b ? 2 : -1;
      pts.push_back({m, rank, lid});
    }
    s.klass = pk.lv[q] ? to_string(*pk.lv[q]) : "";
    say(fmt::format("  {} -> {} ({}): {}", short_sha(s.sha), pk.lv[q] ? to_string(*pk.lv[q]) : "skip", s.how, s.reason));
    decision_event("step:" + s.sha, s);
    o_.steps.push_back(s);
  }
  pts.push_back({g.b, 1, g.lb});
  std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.i < y.i; });
  std::vector<Seg> children;
  for (size_t k = 0; k + 1 < pts.size(); ++k) {
    const Point &x = pts[k], &y = pts[k + 1];
    if (x.rank == y.rank) continue;  // same level at both ends (or two intermediates taken as one)
    const bool same_way = y.rank > x.rank;
    Seg c{x.i, y.i, x.level, y.level, same_way ? g.improvement : !g.improvement};
    if (c.improvement && !plan_.report_improvements) continue;
    if (!plan_.several && !same_way) continue;
    children.push_back(c);
  }
  if (!plan_.several && children.size() > 1) children.resize(1);
  return children;
}


void Loop::probe_all(const std::vector<int>& picks) {
  std::vector<int> todo;
  for (int m : picks)
    if (!o_.probed[size_t(m)]) todo.push_back(m);
  if (todo.size() <= 1 || plan_.workers <= 1) {
    for (int m : todo) probe(m);
    return;
  }
  // Parallel rounds: the commits not in the journal are probed concurrently (each builds in its own
  // worktree), then journaled in walk order.
  std::vector<int> fresh;
  for (int m : todo) {
    if (j_ && j_->probe(plan_.shas[size_t(m)])) {
      probe(m);
      continue;
    }
    fresh.push_back(m);
    if (j_) j_->append({{"ev", "build_start"}, {"sha", plan_.shas[size_t(m)]}, {"index", m}});
  }
  const double t = now_s();
  std::vector<std::future<Probe>> fut;
  for (int m : fresh) fut.push_back(std::async(std::launch::async, [this, m] { return lab_.probe(plan_.shas[size_t(m)]); }));
  std::vector<Probe> got;
  std::exception_ptr err;
  for (auto& f : fut) {
    try {
      got.push_back(f.get());
    } catch (...) {
      if (!err) err = std::current_exception();
      got.emplace_back();
    }
  }
  o_.build_wait_s += now_s() - t;
  if (err) std::rethrow_exception(err);
  for (size_t k = 0; k < fresh.size(); ++k) {
    const int m = fresh[k];
    build_event({{"ev", "build_end"}, {"sha", plan_.shas[size_t(m)]}, {"index", m}, {"probe", to_json(got[k])},
                 {"wall_s", now_s() - t}});
    if (got[k].built) ++o_.builds;
    o_.probes[size_t(m)] = got[k];
    o_.probed[size_t(m)] = true;
  }
  drain_build_events();
}

}  // namespace kb::bisect::loop
