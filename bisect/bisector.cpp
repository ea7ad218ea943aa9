#include "bisect/bisector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "bisect/provider.h"
#include "bisect/report.h"
#include "harness/error.h"
#include "harness/fsutil.h"
#include "harness/hash.h"

namespace kb::bisect {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string short_sha(const std::string& s) { return s.substr(0, 12); }

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
  Rounds measure(const std::string& key, const std::vector<int>& idx, SequentialRule& rule, int max_rounds,
                 Step& step);
  void decision_event(const std::string& key, const Step& s);
  bool over_wall_budget() const {
    return plan_.budgets.max_wall_s > 0 && elapsed() > plan_.budgets.max_wall_s;
  }
  double elapsed() const { return now_s() - t0_ + (j_ ? j_->replayed_wall_s() : 0); }
  void finish_verify();

  const Plan& plan_;
  Lab& lab_;
  Journal* j_;
  Log log_;
  Outcome o_;
  double t0_ = now_s();
  std::vector<bool> regressed_;  // static metrics: cases where bad moved beyond the threshold
  double gap_ = 0;               // timed: measured good -> bad log-ratio
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

Rounds Loop::measure(const std::string& key, const std::vector<int>& idx, SequentialRule& rule, int max_rounds,
                     Step& step) {
  Rounds rounds;
  if (const json* ev = j_ ? j_->measurement(key) : nullptr) {
    rounds = ev->at("rounds").get<Rounds>();
    // Replays the decision over the journaled rounds: the measurement stopped where the rule decided.
    const size_t n = rounds.empty() ? 0 : rounds[0].size();
    for (size_t k = 1; k <= n; ++k) {
      Rounds prefix(rounds.size());
      for (size_t c = 0; c < rounds.size(); ++c) prefix[c].assign(rounds[c].begin(), rounds[c].begin() + long(k));
      if (rule(prefix)) break;
    }
    step.wall_s = ev->value("wall_s", 0.0);
    say(fmt::format("  (replayed from the journal: {} rounds)", n));
  } else {
    std::vector<std::string> shas;
    for (int i : idx) shas.push_back(plan_.shas[size_t(i)]);
    double budget_s = plan_.max_step_s;
    if (plan_.budgets.max_wall_s > 0) budget_s = std::max(1.0, std::min(budget_s, plan_.budgets.max_wall_s - elapsed()));
    const double t = now_s();
    rounds = lab_.measure(shas, max_rounds, budget_s, seed_for(plan_.seed, key), [&](const Rounds& r) { return rule(r); });
    step.wall_s = now_s() - t;
    const int64_t n = rounds.empty() ? 0 : int64_t(rounds[0].size());
    o_.samples += n * int64_t(shas.size());
    if (j_)
      j_->append({{"ev", "measure"}, {"key", key}, {"shas", shas}, {"rounds", rounds}, {"wall_s", step.wall_s}});
  }
  step.decision = rule.finish(rounds);
  step.measured = true;
  step.rounds = rounds.empty() ? 0 : int64_t(rounds[0].size());
  step.samples = step.rounds * int64_t(idx.size());
  return rounds;
}

void Loop::decision_event(const std::string& key, const Step& s) {
  if (!j_ || j_->has_decision(key)) return;
  json ev = {{"ev", "decision"}, {"key", key},  {"phase", s.phase}, {"index", s.index},
             {"sha", s.sha},     {"how", s.how}, {"reason", s.reason}};
  if (s.side) ev["side"] = to_string(*s.side);
  if (s.measured) {
    ev["rounds"] = s.rounds;
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
  const bool timed = is_timed(plan_.metric);
  if (j_) {
    if (const json* st = j_->start()) {
      if (st->at("shas").get<std::vector<std::string>>() != plan_.shas)
        throw InputError(fmt::format("journal {} is for a different commit range; use another --workdir", j_->path()));
      j_->append({{"ev", "resume"}, {"events", j_->events().size()}});
    } else {
      j_->append({{"ev", "start"}, {"shas", plan_.shas}, {"metric", to_string(plan_.metric)},
                  {"threshold", plan_.threshold}, {"threshold_absolute", plan_.threshold_absolute}});
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
    auto rule = threshold_rule(plan_.threshold, plan_.alpha, plan_.min_samples, plan_.budgets.max_samples_per_step);
    Rounds r = measure("reproduce", {0, n - 1}, rule, plan_.budgets.max_samples_per_step, rep);
    rep.how = "measured";
    set_level(rep, r[0], r[1]);
    const auto& d = rep.decision;
    reproduced = d.verdict == stats::Verdict::worse;
    gap_ = d.effect;
    rep.reason = fmt::format("bad vs good: {:+.3f}% [{:+.3f}%, {:+.3f}%] after {} rounds: {} (threshold {:.3g}%)",
                             100 * d.effect_pct(), 100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), rep.rounds,
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

  // ---- steps ----
  Strategy st(n, plan_.weights);
  std::map<std::string, int> by_hash;  // code hash key -> a classified commit with that code
  if (plan_.use_hashes) {
    by_hash[pg.hash_key()] = 0;
    by_hash[pb.hash_key()] = n - 1;
  }
  std::vector<std::optional<Side>> side_at(static_cast<size_t>(n));
  side_at[0] = Side::good;
  side_at[size_t(n - 1)] = Side::bad;
  while (auto next = st.next()) {
    const int m = *next;
    const std::string& sha = plan_.shas[size_t(m)];
    if (over_wall_budget() || (o_.builds >= plan_.budgets.max_builds && !(j_ && j_->probe(sha)))) {
      o_.verdict = "budget-exhausted";
      break;
    }
    Step s;
    s.phase = "step";
    s.index = m;
    s.sha = sha;
    say(fmt::format("step {}: commit {} ({} of {}), {} candidates left", o_.visited + 1, short_sha(sha), m, n - 1,
                    st.hi() - st.lo()));
    const Probe& p = probe(m);
    s.built = p.built;
    s.build_s = p.build_s;
    ++o_.visited;
    if (!p.ok) {
      s.side = Side::skip;
      s.how = "build-or-compile-failed";
      s.reason = p.reason;
    } else if (p.case_ids != pg.case_ids) {
      s.side = Side::skip;
      s.how = "different-cases";
      s.reason = "this toolchain gives a different case list";
    } else if (!timed) {
      s.side = static_side(pg.values, pb.values, p.values, regressed_, plan_.threshold, plan_.threshold_absolute);
      s.how = "static";
      s.has_level = true;
      s.level = s.level_lo = s.level_hi = sum_of(p.values, regressed_);
      s.reason = fmt::format("{} = {:g} (good {:g}, bad {:g})", to_string(plan_.metric), s.level,
                             sum_of(pg.values, regressed_), sum_of(pb.values, regressed_));
    } else if (auto it = by_hash.find(p.hash_key()); plan_.use_hashes && it != by_hash.end()) {
      s.side = side_at[size_t(it->second)];
      s.how = "same-code";
      s.same_code_as = it->second;
      s.reason = fmt::format("identical machine code to {} ({})", short_sha(plan_.shas[size_t(it->second)]),
                             to_string(*s.side));
    } else {
      auto rule = side_rule(plan_.alpha, plan_.min_samples, plan_.budgets.max_samples_per_step);
      Rounds r = measure("step:" + sha, {0, n - 1, m}, rule, plan_.budgets.max_samples_per_step, s);
      ++o_.measured_steps;
      set_level(s, r[0], r[2]);
      auto side = side_of(s.decision);
      s.side = side ? *side : Side::skip;
      s.how = side ? "measured" : "unsure";
      const auto& d = s.decision;
      s.reason = fmt::format("vs the midpoint of good and bad: {:+.3f}% [{:+.3f}%, {:+.3f}%] after {} rounds",
                             100 * d.effect_pct(), 100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), s.rounds);
    }
    if (plan_.use_hashes && (s.side == Side::good || s.side == Side::bad) && timed && p.ok)
      by_hash.emplace(p.hash_key(), m);
    side_at[size_t(m)] = s.side;
    st.record(m, *s.side);
    say(fmt::format("  -> {} ({}): {}", to_string(*s.side), s.how, s.reason));
    decision_event("step:" + sha, s);
    o_.steps.push_back(std::move(s));
  }

  if (o_.verdict.empty()) {
    if (st.found()) {
      o_.culprit = st.hi();
      finish_verify();
    } else {
      o_.verdict = "ambiguous";
    }
  }
  if (o_.verdict != "culprit" && o_.verdict != "unverified") {
    o_.candidates = st.candidates();
    o_.summary = fmt::format("{} candidate commits remain ({}); {}", o_.candidates.size(),
                             o_.verdict == "ambiguous" ? "the commits between them were skipped" : "the budget ran out",
                             "see the steps for why");
  }
  o_.wall_s = elapsed();
  return std::move(o_);
}

void Loop::finish_verify() {
  const int c = o_.culprit, parent = c - 1;
  Step v;
  v.phase = "verify";
  v.index = c;
  v.base_index = parent;
  v.sha = plan_.shas[size_t(c)];
  const Probe& pp = probe(parent);
  const Probe& pc = probe(c);
  bool confirmed = false;
  if (!is_timed(plan_.metric)) {
    v.how = "static";
    v.has_level = true;
    v.level = v.level_lo = v.level_hi = sum_of(pc.values, regressed_);
    confirmed = static_side(pp.values, o_.probes.back().values, pc.values, regressed_, plan_.threshold,
                            plan_.threshold_absolute) == Side::bad;
    v.reason = fmt::format("{}: parent {:g} -> culprit {:g}", to_string(plan_.metric), sum_of(pp.values, regressed_), v.level);
  } else {
    say("verifying: culprit against its parent with a fresh, larger sample");
    auto rule = threshold_rule(plan_.threshold, plan_.alpha, 2 * plan_.min_samples, 2 * plan_.budgets.max_samples_per_step);
    Rounds r = measure("verify:" + plan_.shas[size_t(parent)] + ":" + v.sha, {parent, c}, rule,
                       2 * plan_.budgets.max_samples_per_step, v);
    v.how = "measured";
    set_level(v, r[0], r[1]);
    const auto& d = v.decision;
    confirmed = d.verdict == stats::Verdict::worse;
    v.reason = fmt::format("culprit vs parent: {:+.3f}% [{:+.3f}%, {:+.3f}%] after {} rounds: {}", 100 * d.effect_pct(),
                           100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), v.rounds, stats::to_string(d.verdict));
  }
  say("verify: " + v.reason);
  decision_event("verify", v);
  o_.verify = v;
  o_.verdict = confirmed ? "culprit" : "unverified";
  o_.summary = confirmed ? "culprit confirmed: " + v.reason
                         : "the bisection points at this commit, but re-measuring it against its parent did not confirm it: " + v.reason;
}

}  // namespace

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
  p.threshold = cfg.threshold;
  p.threshold_absolute = cfg.threshold_absolute;
  p.budgets = cfg.budgets;
  p.min_samples = cfg.measure.min_samples;
  p.alpha = cfg.measure.alpha;
  p.max_step_s = cfg.measure.max_step_s;
  p.seed = cfg.measure.seed;
  return p;
}

}  // namespace

BisectRun bisect(const BisectConfig& cfg, const std::string& workdir_in, bool resume, const Log& log) {
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
  run.outcome = run_bisection(plan, lab, &journal, log);
  json verdict = {{"ev", "verdict"}, {"verdict", run.outcome.verdict}, {"summary", run.outcome.summary}};
  if (run.outcome.culprit >= 0) verdict["culprit"] = plan.shas[size_t(run.outcome.culprit)];
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
  auto rule = side_rule(cfg.measure.alpha, cfg.measure.min_samples, cfg.budgets.max_samples_per_step);
  Rounds r = lab.measure({good, bad, sha}, cfg.budgets.max_samples_per_step, cfg.measure.max_step_s,
                         seed_for(cfg.measure.seed, "check:" + sha), [&](const Rounds& x) { return rule(x); });
  auto d = rule.finish(r);
  auto side = side_of(d);
  res.side = side ? *side : Side::skip;
  res.reason = fmt::format("vs the midpoint of good and bad: {:+.3f}% [{:+.3f}%, {:+.3f}%] after {} rounds: {}",
                           100 * d.effect_pct(), 100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), r.empty() ? 0 : r[0].size(),
                           side ? to_string(*side) : "unsure");
  return res;
}

}  // namespace kb::bisect
