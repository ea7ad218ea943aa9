#include "bisect/bisector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <deque>
#include <future>
#include <map>

#include <fmt/format.h>

#include "core/clock.h"
#include "bisect/priors.h"
#include "bisect/provider.h"
#include "bisect/report.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"

namespace kb::bisect {

namespace fs = std::filesystem;
using json = nlohmann::json;
using git::short_sha;

namespace {


uint64_t seed_for(uint64_t seed, const std::string& key) {
  const std::string h = sha256_hex(key);
  return seed ^ std::stoull(h.substr(0, 15), nullptr, 16);
}

// The level of `t` relative to `g` (log-ratio, 95% CI) from paired rounds.
void set_level(Step& s, const std::vector<double>& g, const std::vector<double>& t) {
  const size_t n = std::min(g.size(), t.size());
  if (n < 2) return;
  auto est = stats::hodges_lehmann_one_sample(stats::log_ratios(std::vector<double>(g.begin(), g.begin() + long(n)),
                                                                std::vector<double>(t.begin(), t.begin() + long(n))),
                                              0.95);
  s.has_level = true;
  s.level = est.estimate;
  s.level_lo = est.ci.lo;
  s.level_hi = est.ci.hi;
}

// "after 160 rounds (20 blocks)" / "after 64 rounds": what a measured decision saw.
std::string amount(const Step& s) {
  if (s.block_rounds > 0) return fmt::format("after {} rounds ({} blocks of {})", s.rounds, s.units, s.block_rounds);
  return fmt::format("after {} rounds", s.rounds);
}

double sum_of(const std::vector<double>& v, const std::vector<bool>& mask) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (mask.empty() || (i < mask.size() && mask[i])) s += v[i];
  return s;
}

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
  void search(Seg g, std::deque<Seg>& work);
  void probe_all(const std::vector<int>& picks);
  std::optional<Level> static_level(const Seg& g, const Probe& p);
  std::vector<int> range_candidates(const Seg& g) const;
  void verify_culprit(const Seg& g);
  void finish_outcome();
  void decision_event(const std::string& key, const Step& s);
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
};

const Probe& Loop::probe(int i) {
  if (o_.probed[size_t(i)]) return o_.probes[size_t(i)];
  const std::string& sha = plan_.shas[size_t(i)];
  Probe p;
  if (const json* ev = j_ ? j_->probe(sha) : nullptr) {
    p = probe_from_json(ev->at("probe"));
    if (p.built) ++o_.builds;  // built in an earlier session: counts against the budget, never repeated
  } else {
    if (j_) j_->append({{"ev", "build_start"}, {"sha", sha}, {"index", i}});
    const double t = now_s();
    p = lab_.probe(sha);
    if (j_) j_->append({{"ev", "build_end"}, {"sha", sha}, {"index", i}, {"probe", to_json(p)}, {"wall_s", now_s() - t}});
    if (p.built) ++o_.builds;
  }
  o_.probes[size_t(i)] = p;
  o_.probed[size_t(i)] = true;
  return o_.probes[size_t(i)];
}

Rounds Loop::measure(const std::string& key, const std::vector<int>& idx, SequentialRule& rule, int max_units,
                     Step& step) {
  Rounds units = measure_units(key, idx, [&](const Rounds& r) { return rule(r); }, max_units, step);
  step.decision = rule.finish(units);
  return units;
}

