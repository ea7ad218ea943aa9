#include "presubmit/presubmit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/results.h"
#include "nightly/history.h"
#include "presubmit/measure.h"

namespace kb::presubmit {

std::string to_string(CaseReport::Choice c) {
  switch (c) {
    case CaseReport::Choice::none: return "none";
    case CaseReport::Choice::timed: return "timed";
    case CaseReport::Choice::deferred: return "deferred";
  }
  return "?";
}

int Outcome::count(StaticCase::State s) const {
  return int(std::count_if(cases.begin(), cases.end(), [&](const CaseReport& c) { return c.s.state == s; }));
}
int Outcome::regressions() const {
  return int(std::count_if(cases.begin(), cases.end(), [](const CaseReport& c) { return c.regression; }));
}
int Outcome::gate_failures() const {
  return int(std::count_if(cases.begin(), cases.end(), [](const CaseReport& c) { return !c.s.gate_failures.empty(); }));
}
int Outcome::broken() const {
  return int(std::count_if(cases.begin(), cases.end(),
                           [](const CaseReport& c) { return c.incorrect || c.s.state == StaticCase::State::broken; }));
}

std::string Outcome::verdict_line() const {
  const int changed = count(StaticCase::State::changed);
  const std::string what =
      changed == 0 && broken() == 0
          ? "no kernel's code changed"
          : fmt::format("{} of {} cases changed code, {} timed", changed, cases.size(),
                        std::count_if(cases.begin(), cases.end(), [](const CaseReport& c) { return c.ab.has_value(); }));
  if (!failed()) return fmt::format("presubmit: pass ({}; {} measurements)", what, measurements);
  return fmt::format("presubmit: FAIL ({} regression(s), {} static gate failure(s), {} broken or incorrect; {}; {} measurements)",
                     regressions(), gate_failures(), broken(), what, measurements);
}

namespace {

// What the nightly history says of a case key: its points, change points and the cost its last night implies.
struct Evidence {
  int points = 0, change_points = 0;
  std::optional<Cost> cost;
};

Evidence evidence_of(const History& h, const std::string& key, const PresubmitConfig& cfg) {
  Evidence e;
  const auto by_case = h.series_by_case("^" + nightly::regex_escape(key) + "/", cfg.history_last);
  const SeriesPoint* last = nullptr;
  std::vector<SeriesPoint> all;
  for (const auto& [id, pts] : by_case) {
    int ok = 0;
    const SeriesPoint* latest = nullptr;
    for (const auto& p : pts) {
      all.push_back(p);
      if (p.status == "ok" && p.median_s > 0 && p.samples > 1) {
        ++ok;
        latest = &p;
      }
    }
    if (ok > e.points) {  // the toolchain series with the most nights prices the case
      e.points = ok;
      last = latest;
    }
  }
  e.change_points = int(detect_in_series(all, cfg.cp).size());
  if (last) {
    // The per-sample spread from the recorded CI of the median (harness/results.cpp: summarize).
    const double cv = last->ci_rel * std::sqrt(double(last->samples)) / (1.96 * stats::kMedianSe);
    e.cost = cost_from_history(cost_model(cfg), last->median_s, cv);
  }
  return e;
}

std::vector<ToolchainPair> pairs_of(const Options& o, const PresubmitConfig& cfg, Log& log) {
  const bool revs = !o.base_rev.empty() || !o.change_rev.empty();
  const bool tcs = !o.base_toolchains.empty() || !o.change_toolchains.empty();
  if (revs == tcs)
    throw InputError("presubmit needs --base REV --change REV, or --base-toolchain T --change-toolchain T (not both)");
  if (revs) {
    if (o.base_rev.empty() || o.change_rev.empty()) throw InputError("presubmit needs both --base REV and --change REV");
    return {toolchains_at(cfg, o.base_rev, o.change_rev, o.out_dir, log)};
  }
  if (o.base_toolchains.size() != o.change_toolchains.size())
    throw InputError(fmt::format("presubmit: {} --base-toolchain but {} --change-toolchain (they go in pairs, in order)",
                                 o.base_toolchains.size(), o.change_toolchains.size()));
  std::vector<ToolchainPair> pairs;
  for (size_t i = 0; i < o.base_toolchains.size(); ++i)
    pairs.push_back({o.base_toolchains[i], o.change_toolchains[i], o.base_toolchains[i], o.change_toolchains[i]});
  return pairs;
}

// One presubmit in progress: the outcome so far, the budgets and the lab.
struct Session {
  Outcome& o;
  Log& log;
  Lab lab;
  std::optional<History> history;

