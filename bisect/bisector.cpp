#include "bisect/bisector.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include <fmt/format.h>

#include "bisect/loop.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_read.h"

namespace kb::bisect {

namespace loop {

using json = nlohmann::json;
using git::short_sha;

uint64_t seed_for(uint64_t seed, const std::string& key) {
  const std::string h = sha256_hex(key);
  return seed ^ std::stoull(h.substr(0, 15), nullptr, 16);
}

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

void set_amount(Step& s, const Measured& m, int block_rounds) {
  s.block_rounds = block_rounds;
  s.units = m.units.empty() ? 0 : int64_t(m.units[0].size());
  s.rounds = m.raw.empty() ? 0 : int64_t(m.raw[0].size());
}

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
    o_.build_wait_s += now_s() - t;
    build_event({{"ev", "build_end"}, {"sha", sha}, {"index", i}, {"probe", to_json(p)}, {"wall_s", now_s() - t}});
    drain_build_events();
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
    o_.measure_s += step.wall_s;
    const int64_t n = m.raw.empty() ? 0 : int64_t(m.raw[0].size());
    o_.samples += n * int64_t(shas.size());
    if (j_)
      j_->append({{"ev", "measure"}, {"key", key}, {"shas", shas}, {"block_rounds", plan_.block_rounds},
                  {"units", m.units}, {"raw", m.raw}, {"placements", m.placements}, {"wall_s", step.wall_s}});
  }
  step.measured = true;
  set_amount(step, m, plan_.block_rounds);
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
  journal_start();

  // ---- endpoints and reproduction ----
  lab_.reference(plan_.shas[0]);
  // With builders, the first rounds' commits build while the endpoints do.
  want_ahead(0, n - 1, {0, n - 1}, {});
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

  // Both designs reproduce first (L3: from runs of the metric, bisect/expensive.cpp) and record it alike.
  Step rep;
  const bool reproduced = plan_.expensive ? l3_reproduce(rep) : reproduce(rep);
  say("reproduce: " + rep.reason);
  decision_event("reproduce", rep);
  o_.reproduce = rep;
  o_.reproduce_s = now_s() - t0_;
  if (!reproduced) return not_reproduced(rep);
  if (plan_.expensive) return l3_run();

  // ---- steps over a work list of ranges ----
  init_levels(rep);
  std::deque<Seg> work = {Seg{0, n - 1, 0, 1, false}};
  work_ = &work;
  while (!work.empty() && !budget_out_) {
    Seg g = work.front();
    work.pop_front();
    search(g, work);
  }
  if (budget_out_)
    for (const Seg& g : work) o_.unresolved.push_back({g.a, g.b, g.improvement, "budget-exhausted", range_candidates(g)});
  end_builds();

  finish_outcome();
  o_.search_s = std::max(0.0, now_s() - t0_ - o_.reproduce_s - o_.verify_s);
  if (plan_.builders <= 1) o_.builds_started = o_.builds;
  o_.wall_s = elapsed();
  return std::move(o_);
}

Outcome Loop::not_reproduced(const Step& rep) {
  if (o_.expensive) {  // runs still in flight answer nothing any more: Slurm jobs are cancelled
    lab_.cancel_runs();
    while (!flying_.empty()) l3_wait();
  }
  end_builds();
  if (plan_.builders <= 1) o_.builds_started = o_.builds;
  o_.verdict = rep.measured && rep.decision.verdict == stats::Verdict::unsure ? "inconclusive" : "not-reproduced";
  o_.summary = (o_.verdict == "inconclusive" ? "could not tell good from bad within the budget: "
                                             : "the regression does not reproduce: ") +
               rep.reason;
  o_.wall_s = elapsed();
  return std::move(o_);
}

Step Loop::step_at(int i, const Seg* g) const {
  Step s;
  s.phase = "step";
  s.index = i;
  s.sha = plan_.shas[size_t(i)];
  if (g) {
    s.seg_lo = g->a;
    s.seg_hi = g->b;
  }
  s.round = o_.rounds;
  if (o_.probed[size_t(i)]) {
    s.built = o_.probes[size_t(i)].built;
    s.build_s = o_.probes[size_t(i)].build_s;
  }
  return s;
}

// The journal's first event, or a resume of one for the same range and units.
void Loop::journal_start() {
  if (!j_) return;
  if (const json* st = j_->start()) {
    if (st->at("shas").get<std::vector<std::string>>() != plan_.shas)
      throw InputError(fmt::format("journal {} is for a different commit range; use another --workdir", j_->path()));
    // Journaled units are blocks of this many rounds (0: rounds); a replay in other units would misread them.
    if (const int jb = json_int_or<int>(*st, "block_rounds", 0, "journal " + j_->path() + " start");
        jb != plan_.block_rounds)
      throw InputError(fmt::format("journal {} was measured with measure.block_rounds {}, the config now says {} "
                                   "(default {}); restore it or use another --workdir",
                                   j_->path(), jb, plan_.block_rounds, MeasureSettings{}.block_rounds));
    // Single runs and measurements of rounds are not each other's units either.
    if (const bool je = st->value("expensive", false); je != plan_.expensive)
      throw InputError(fmt::format("journal {} was made with measure.sample_cost {}, the config now says {}; restore it "
                                   "or use another --workdir",
                                   j_->path(), je ? "expensive" : "cheap", plan_.expensive ? "expensive" : "cheap"));
    for (const json& ev : j_->events()) count_build_event(ev);
    j_->append({{"ev", "resume"}, {"events", j_->events().size()}});
  } else {
    json ev = {{"ev", "start"}, {"shas", plan_.shas}, {"metric", metric_label(plan_.metric, plan_.metric_column)},
               {"threshold", plan_.threshold}, {"threshold_absolute", plan_.threshold_absolute},
               {"workers", plan_.workers}, {"several", plan_.several}, {"block_rounds", plan_.block_rounds},
               {"report_improvements", plan_.report_improvements}};
    if (plan_.expensive) {
      ev["expensive"] = true;
      ev["confidence"] = plan_.confidence;
    }
    if (!plan_.weights.empty()) ev["weights"] = plan_.weights;
    j_->append(ev);
  }
}