Rounds Loop::measure_units(const std::string& key, const std::vector<int>& idx, const RoundsStop& stop, int max_units,
                           Step& step) {
  Measured m;
  if (const json* ev = j_ ? j_->measurement(key) : nullptr) {
    // Journals before blocks hold "rounds" only (units were rounds).
    m.units = ev->contains("units") ? ev->at("units").get<Rounds>() : ev->at("rounds").get<Rounds>();
    m.raw = ev->contains("raw") ? ev->at("raw").get<Rounds>() : m.units;
    // Replays the decision over the journaled units: the measurement stopped where the rule decided.
    const size_t n = m.units.empty() ? 0 : m.units[0].size();
    for (size_t k = 1; k <= n; ++k) {
      Rounds prefix(m.units.size());
      for (size_t c = 0; c < m.units.size(); ++c) prefix[c].assign(m.units[c].begin(), m.units[c].begin() + long(k));
      if (stop(prefix)) break;
    }
    step.wall_s = ev->value("wall_s", 0.0);
    say(fmt::format("  (replayed from the journal: {} units)", n));
  } else {
    std::vector<std::string> shas;
    for (int i : idx) shas.push_back(plan_.shas[size_t(i)]);
    MeasureAsk ask;
    ask.max_units = max_units;
    ask.block_rounds = plan_.block_rounds;
    ask.max_time_s = plan_.max_step_s;
    if (plan_.budgets.max_wall_s > 0)
      ask.max_time_s = std::max(1.0, std::min(ask.max_time_s, plan_.budgets.max_wall_s - elapsed()));
    ask.seed = seed_for(plan_.seed, key);
    const double t = now_s();
    m = lab_.measure(shas, ask, stop);
    step.wall_s = now_s() - t;
    const int64_t n = m.raw.empty() ? 0 : int64_t(m.raw[0].size());
    o_.samples += n * int64_t(shas.size());
    if (j_)
      j_->append({{"ev", "measure"}, {"key", key}, {"shas", shas}, {"block_rounds", plan_.block_rounds},
                  {"units", m.units}, {"raw", m.raw}, {"wall_s", step.wall_s}});
  }
  step.measured = true;
  step.block_rounds = plan_.block_rounds;
  step.units = m.units.empty() ? 0 : int64_t(m.units[0].size());
  step.rounds = m.raw.empty() ? 0 : int64_t(m.raw[0].size());
  step.samples = step.rounds * int64_t(idx.size());
  return m.units;
}

void Loop::decision_event(const std::string& key, const Step& s) {
  if (!j_ || j_->has_decision(key)) return;
  json ev = {{"ev", "decision"}, {"key", key},  {"phase", s.phase}, {"index", s.index},
             {"sha", s.sha},     {"how", s.how}, {"reason", s.reason}};
  if (!s.klass.empty()) ev["level"] = s.klass;
  if (s.seg_lo >= 0) ev["range"] = {s.seg_lo, s.seg_hi};
  if (s.side) ev["side"] = to_string(*s.side);
  if (s.measured) {
    ev["rounds"] = s.rounds;
    if (s.block_rounds > 0) ev["blocks"] = s.units;
    ev["verdict"] = stats::to_string(s.decision.verdict);
    ev["effect_log"] = s.decision.effect;
    ev["ci_log"] = {s.decision.ci.lo, s.decision.ci.hi};
  }
  j_->append(ev);
}

