// The bisection loop when one sample is expensive (plan_.expensive; docs/bisect.md, "L3"): the unit is one
// run of the metric at one commit. Every run ever made counts: a range's runs are pooled under each possible
// position of its step (stats/step_posterior.h), the next run goes where it splits that posterior best
// (bisect/locate.h), with up to plan_.workers runs in flight, and a position is taken when it holds
// plan_.confidence; its check against its parent uses the runs already made and asks for more only when they
// cannot decide. Each run is journaled as it ends; a resumed session pools the journaled runs.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bisect/loop.h"
#include "core/error.h"
#include "core/text.h"

namespace kb::bisect::loop {

using json = nlohmann::json;
using git::short_sha;

void Loop::l3_replay() {
  const int n = int(plan_.shas.size());
  runs_at_.assign(size_t(n), 0);
  flying_at_.assign(size_t(n), 0);
  if (!j_) return;
  for (const json& ev : j_->events()) {
    if (ev.value("ev", "") != "run") continue;
    const int i = ev.at("index").get<int>();
    if (i < 0 || i >= n || ev.at("sha").get<std::string>() != plan_.shas[size_t(i)])
      throw InputError(fmt::format("journal {}: a run event names a commit outside this range", j_->path()));
    runs_.push_back({i, std::log(ev.at("value").get<double>())});
    ++runs_at_[size_t(i)];
    run_wall_sum_ += ev.value("wall_s", 0.0);
  }
  o_.runs = int(runs_.size());
  o_.run_s = run_wall_sum_;
  if (!runs_.empty()) say(fmt::format("  (replayed from the journal: {} runs)", runs_.size()));
}

int Loop::l3_fill(const std::function<std::optional<int>()>& pick) {
  int started = 0;
  while (int(flying_.size()) < std::max(1, plan_.workers) && !l3_out_of_runs()) {
    const std::optional<int> c = pick();
    if (!c) break;
    const int i = *c;
    if (!o_.probed[size_t(i)]) {
      const bool free = j_ && j_->probe(plan_.shas[size_t(i)]);
      if (!free && o_.builds >= plan_.budgets.max_builds) {
        budget_out_ = true;
        break;
      }
    }
    const Probe& p = probe(i);
    if (!p.ok || p.case_ids != o_.probes[0].case_ids) {
      skipped_[size_t(i)] = true;  // never run; the posterior keeps it as a candidate
      Step s = step_at(i);
      s.side = Side::skip;
      s.how = p.ok ? "different-cases" : "build-or-compile-failed";
      s.reason = p.ok ? "this toolchain gives a different case list" : p.reason;
      ++o_.visited;
      say(fmt::format("  {} -> skip ({}): {}", short_sha(s.sha), s.how, tail(s.reason, 300)));
      decision_event("step:" + s.sha, s);
      o_.steps.push_back(s);
      continue;
    }
    const int ticket = lab_.start_run(plan_.shas[size_t(i)], runs_at_[size_t(i)] + flying_at_[size_t(i)]);
    flying_[ticket] = i;
    ++flying_at_[size_t(i)];
    ++started;
    o_.max_in_flight = std::max(o_.max_in_flight, int(flying_.size()));
  }
  return started;
}

void Loop::l3_wait() {
  const double t = now_s();
  const RunDone d = lab_.wait_run();
  o_.measure_s += now_s() - t;
  const auto it = flying_.find(d.ticket);
  if (it == flying_.end()) throw Error(fmt::format("internal: run ticket {} was not started", d.ticket));
  const int i = it->second;
  flying_.erase(it);
  --flying_at_[size_t(i)];
  if (d.cancelled) {
    ++o_.runs_cancelled;
    if (j_) j_->append({{"ev", "run_cancelled"}, {"sha", plan_.shas[size_t(i)]}, {"index", i}, {"job", d.job}});
    return;
  }
  if (!(d.value > 0) || !std::isfinite(d.value))
    throw Error(fmt::format("a run at {} gave {}: the metric must be positive", short_sha(plan_.shas[size_t(i)]), d.value));
  json ev = {{"ev", "run"}, {"sha", plan_.shas[size_t(i)]}, {"index", i}, {"ordinal", runs_at_[size_t(i)]},
             {"value", d.value}, {"wall_s", d.wall_s}};
  if (!d.job.empty()) ev["job"] = d.job;
  if (j_) j_->append(ev);  // fsync'd: a run that ended is never run again
  runs_.push_back({i, std::log(d.value)});
  ++runs_at_[size_t(i)];
  run_wall_sum_ += d.wall_s;
  o_.runs = int(runs_.size());
  o_.run_s = run_wall_sum_;
  o_.samples = int64_t(runs_.size());
}

std::vector<stats::Run> Loop::l3_runs_in(int a, int b) const {
  std::vector<stats::Run> out;
  for (const stats::Run& r : runs_)
    if (r.commit >= a && r.commit <= b) out.push_back({r.commit - a, r.y});
  return out;
}

double Loop::l3_mean(int i) const {
  double s = 0;
  int k = 0;
  for (const stats::Run& r : runs_)
    if (r.commit == i) s += r.y, ++k;
  return k ? s / k : 0;
}

stats::Decision Loop::l3_contrast(int i, int j, double sigma, int dof, double conf) const {
  return stats::decide_means(l3_mean(i), runs_at_[size_t(i)], l3_mean(j), runs_at_[size_t(j)], sigma, dof,
                             plan_.threshold, conf);
}

double Loop::l3_build_cost() const {
  if (plan_.build_cost >= 0) return plan_.build_cost;
  // Measured: the mean build against the mean run (both in seconds), when both have been seen.
  double build = 0;
  int k = 0;
  for (size_t i = 0; i < o_.probes.size(); ++i)
    if (o_.probed[i] && o_.probes[i].built) build += o_.probes[i].build_s, ++k;
  if (k == 0 || runs_.empty() || run_wall_sum_ <= 0) return 0;
  return std::min(10.0, (build / k) / (run_wall_sum_ / double(runs_.size())));
}

// Two commits' runs against each other (each its own mean, the noise pooled within every commit that ran
// twice, which needs no assumption about levels): the threshold rule of every timed decision (stats::classify)
// on a Student-t interval at 1 - alpha, looked at after every run once each has three (a noise estimate from
// two runs each can be small by chance, and an early look on it decides wrongly: the simulation saw both
// "same" and "better" for a real step). "Same" and "better" need the same verdict at alpha / 10 as well: they
// end the bisection for good. Runs at the one with fewer until decided or the budget is out (then unsure).
stats::Decision Loop::l3_ends(int a, int b) {
  stats::Decision d;
  for (;;) {
    if (runs_at_[size_t(a)] >= 3 && runs_at_[size_t(b)] >= 3) {
      const stats::Pooled noise = stats::within_commit_noise(runs_);
      d = l3_contrast(a, b, noise.sigma, noise.dof, 1 - plan_.alpha);
      if ((d.verdict == stats::Verdict::same || d.verdict == stats::Verdict::better) &&
          l3_contrast(a, b, noise.sigma, noise.dof, 1 - plan_.alpha / 10).verdict != d.verdict)
        d.verdict = stats::Verdict::unsure;
      if (d.verdict != stats::Verdict::unsure) return d;
    }
    if (!l3_out_of_runs())
      l3_fill([&]() -> std::optional<int> {
        return runs_at_[size_t(a)] + flying_at_[size_t(a)] <= runs_at_[size_t(b)] + flying_at_[size_t(b)] ? a : b;
      });
    if (flying_.empty()) return d;
    l3_wait();
  }
}

// Also sets up the L3 state (the journal's runs replayed), so it comes first in an expensive bisection.
bool Loop::l3_reproduce(Step& rep) {
  const int n = int(plan_.shas.size());
  o_.expensive = true;
  skipped_.assign(size_t(n), false);
  l3_replay();
  rep.phase = "reproduce";
  rep.index = n - 1;
  rep.base_index = 0;
  rep.sha = plan_.shas.back();
  rep.how = "runs";
  say("reproducing: runs at good and bad");
  rep.decision = l3_ends(0, n - 1);
  const stats::Decision& d = rep.decision;
  rep.measured = true;
  rep.rounds = rep.samples = runs_at_[0] + runs_at_[size_t(n - 1)];
  rep.has_level = true;
  rep.level = d.effect;
  rep.level_lo = d.ci.lo;
  rep.level_hi = d.ci.hi;
  gap_ = d.effect;
  rep.reason = fmt::format("bad vs good: {} [{}, {}] from {} + {} runs: {} (threshold {:.3g}%)", pct(d.effect),
                           pct(d.ci.lo), pct(d.ci.hi), runs_at_[0], runs_at_[size_t(n - 1)],
                           stats::to_string(d.verdict), 100 * plan_.threshold);
  return d.verdict == stats::Verdict::worse;
}

// After l3_reproduce showed the regression (bisector.cpp): the search, then the outcome.
Outcome Loop::l3_run() {
  const int n = int(plan_.shas.size());
  const Step rep = *o_.reproduce;
  levels_ = {{0, 0, 0}, {rep.level, rep.level_lo, rep.level_hi}};
  std::deque<Seg> work = {Seg{0, n - 1, 0, 1, false}};
  work_ = &work;
  while (!work.empty() && !budget_out_) {
    Seg g = work.front();
    work.pop_front();
    l3_search(g, work);
  }
  for (const Seg& g : work) o_.unresolved.push_back({g.a, g.b, g.improvement, "budget-exhausted", range_candidates(g)});
  lab_.cancel_runs();  // runs still in flight answer nothing any more: Slurm jobs are cancelled
  while (!flying_.empty()) l3_wait();
  end_builds();
  finish_outcome();
  if (o_.verdict == "not-reproduced")
    o_.summary = "the runs pooled over the range put good and bad within the threshold of each other (the "
                 "reproduction's runs alone did not): " + rep.reason;
  o_.search_s = std::max(0.0, now_s() - t0_ - o_.reproduce_s - o_.verify_s);
  if (plan_.builders <= 1) o_.builds_started = o_.builds;
  for (const Culprit& c : o_.culprits)
    if (c.index == o_.culprit) o_.posterior = c.posterior;
  o_.visited = o_.measured_steps = 0;
  for (int i = 1; i + 1 < n; ++i) {
    o_.visited += o_.probed[size_t(i)];
    o_.measured_steps += runs_at_[size_t(i)] > 0;
  }
  o_.wall_s = elapsed();
  return std::move(o_);
}

}  // namespace kb::bisect::loop