void Loop::want_ahead(int lo, int hi, const std::vector<int>& needs, const std::vector<int>& picks) {
  if (plan_.builders <= 1) return;
  auto fresh = [&](int i) { return !o_.probed[size_t(i)] && !(j_ && j_->probe(plan_.shas[size_t(i)])); };
  std::vector<std::string> need, ahead;
  bool ready = true;
  for (int i : needs)
    if (fresh(i)) {
      need.push_back(plan_.shas[size_t(i)]);
      ready = ready && lab_.ready(need.back());
    }
  std::set<int> skips;
  for (int i = lo + 1; i < hi; ++i)
    if (skipped_.size() > size_t(i) && skipped_[size_t(i)]) skips.insert(i);
  // A round whose builds are ready is decided within a measurement: building deep from it starts builds
  // that decision mostly cancels minutes later, so it looks one level ahead (the simulation's rule).
  const int depth = ready ? std::min(1, plan_.speculation_depth) : plan_.speculation_depth;
  for (int c : speculation(lo, hi, picks, plan_.workers, skips, plan_.builders * 2, depth, plan_.weights))
    if (fresh(c)) {
      ahead.push_back(plan_.shas[size_t(c)]);
      asked_.insert(c);
    }
  for (int i : needs) asked_.insert(i);
  // Useless: asked for before, but outside (lo, hi) and every range still to search.
  auto open = [&](int i) {
    if (i > lo && i < hi) return true;
    if (work_)
      for (const Seg& g : *work_)
        if (i > g.a && i < g.b) return true;
    return false;
  };
  std::vector<std::string> useless;
  for (auto it = asked_.begin(); it != asked_.end();) {
    if (open(*it) || std::find(needs.begin(), needs.end(), *it) != needs.end()) {
      ++it;
      continue;
    }
    useless.push_back(plan_.shas[size_t(*it)]);
    it = asked_.erase(it);
  }
  lab_.want(need, ahead, useless);
  drain_build_events();
}

void Loop::end_builds() {
  if (plan_.builders <= 1) return;
  lab_.stop_builds();
  drain_build_events();
}

void Loop::drain_build_events() {
  for (const json& ev : lab_.build_events()) build_event(ev);
}

void Loop::build_event(const json& ev) {
  count_build_event(ev);
  if (j_) j_->append(ev);
}

void Loop::count_build_event(const json& ev) {
  const std::string kind = ev.value("ev", std::string()), sha = ev.value("sha", std::string());
  if (kind == "build_submitted") {
    ++o_.builds_started;
    if (ev.value("speculative", false)) ahead_.insert(sha);
  } else if (kind == "build_cancelled") {
    ++o_.builds_cancelled;
    ahead_.erase(sha);
  } else if (kind == "build_end" && ahead_.erase(sha)) {
    ++o_.builds_ahead_used;
  }
}

// Reproduction: good and bad differ beyond the threshold (static values, or measured interleaved).
bool Loop::reproduce(Step& rep) {
  const int n = int(plan_.shas.size());
  const bool timed = is_timed(plan_.metric);
  const Probe& pg = o_.probes[0];
  const Probe& pb = o_.probes[size_t(n - 1)];
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
    rep.reason = fmt::format("{} good -> bad: {}", metric_label(plan_.metric, plan_.metric_column), ev);
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
  return reproduced;
}

// Level 0 is good, level 1 bad (from the reproduction); equal code hashes map to their level.
void Loop::init_levels(const Step& rep) {
  const int n = int(plan_.shas.size());
  const bool timed = is_timed(plan_.metric);
  skipped_.assign(size_t(n), false);
  levels_.push_back({0, 0, 0});  // level 0: good
  levels_.push_back({timed ? gap_ : rep.level, rep.level_lo, rep.level_hi});  // level 1: bad
  if (!timed) levels_[1] = {rep.level, rep.level, rep.level};
  if (timed && rep.has_level) levels_[1] = {rep.level, rep.level_lo, rep.level_hi};
  if (plan_.use_hashes && timed) {
    level_of_hash_[o_.probes[0].hash_key()] = 0;
    level_of_hash_[o_.probes[size_t(n - 1)].hash_key()] = 1;
  }
}

}  // namespace loop

int Plan::first_units() const {
  if (block_rounds <= 0) return min_samples;
  return std::max(kMinBlocks, (min_samples + block_rounds - 1) / block_rounds);
}

int Plan::max_units() const {
  if (block_rounds <= 0) return budgets.max_samples_per_step;
  return std::max(first_units(), budgets.max_samples_per_step / block_rounds);
}

Outcome run_bisection(const Plan& plan, Lab& lab, Journal* journal, const Log& log) {
  loop::Loop loop(plan, lab, journal, log);
  return loop.run();
}

}  // namespace kb::bisect