Outcome Loop::run() {
  const int n = int(plan_.shas.size());
  if (n < 2) throw InputError("a bisection needs a good and a bad commit");
  o_.probes.assign(size_t(n), Probe{});
  o_.probed.assign(size_t(n), false);
  o_.weights = plan_.weights;
  const bool timed = is_timed(plan_.metric);
  if (j_) {
    if (const json* st = j_->start()) {
      if (st->at("shas").get<std::vector<std::string>>() != plan_.shas)
        throw InputError(fmt::format("journal {} is for a different commit range; use another --workdir", j_->path()));
      // Journaled units are blocks of this many rounds (0: rounds); a replay in other units would misread them.
      if (const int jb = st->value("block_rounds", 0); jb != plan_.block_rounds)
        throw InputError(fmt::format("journal {} was measured with measure.block_rounds {}, the config now says {}; "
                                     "restore it or use another --workdir",
                                     j_->path(), jb, plan_.block_rounds));
      j_->append({{"ev", "resume"}, {"events", j_->events().size()}});
    } else {
      json ev = {{"ev", "start"}, {"shas", plan_.shas}, {"metric", to_string(plan_.metric)},
                 {"threshold", plan_.threshold}, {"threshold_absolute", plan_.threshold_absolute},
                 {"workers", plan_.workers}, {"several", plan_.several}, {"block_rounds", plan_.block_rounds},
                 {"report_improvements", plan_.report_improvements}};
      if (!plan_.weights.empty()) ev["weights"] = plan_.weights;
      j_->append(ev);
    }
  }

  // ---- endpoints and reproduction ----
  for (int i : {0, n - 1}) {
    const char* which = i == 0 ? "good" : "bad";
    say(fmt::format("{} {}: building and compiling", which, short_sha(plan_.shas[size_t(i)])));
    const Probe& p = probe(i);
    if (!p.ok)
      throw InputError(fmt::format("the {} commit {} cannot be used: {}", which, short_sha(plan_.shas[size_t(i)]), p.reason));
  }
  const Probe& pg = o_.probes[0];
  const Probe& pb = o_.probes[size_t(n - 1)];
  if (pg.case_ids != pb.case_ids)
    throw InputError("the good and bad toolchains give different case lists (check the toolchains' backends)");

  Step rep;
  rep.phase = "reproduce";
  rep.index = n - 1;
  rep.base_index = 0;
  rep.sha = plan_.shas.back();
  bool reproduced = false;
  if (!timed) {
    regressed_ = static_regressed(pg.values, pb.values, plan_.threshold, plan_.threshold_absolute);
    reproduced = std::any_of(regressed_.begin(), regressed_.end(), [](bool b) { return b; });
    rep.how = "static";
    std::string ev;
    for (size_t c = 0; c < pg.values.size(); ++c)
      ev += fmt::format("{}{}: {:g} -> {:g}", ev.empty() ? "" : "; ", pg.case_ids[c], pg.values[c], pb.values[c]);
    rep.reason = fmt::format("{} good -> bad: {}", to_string(plan_.metric), ev);
    if (!reproduced) regressed_.assign(regressed_.size(), true);
    o_.good_level = sum_of(pg.values, regressed_);
    rep.has_level = true;
    rep.level = rep.level_lo = rep.level_hi = sum_of(pb.values, regressed_);
  } else if (plan_.use_hashes && pg.hash_key() == pb.hash_key()) {
    rep.how = "same-code";
    rep.reason = "good and bad compile every case to identical machine code (equal code hashes)";
  } else {
    say("reproducing: measuring good and bad interleaved");
    auto rule = threshold_rule(plan_.threshold, plan_.alpha, plan_.first_units(), plan_.max_units());
    Rounds r = measure("reproduce", {0, n - 1}, rule, plan_.max_units(), rep);
    rep.how = "measured";
    set_level(rep, r[0], r[1]);
    const auto& d = rep.decision;
    reproduced = d.verdict == stats::Verdict::worse;
    gap_ = d.effect;
    rep.reason = fmt::format("bad vs good: {:+.3f}% [{:+.3f}%, {:+.3f}%] {}: {} (threshold {:.3g}%)",
                             100 * d.effect_pct(), 100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), amount(rep),
                             stats::to_string(d.verdict), 100 * plan_.threshold);
  }
  say("reproduce: " + rep.reason);
  decision_event("reproduce", rep);
  o_.reproduce = rep;
  if (!reproduced) {
    o_.verdict = rep.measured && rep.decision.verdict == stats::Verdict::unsure ? "inconclusive" : "not-reproduced";
    o_.summary = (o_.verdict == "inconclusive" ? "could not tell good from bad within the budget: "
                                               : "the regression does not reproduce: ") +
                 rep.reason;
    o_.wall_s = elapsed();
    return std::move(o_);
  }

  // ---- steps over a work list of ranges ----
  skipped_.assign(size_t(n), false);
  levels_.push_back({0, 0, 0});  // level 0: good
  levels_.push_back({timed ? gap_ : rep.level, rep.level_lo, rep.level_hi});  // level 1: bad
  if (!timed) levels_[1] = {rep.level, rep.level, rep.level};
  if (timed && rep.has_level) levels_[1] = {rep.level, rep.level_lo, rep.level_hi};
  if (plan_.use_hashes && timed) {
    level_of_hash_[pg.hash_key()] = 0;
    level_of_hash_[pb.hash_key()] = 1;
  }
  std::deque<Seg> work = {Seg{0, n - 1, 0, 1, false}};
  while (!work.empty() && !budget_out_) {
    Seg g = work.front();
    work.pop_front();
    search(g, work);
  }
  if (budget_out_)
    for (const Seg& g : work) o_.unresolved.push_back({g.a, g.b, g.improvement, "budget-exhausted", range_candidates(g)});

  finish_outcome();
  o_.wall_s = elapsed();
  return std::move(o_);
}

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
    const double delta = std::abs(to - from);
    if (plan_.threshold_absolute) return delta >= plan_.threshold;
    if (from == 0) return delta > 0;
    return delta >= plan_.threshold * std::abs(from);
  };
  const double dir = B > A ? 1 : -1;
  if (!beyond(A, T)) return Level::a;
  if (!beyond(B, T)) return Level::b;
  if ((T - A) * dir > 0 && (B - T) * dir > 0) return Level::between;
  if ((T - B) * dir > 0) return Level::beyond_b;
  return Level::beyond_a;
}

