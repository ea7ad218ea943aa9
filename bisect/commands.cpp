// bisect() and check_commit() (bisect/bisector.h): the bisection loop and the single-commit check over
// a real repository, with the provider and the real lab.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "bisect/bisector.h"
#include "bisect/lab.h"
#include "bisect/loop.h"
#include "bisect/priors.h"
#include "bisect/provider.h"
#include "bisect/report.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::bisect {

namespace fs = std::filesystem;
using json = nlohmann::json;
using git::short_sha;
using loop::amount;
using loop::seed_for;
using loop::set_amount;
using loop::sum_of;

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
  p.metric_column = cfg.metric_column;
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
  p.builders = cfg.builders;
  p.several = cfg.several_culprits;
  p.report_improvements = cfg.report_improvements;
  p.expensive = expensive_samples(cfg);
  p.confidence = cfg.measure.confidence;
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
                    short_sha(range.commits.front().sha), short_sha(range.commits.back().sha), metric_label(cfg.metric, cfg.metric_column),
                    cfg.threshold_absolute ? fmt::format("{:g}", cfg.threshold) : fmt::format("{:g}%", 100 * cfg.threshold)));
  Provider provider(cfg, repo, run.workdir);
  RealLab lab(cfg, provider, run.workdir);
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
      throw InputError(fmt::format("{} does not differ beyond the threshold between good and bad", metric_label(cfg.metric, cfg.metric_column)));
    Side s = static_side(pg.values, pb.values, pt.values, reg, cfg.threshold, cfg.threshold_absolute);
    return {s, fmt::format("{} = {:g} (good {:g}, bad {:g})", metric_label(cfg.metric, cfg.metric_column), sum_of(pt.values, reg),
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
  set_amount(st, m, plan.block_rounds);
  res.reason = fmt::format("vs the midpoint of good and bad: {:+.3f}% [{:+.3f}%, {:+.3f}%] {}: {}", 100 * d.effect_pct(),
                           100 * d.ci_lo_pct(), 100 * d.ci_hi_pct(), amount(st), side ? to_string(*side) : "unsure");
  return res;
}

}  // namespace kb::bisect