  double& spent(const CaseReport& c) { return c.device == "cpu" ? o.cpu_spent_s : o.gpu_spent_s; }
  double left(const CaseReport& c) {
    return (c.device == "cpu" ? o.cpu_budget_s : o.gpu_budget_s) - spent(c);
  }

  void open_history() {
    const bool timable = std::any_of(o.cases.begin(), o.cases.end(), [](const CaseReport& c) {
      return c.s.state == StaticCase::State::changed && c.not_timable.empty();
    });
    if (!timable) return;  // nothing to price
    const std::string& path = o.cfg.history;
    if (path.empty()) return o.notes.push_back("no history configured: every changed case is priced by a pilot");
    if (!file_exists(path))
      return o.notes.push_back(fmt::format("no history at {} yet: every changed case is priced by a pilot", path));
    history.emplace(path, false);
  }

  // Weight, history and cost of every changed case that can be timed here.
  void gather() {
    for (CaseReport& c : o.cases) {
      if (c.s.state != StaticCase::State::changed || !c.not_timable.empty()) continue;
      c.candidate.weight = weight_of(o.cfg, c.s.key);
      c.candidate.static_size = c.s.static_size;
      if (history) {
        const Evidence e = evidence_of(*history, c.s.key, o.cfg);
        c.history_points = e.points;
        c.candidate.change_points = e.change_points;
        c.cost = e.cost;
      }
      c.value = value_of(c.candidate);
    }
  }

  // Correctness first, then a pilot for the cases the history cannot price (most valuable first; pilots may
  // take at most a quarter of each budget, the rest is for decisions).
  void check_and_pilot() {
    std::vector<CaseReport*> order;
    for (CaseReport& c : o.cases)
      if (c.s.state == StaticCase::State::changed && c.not_timable.empty() && !c.cost) order.push_back(&c);
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->value > b->value; });
    for (CaseReport* c : order) {
      const double budget = c->device == "cpu" ? o.cpu_budget_s : o.gpu_budget_s;
      const double pilot_left = budget / 4 - spent(*c);
      if (!(pilot_left > 0)) {
        c->choice = CaseReport::Choice::deferred;
        c->deferred_why = budget > 0 ? "no history, and the pilots' quarter of the budget is spent"
                                     : fmt::format("no history, and no {} budget", c->device);
        continue;
      }
      log.line(fmt::format("pilot {}", c->s.name));
      const double before = c->spent_s;
      const bool ready = lab.prepare(*c);
      if (ready) {
        c->cost = lab.pilot(*c, o.cfg, pilot_left - (c->spent_s - before));
        if (c->cost) ++o.measurements;
        if (!c->cost) {
          c->choice = CaseReport::Choice::deferred;
          c->deferred_why = "no history, and the pilot did not fit the budget";
        }
      }
      spent(*c) += c->spent_s - before;
    }
  }