void Loop::search(Seg g, std::deque<Seg>& work) {
  const int n = int(plan_.shas.size());
  const bool timed = is_timed(plan_.metric);
  for (;;) {
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
      return;
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
      return;
    }
    picks = affordable;
    ++o_.rounds;
    say(fmt::format("round {}: {} in {}..{} ({} candidates left{})", o_.rounds,
                    picks.size() == 1 ? "commit " + short_sha(plan_.shas[size_t(picks[0])]) + fmt::format(" ({} of {})", picks[0], n - 1)
                                      : fmt::format("{} commits", picks.size()),
                    short_sha(plan_.shas[size_t(g.a)]), short_sha(plan_.shas[size_t(g.b)]), g.b - g.a,
                    g.improvement ? ", an improvement" : ""));
    probe_all(picks);

    // Classify what needs no measurement; collect the rest.
    std::vector<Step> steps(picks.size());
    std::vector<std::optional<Level>> lv(picks.size());
    std::vector<size_t> to_measure;
    const Probe& pa = o_.probes[size_t(g.a)];
    for (size_t q = 0; q < picks.size(); ++q) {
      const int m = picks[q];
      Step& s = steps[q];
      s.phase = "step";
      s.index = m;
      s.sha = plan_.shas[size_t(m)];
      s.seg_lo = g.a;
      s.seg_hi = g.b;
      s.round = o_.rounds;
      const Probe& p = o_.probes[size_t(m)];
      s.built = p.built;
      s.build_s = p.build_s;
      ++o_.visited;
      if (!p.ok) {
        s.how = "build-or-compile-failed";
        s.reason = p.reason;
      } else if (p.case_ids != pa.case_ids) {
        s.how = "different-cases";
        s.reason = "this toolchain gives a different case list";
      } else if (!timed) {
        lv[q] = static_level(g, p);
        s.how = "static";
        s.has_level = true;
        s.level = s.level_lo = s.level_hi = sum_of(p.values, regressed_);
        s.reason = fmt::format("{} = {:g} (range ends {:g} .. {:g})", to_string(plan_.metric), s.level,
                               sum_of(pa.values, regressed_), sum_of(o_.probes[size_t(g.b)].values, regressed_));
      } else if (auto it = level_of_hash_.find(p.hash_key());
                 plan_.use_hashes && it != level_of_hash_.end() && (it->second == g.la || it->second == g.lb)) {
        lv[q] = it->second == g.la ? Level::a : Level::b;
        s.how = "same-code";
        s.same_code_as = it->second == g.la ? g.a : g.b;
        s.reason = fmt::format("identical machine code to a commit at the level of {}", short_sha(plan_.shas[size_t(s.same_code_as)]));
      } else {
        to_measure.push_back(q);
      }
    }
    if (!to_measure.empty()) {
      std::vector<int> idx = {g.a, g.b};
      for (size_t q : to_measure) idx.push_back(picks[q]);
      const bool b_worse = !g.improvement;
      StepRule rule(plan_.threshold, plan_.alpha, plan_.first_units(), plan_.max_units(),
                    int(to_measure.size()), b_worse, plan_.several || plan_.report_improvements,
                    plan_.report_improvements);
      std::string key = "step:" + plan_.shas[size_t(picks[to_measure[0]])];
      for (size_t k = 1; k < to_measure.size(); ++k) key += "," + plan_.shas[size_t(picks[to_measure[k]])];
      Step meas;
      Rounds r = measure_with(key, idx, rule, meas);
      auto ds = rule.finish(r);
      o_.measured_steps += int(to_measure.size());
      for (size_t k = 0; k < to_measure.size(); ++k) {
        const size_t q = to_measure[k];
        Step& s = steps[q];
        s.measured = true;
        s.rounds = meas.rounds;
        s.units = meas.units;
        s.block_rounds = meas.block_rounds;
        s.samples = meas.samples;
        s.wall_s = meas.wall_s;
        const StepDecision& d = ds[k];
        lv[q] = d.level;
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

    // Record, then split the range at the classified commits.
    struct Point {
      int i;
      double rank;
      int level;
    };
    std::vector<Point> pts = {{g.a, 0, g.la}};
    for (size_t q = 0; q < picks.size(); ++q) {
      Step& s = steps[q];
      const int m = picks[q];
      if (!lv[q]) {
        s.side = Side::skip;
        skipped_[size_t(m)] = true;
      } else {
        const Level L = *lv[q];
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
      s.klass = lv[q] ? to_string(*lv[q]) : "";
      say(fmt::format("  {} -> {} ({}): {}", short_sha(s.sha), lv[q] ? to_string(*lv[q]) : "skip", s.how, s.reason));
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
    if (children.size() == 1 && children[0].improvement == g.improvement) {
      g = children[0];
      continue;
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) work.push_front(*it);
    return;
  }
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
  if (err) std::rethrow_exception(err);
  for (size_t k = 0; k < fresh.size(); ++k) {
    const int m = fresh[k];
    if (j_)
      j_->append({{"ev", "build_end"}, {"sha", plan_.shas[size_t(m)]}, {"index", m}, {"probe", to_json(got[k])},
                  {"wall_s", now_s() - t}});
    if (got[k].built) ++o_.builds;
    o_.probes[size_t(m)] = got[k];
    o_.probed[size_t(m)] = true;
  }
}

void Loop::verify_culprit(const Seg& g) {
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
    v.reason = fmt::format("{}: parent {:g} -> {} {:g}", to_string(plan_.metric), cu.parent_value, what, v.level);
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

}  // namespace

int Plan::first_units() const {
  if (block_rounds <= 0) return min_samples;
  return std::max(kMinBlocks, (min_samples + block_rounds - 1) / block_rounds);
}

int Plan::max_units() const {
  if (block_rounds <= 0) return budgets.max_samples_per_step;
  return std::max(first_units(), budgets.max_samples_per_step / block_rounds);
}

Outcome run_bisection(const Plan& plan, Lab& lab, Journal* journal, const Log& log) {
  Loop loop(plan, lab, journal, log);
  return loop.run();
}

std::string default_workdir(const BisectConfig& cfg) {
  std::string base = cfg.file.empty() ? fs::current_path().string() : fs::absolute(cfg.file).parent_path().string();
  return base + "/kbisect-bisect-" + cfg.name;
}

namespace {

struct Range {
  std::vector<git::CommitInfo> commits;
};

Range validate_range(const BisectConfig& cfg, const git::Repo& repo) {
  const std::string good = repo.resolve(cfg.good, "good ref");
  const std::string bad = repo.resolve(cfg.bad, "bad ref");
  if (good == bad)
    throw InputError(fmt::format("{}: good '{}' and bad '{}' are the same commit {}: the range is empty", cfg.file,
                                 cfg.good, cfg.bad, short_sha(good)));
  if (!repo.is_ancestor(good, bad))
    throw InputError(fmt::format("{}: good '{}' ({}) is not an ancestor of bad '{}' ({})", cfg.file, cfg.good,
                                 short_sha(good), cfg.bad, short_sha(bad)));
  auto between = repo.commits_between(good, bad, cfg.first_parent);
  if (between.empty())
    throw InputError(fmt::format("{}: no commits between good '{}' and bad '{}'", cfg.file, cfg.good, cfg.bad));
  std::vector<std::string> all = {good};
  all.insert(all.end(), between.begin(), between.end());
  Range r;
  r.commits = repo.commit_infos(all);
  return r;
}

Plan plan_for(const BisectConfig& cfg, const std::vector<git::CommitInfo>& commits) {
  Plan p;
  for (const auto& c : commits) p.shas.push_back(c.sha);
  p.metric = cfg.metric;
  // Identical kernel code says nothing about a user command's metric (it builds and runs more than the
  // kernel), so an external metric measures every commit.
  p.use_hashes = cfg.metric != Metric::external;
  p.threshold = cfg.threshold;
  p.threshold_absolute = cfg.threshold_absolute;
  p.budgets = cfg.budgets;
  p.min_samples = cfg.measure.min_samples;
  p.block_rounds = block_rounds_of(cfg);
  p.alpha = cfg.measure.alpha;
  p.max_step_s = cfg.measure.max_step_s;
  p.seed = cfg.measure.seed;
  p.workers = cfg.parallel;
  p.several = cfg.several_culprits;
  p.report_improvements = cfg.report_improvements;
  return p;
}

}  // namespace

BisectRun bisect(const BisectConfig& cfg, const std::string& workdir_in, bool resume, const Log& log,
                 bool report_improvements, int workers) {
  git::Repo repo(cfg.repo);
  Range range = validate_range(cfg, repo);
  BisectRun run;
  run.commits = range.commits;
  run.workdir = workdir_in.empty() ? default_workdir(cfg) : workdir_in;
  make_dirs(run.workdir);
  run.workdir = fs::canonical(run.workdir).string();
  Journal journal(run.workdir + "/journal.jsonl", resume);
  if (log)
    log(fmt::format("bisecting {} commits between {} and {} ({} metric, threshold {})", range.commits.size() - 1,
                    short_sha(range.commits.front().sha), short_sha(range.commits.back().sha), to_string(cfg.metric),
                    cfg.threshold_absolute ? fmt::format("{:g}", cfg.threshold) : fmt::format("{:g}%", 100 * cfg.threshold)));
  Provider provider(cfg, repo, run.workdir);
  RealLab lab(cfg, provider);
  Plan plan = plan_for(cfg, range.commits);
  if (report_improvements) plan.report_improvements = true;
  if (workers > 0) plan.workers = workers;
  if (!cfg.priors.empty()) {
    plan.weights = prior_weights(repo, plan.shas, cfg.priors);
    if (log) {
      std::map<double, int> hist;
      for (size_t i = 1; i < plan.weights.size(); ++i) ++hist[plan.weights[i]];
      std::string h;
      for (const auto& [w, k] : hist) h += fmt::format("{}{} x {:g}", h.empty() ? "" : ", ", k, w);
      log(fmt::format("prior weights from the files each commit touches: {}", h));
    }
  }
  run.outcome = run_bisection(plan, lab, &journal, log);
  json verdict = {{"ev", "verdict"}, {"verdict", run.outcome.verdict}, {"summary", run.outcome.summary}};
  if (run.outcome.culprit >= 0) verdict["culprit"] = plan.shas[size_t(run.outcome.culprit)];
  verdict["culprits"] = json::array();
  for (const auto& c : run.outcome.culprits)
    verdict["culprits"].push_back({{"sha", plan.shas[size_t(c.index)]}, {"improvement", c.improvement}, {"verified", c.verified}});
  journal.append(verdict);
  ReportPaths paths = write_reports(cfg, run.outcome, run.commits, run.workdir);
  run.result_json = paths.result_json;
  run.report_md = paths.report_md;
  run.report_html = paths.report_html;
  return run;
}

CheckResult check_commit(const BisectConfig& cfg, const std::string& workdir_in, const std::string& rev, const Log& log) {
  git::Repo repo(cfg.repo);
  const std::string good = repo.resolve(cfg.good, "good ref");
  const std::string bad = repo.resolve(cfg.bad, "bad ref");
  const std::string sha = repo.resolve(rev, "--commit");
  std::string workdir = workdir_in.empty() ? default_workdir(cfg) : workdir_in;
  make_dirs(workdir);
  Provider provider(cfg, repo, workdir);
  RealLab lab(cfg, provider);
  CheckResult res;
  if (sha == good) return {Side::good, "the good endpoint"};
  if (sha == bad) return {Side::bad, "the bad endpoint"};
  Probe pg = lab.probe(good), pb = lab.probe(bad);
  if (!pg.ok) throw InputError(fmt::format("the good commit {} cannot be used: {}", short_sha(good), pg.reason));
  if (!pb.ok) throw InputError(fmt::format("the bad commit {} cannot be used: {}", short_sha(bad), pb.reason));
  Probe pt = lab.probe(sha);
  if (!pt.ok) return {Side::skip, pt.reason};
  if (pt.case_ids != pg.case_ids) return {Side::skip, "this toolchain gives a different case list"};
  if (!is_timed(cfg.metric)) {
    auto reg = static_regressed(pg.values, pb.values, cfg.threshold, cfg.threshold_absolute);
    if (!std::any_of(reg.begin(), reg.end(), [](bool b) { return b; }))
      throw InputError(fmt::format("{} does not differ beyond the threshold between good and bad", to_string(cfg.metric)));
    Side s = static_side(pg.values, pb.values, pt.values, reg, cfg.threshold, cfg.threshold_absolute);
    return {s, fmt::format("{} = {:g} (good {:g}, bad {:g})", to_string(cfg.metric), sum_of(pt.values, reg),
                           sum_of(pg.values, reg), sum_of(pb.values, reg))};
  }
  if (pt.hash_key() == pg.hash_key()) return {Side::good, "identical machine code to good"};
  if (pt.hash_key() == pb.hash_key()) return {Side::bad, "identical machine code to bad"};
  if (log) log(fmt::format("measuring {} interleaved with good and bad", short_sha(sha)));
  const Plan plan = plan_for(cfg, {});
  auto rule = side_rule(cfg.measure.alpha, plan.first_units(), plan.max_units());
  MeasureAsk ask;
  ask.max_units = plan.max_units();
  ask.block_rounds = plan.block_rounds;
  ask.max_time_s = cfg.measure.max_step_s;
  ask.seed = seed_for(cfg.measure.seed, "check:" + sha);
  const Measured m = lab.measure({good, bad, sha}, ask, [&](const Rounds& x) { return rule(x); });
  auto d = rule.finish(m.units);
  auto side = side_of(d);
  res.side = side ? *side : Side::skip;
  Step st;
  st.block_rounds = plan.block_rounds;
  st.units = m.units.empty() ? 0 : int64_t(m.units[0].size());
  st.rounds = m.raw.empty() ? 0 : int64_t(m.raw[0].size());
  res.reason = fmt::format("vs the midpoint of good and bad: {:+.3f}% [{:+.3f}%, {:+.3f}%] {}: {}", 100 * d.effect_pct(),
                           100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), amount(st), side ? to_string(*side) : "unsure");
  return res;
}

}  // namespace kb::bisect