  // Rounds of the knapsack over the changed cases not yet measured and the budget left: measurements that
  // decide sooner than predicted (a large regression, at the first look) leave budget for the next round.
  void choose_and_measure() {
    for (const std::string device : {"cpu", "gpu"}) {
      std::vector<CaseReport*> pending;
      for (CaseReport& c : o.cases)
        if (c.device == device && c.cost && (c.check.empty() || c.check == "ok")) {
          c.candidate.cost_s = c.cost->seconds;
          pending.push_back(&c);
        }
      for (int round = 1; !pending.empty(); ++round) {
        const double budget = std::max(0.0, (device == "cpu" ? o.cpu_budget_s : o.gpu_budget_s) -
                                                (device == "cpu" ? o.cpu_spent_s : o.gpu_spent_s));
        std::vector<Candidate> cands;
        for (const CaseReport* c : pending) cands.push_back(c->candidate);
        const std::vector<size_t> order = measuring_order(cands, budget);
        if (order.empty()) break;
        double value = 0, cost = 0;
        for (size_t i : order) {
          value += pending[i]->value;
          cost += pending[i]->cost->seconds;
        }
        log.line(fmt::format("{} round {}: {} of {} changed cases chosen (value {:.3g}, expected {:.1f} s of {:.1f} s)",
                             device, round, order.size(), pending.size(), value, cost, budget));
        std::vector<CaseReport*> next;
        std::vector<bool> chosen(pending.size(), false);
        for (size_t i : order) chosen[i] = true;
        for (size_t i = 0; i < pending.size(); ++i)
          if (!chosen[i]) next.push_back(pending[i]);
        for (size_t i : order) {
          pending[i]->choice = CaseReport::Choice::timed;
          pending[i]->round = round;
          measure_one(*pending[i]);
        }
        pending = std::move(next);
      }
      for (CaseReport* c : pending) {
        c->choice = CaseReport::Choice::deferred;
        c->deferred_why = "did not fit the budget";
      }
    }
  }

  void measure_one(CaseReport& c) {
    const double before = c.spent_s;
    if (!(left(c) > 0) || !lab.prepare(c)) {
      const bool measurable = c.check.empty() || c.check == "ok";
      c.choice = measurable ? CaseReport::Choice::deferred : CaseReport::Choice::none;  // else: check says why
      if (measurable) c.deferred_why = "the budget ran out while measuring";
      spent(c) += c.spent_s - before;
      return;
    }
    log.line(fmt::format("measuring {} (value {:.3g}, expected {:.1f} s)", c.s.name, c.value, c.cost->seconds));
    lab.measure(c, o.cfg, left(c) - (c.spent_s - before));
    o.measurements += 1 + int(c.confirm.has_value());
    spent(c) += c.spent_s - before;
    const auto& d = c.ab->decision;
    log.line(fmt::format("  {} {:+.2f}% [{:+.2f}%, {:+.2f}%]{}", stats::to_string(d.verdict), 100 * d.effect_pct(),
                         100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(),
                         c.confirm ? fmt::format(", confirmation: {}", stats::to_string(c.confirm->decision.verdict))
                                   : ""));
  }
};

}  // namespace

Outcome run_presubmit(const Options& opts) {
  Log& log = opts.log ? *opts.log : quiet_log();
  Outcome o;
  o.started = now_iso8601();
  const double t0 = now_s();
  o.cfg = load_presubmit_config(opts.config_file);
  make_dirs(opts.out_dir);
  o.pairs = pairs_of(opts, o.cfg, log);
  o.cpu_budget_s = o.cfg.cpu_budget_s.value_or(0);
  o.gpu_budget_s = o.cfg.gpu_budget_s.value_or(0);
  CompileCache cache;
  o.diff = compile_and_diff(o.cfg, o.pairs, cache, opts.jobs, log);
  for (StaticCase& sc : o.diff.cases) {
    CaseReport c;
    c.s = std::move(sc);
    const PlannedCase* pc = c.s.change ? c.s.change : c.s.base;
    c.device = pc->c.kernel->backend == "cpu" ? "cpu" : "gpu";
    if (c.s.state == StaticCase::State::changed) {
      const Availability av = backend_for(*pc->toolchain).available();
      if (!av.ok) c.not_timable = av.reason;
    }
    o.cases.push_back(std::move(c));
  }
  o.diff.cases.clear();
  log.line(fmt::format("compiled {} builds ({} new) in {:.1f} s: {} cases, {} unchanged, {} changed", o.diff.builds,
                       o.diff.compiled_afresh, o.diff.compile_wall_s, o.cases.size(),
                       o.count(StaticCase::State::unchanged), o.count(StaticCase::State::changed)));
  Session s{o, log, Lab(cache), std::nullopt};
  s.open_history();
  s.gather();
  s.check_and_pilot();
  s.choose_and_measure();
  o.finished = now_iso8601();
  o.wall_s = now_s() - t0;
  write_reports(o, opts.out_dir);
  return o;
}

}  // namespace kb::presubmit
