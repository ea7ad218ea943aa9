#include "bisect/report.h"

#include "core/text.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "harness/compare.h"
#include "core/fsutil.h"
#include "git/git.h"
#include "report/html.h"
#include "report/svg.h"

namespace kb::bisect {

using json = nlohmann::json;
using git::short_sha;

namespace {

std::string iso_date(int64_t t) { return utc_time(t, "%Y-%m-%dT%H:%M:%SZ"); }

bool timed(const BisectConfig& cfg) { return is_timed(cfg.metric); }

// Human form of a level: percent vs good for timed metrics, the value for static ones.
std::string level_text(const BisectConfig& cfg, const Step& s) {
  if (!s.has_level) return "";
  if (timed(cfg))
    return fmt::format("{:+.2f}% [{:+.2f}%, {:+.2f}%]", 100 * std::expm1(s.level), 100 * std::expm1(s.level_lo),
                       100 * std::expm1(s.level_hi));
  return fmt::format("{:g}", s.level);
}

json step_json(const BisectConfig& cfg, const Step& s, const std::vector<git::CommitInfo>& commits) {
  json j = {{"phase", s.phase}, {"index", s.index}, {"sha", s.sha}, {"how", s.how}, {"evidence", s.reason}};
  if (s.index >= 0 && size_t(s.index) < commits.size()) j["subject"] = commits[size_t(s.index)].subject;
  if (s.base_index >= 0) j["base_sha"] = commits[size_t(s.base_index)].sha;
  if (s.side) j["side"] = to_string(*s.side);
  if (s.same_code_as >= 0) j["same_code_as"] = commits[size_t(s.same_code_as)].sha;
  if (s.measured) {
    j["rounds"] = s.rounds;
    j["samples"] = s.samples;
    if (s.block_rounds > 0) {
      j["blocks"] = s.units;  // the decision's n counts blocks (fresh loads each), not rounds
      j["block_rounds"] = s.block_rounds;
    }
    j["decision"] = decision_to_json(s.decision);
  }
  if (s.has_level) {
    if (timed(cfg)) {
      j["vs_good_pct"] = 100 * std::expm1(s.level);
      j["vs_good_ci95_pct"] = {100 * std::expm1(s.level_lo), 100 * std::expm1(s.level_hi)};
    } else {
      j["value"] = s.level;
    }
  }
  j["built"] = s.built;
  j["build_s"] = s.build_s;
  j["wall_s"] = s.wall_s;
  return j;
}

json commit_json(const git::CommitInfo& c) {
  return {{"sha", c.sha},
          {"subject", c.subject},
          {"author", c.author_name},
          {"email", c.author_email},
          {"date", iso_date(c.author_time)}};
}


}  // namespace

std::string final_line(const Outcome& o, const std::vector<git::CommitInfo>& commits) {
  if (o.verdict == "culprit" && o.culprit >= 0) {
    // Improvements first, then the other verified regressions by growing effect, the main culprit last.
    std::string out;
    for (const auto& c : o.culprits)
      if (c.improvement && c.verified)
        out += fmt::format("improvement: {} {}\n", commits[size_t(c.index)].sha, commits[size_t(c.index)].subject);
    std::vector<const Culprit*> regs;
    for (const auto& c : o.culprits)
      if (!c.improvement && c.verified && c.index != o.culprit) regs.push_back(&c);
    std::sort(regs.begin(), regs.end(), [](const Culprit* a, const Culprit* b) { return std::abs(a->effect) < std::abs(b->effect); });
    for (const Culprit* c : regs)
      out += fmt::format("culprit: {} {}\n", commits[size_t(c->index)].sha, commits[size_t(c->index)].subject);
    const auto& c = commits[size_t(o.culprit)];
    return out + fmt::format("culprit: {} {}", c.sha, c.subject);
  }
  return "verdict: " + o.verdict;
}

namespace {

// A measured verification's effect, CI, confidence and amount, into a culprit's JSON.
void measured_evidence(json& c, const Step& v) {
  c["effect_pct"] = 100 * v.decision.effect_pct();
  c["ci_pct"] = {100 * v.decision.ci_lo_pct(), 100 * v.decision.ci_hi_pct()};
  c["confidence"] = v.decision.conf;
  c["p_value"] = v.decision.p_value;
  c["rounds"] = v.rounds;
  if (v.block_rounds > 0) c["blocks"] = v.units;
}

json culprit_json(const BisectConfig& cfg, const Outcome& o, const Culprit& cu, const std::vector<git::CommitInfo>& commits) {
  json c = commit_json(commits[size_t(cu.index)]);
  c["parent"] = commits[size_t(cu.index - 1)].sha;
  c["kind"] = cu.improvement ? "improvement" : "regression";
  c["main"] = cu.index == o.culprit;
  c["verified"] = cu.verified;
  c["range"] = {commits[size_t(cu.seg_lo)].sha, commits[size_t(cu.seg_hi)].sha};
  const Step& v = cu.verify;
  c["evidence"] = v.reason;
  if (v.measured) {
    measured_evidence(c, v);
  } else if (!timed(cfg)) {
    c["parent_value"] = cu.parent_value;
    c["value"] = cu.value;
    c["change"] = cu.value - cu.parent_value;
    if (cu.parent_value != 0) c["effect_pct"] = 100 * (cu.value - cu.parent_value) / std::abs(cu.parent_value);
    c["confidence"] = 1.0;  // a static metric is exact
  }
  return c;
}

std::string culprit_text(const BisectConfig& cfg, const Culprit& cu) {
  const Step& v = cu.verify;
  if (v.measured)
    return fmt::format("{:+.2f}% [{:+.2f}%, {:+.2f}%] vs parent", 100 * v.decision.effect_pct(), 100 * v.decision.ci_lo_pct(),
                       100 * v.decision.ci_hi_pct());
  if (!timed(cfg)) return fmt::format("{:g} -> {:g}", cu.parent_value, cu.value);
  return "";
}

// With builds ahead: how many started, were cancelled and were used ahead of their round ("" without).
std::string builds_ahead_line(const Outcome& o) {
  if (o.builds_started == o.builds && o.builds_cancelled == 0) return "";
  return fmt::format("Builds: {} started, {} cancelled, {} built ahead and used; waited {:.1f} s for "
                     "builds, measured {:.1f} s (reproduce {:.1f} s, search {:.1f} s, verify {:.1f} s).\n\n",
                     o.builds_started, o.builds_cancelled, o.builds_ahead_used, o.build_wait_s, o.measure_s,
                     o.reproduce_s, o.search_s, o.verify_s);
}

// "1.50 h", or "2.3 s" below a tenth of an hour.
std::string duration(double hours) {
  return hours >= 0.1 ? fmt::format("{:.2f} h", hours) : fmt::format("{:.1f} s", hours * 3600);
}

// Expensive samples: what the runs cost. Hours per run as configured (measure.run_cost.hours) or measured
// (the mean wall time of the runs, queueing included); GPU-hours = runs x GPUs x hours per run.
struct RunCost {
  double hours_per_run = 0, gpu_hours = 0;
  bool measured = false;
};
RunCost run_cost(const BisectConfig& cfg, const Outcome& o) {
  RunCost c;
  c.measured = !(cfg.measure.run_hours > 0);
  c.hours_per_run = c.measured ? (o.runs > 0 ? o.run_s / o.runs / 3600 : 0) : cfg.measure.run_hours;
  c.gpu_hours = o.runs * cfg.measure.run_gpus * c.hours_per_run;
  return c;
}

// "Runs: 23 of the metric (at most 3 in flight, none cancelled) at 8 GPUs x 1.00 h each (given): 184.0 GPU-hours."
std::string runs_line(const BisectConfig& cfg, const Outcome& o) {
  if (!o.expensive) return "";
  const RunCost c = run_cost(cfg, o);
  std::string s = fmt::format("Runs: {} of the metric (at most {} in flight, {} cancelled) at {:g} GPU{} x {} each ({}): "
                              "{:.2f} GPU-hours",
                              o.runs, o.max_in_flight, o.runs_cancelled, cfg.measure.run_gpus,
                              cfg.measure.run_gpus == 1 ? "" : "s", duration(c.hours_per_run),
                              c.measured ? "measured" : "given", c.gpu_hours);
  if (o.posterior >= 0) s += fmt::format("; the culprit's posterior probability {:.4f}", o.posterior);
  return s + ".\n\n";
}

}  // namespace

std::string samples_label(const BisectConfig& cfg) {
  return cfg.metric == Metric::external ? "samples of the metric" : "timing samples";
}

std::string runs_summary(const BisectConfig& cfg, const Outcome& o) {
  if (!o.expensive) return "";
  const RunCost c = run_cost(cfg, o);
  return fmt::format("runs: {} (at most {} in flight, {} cancelled), {:.2f} GPU-hours ({:g} GPU{} x {} per run, {})",
                     o.runs, o.max_in_flight, o.runs_cancelled, c.gpu_hours, cfg.measure.run_gpus,
                     cfg.measure.run_gpus == 1 ? "" : "s", duration(c.hours_per_run), c.measured ? "measured" : "given");
}

json result_json(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits) {
  json j;
  j["verdict"] = o.verdict;
  j["summary"] = o.summary;
  j["config"] = {{"file", cfg.file},
                 {"name", cfg.name},
                 {"repo", cfg.repo},
                 {"good", cfg.good},
                 {"bad", cfg.bad},
                 {"first_parent", cfg.first_parent},
                 {"metric", metric_label(cfg.metric, cfg.metric_column)},
                 {"threshold", cfg.threshold},
                 {"threshold_absolute", cfg.threshold_absolute},
                 {"alpha", cfg.measure.alpha},
                 {"block_rounds", block_rounds_of(cfg)},
                 {"sample_cost", expensive_samples(cfg) ? "expensive" : "cheap"},
                 {"confidence", cfg.measure.confidence},
                 {"scheduler", cfg.scheduler},
                 {"builders", cfg.builders},
                 {"budgets",
                  {{"max_builds", cfg.budgets.max_builds},
                   {"max_samples_per_step", cfg.budgets.max_samples_per_step},
                   {"max_wall_s", cfg.budgets.max_wall_s},
                   {"max_runs", cfg.budgets.max_runs}}}};
  j["range"] = {{"good", commit_json(commits.front())},
                {"bad", commit_json(commits.back())},
                {"commits", commits.size() - 1}};
  if (o.culprit >= 0) {
    json c = commit_json(commits[size_t(o.culprit)]);
    c["parent"] = commits[size_t(o.culprit - 1)].sha;
    if (o.verify) {
      const Step& v = *o.verify;
      c["verified"] = o.verdict == "culprit";
      c["evidence"] = v.reason;
      if (v.measured) {
        measured_evidence(c, v);
      } else if (!o.probes.empty()) {
        c["value"] = v.level;
        c["confidence"] = 1.0;  // a static metric is exact
      }
    }
    j["culprit"] = c;
  }
  j["culprits"] = json::array();
  for (const auto& cu : o.culprits) j["culprits"].push_back(culprit_json(cfg, o, cu, commits));
  j["unresolved"] = json::array();
  for (const auto& u : o.unresolved) {
    json x = {{"from", commits[size_t(u.lo)].sha}, {"to", commits[size_t(u.hi)].sha}, {"why", u.why},
              {"kind", u.improvement ? "improvement" : "regression"}, {"candidates", json::array()}};
    for (int i : u.candidates) x["candidates"].push_back(commits[size_t(i)].sha);
    j["unresolved"].push_back(x);
  }
  if (!o.weights.empty()) {
    json w = json::array();
    for (size_t i = 1; i < o.weights.size(); ++i)
      if (o.weights[i] != 1.0) w.push_back({{"sha", commits[size_t(i)].sha}, {"weight", o.weights[i]}});
    j["prior_weights"] = w;  // commits whose prior weight is not 1
  }
  j["candidates"] = json::array();
  for (int i : o.candidates) {
    json c = commit_json(commits[size_t(i)]);
    for (const auto& s : o.steps)
      if (s.index == i) c["why_not_decided"] = s.how + ": " + s.reason;
    j["candidates"].push_back(c);
  }
  if (o.reproduce) j["reproduce"] = step_json(cfg, *o.reproduce, commits);
  if (o.verify) j["verify"] = step_json(cfg, *o.verify, commits);
  j["steps"] = json::array();
  for (const auto& s : o.steps) j["steps"].push_back(step_json(cfg, s, commits));
  j["spent"] = {{"builds", o.builds},
                {"builds_started", o.builds_started},
                {"builds_cancelled", o.builds_cancelled},
                {"builds_ahead_used", o.builds_ahead_used},
                {"wall_per_phase_s",
                 {{"reproduce", o.reproduce_s},
                  {"search", o.search_s},
                  {"verify", o.verify_s},
                  {"waiting_for_builds", o.build_wait_s},
                  {"measuring", o.measure_s}}},
                {"rounds", o.rounds},
                {"samples", o.samples},
                {"wall_s", o.wall_s},
                {"visited_steps", o.visited},
                {"measured_steps", o.measured_steps}};
  if (o.expensive) {
    const RunCost c = run_cost(cfg, o);
    j["spent"]["runs"] = o.runs;
    j["spent"]["runs_cancelled"] = o.runs_cancelled;
    j["spent"]["max_in_flight"] = o.max_in_flight;
    j["spent"]["run_s"] = o.run_s;
    j["spent"]["gpu_hours"] = c.gpu_hours;
    j["spent"]["run_cost"] = {{"gpus", cfg.measure.run_gpus}, {"hours", c.hours_per_run}, {"measured", c.measured}};
    if (o.posterior >= 0) j["spent"]["culprit_posterior"] = o.posterior;
  }
  return j;
}

std::string report_markdown(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits) {
  std::string md;
  md += fmt::format("# kbisect bisect: {}\n\n", md_escape(cfg.name));
  md += fmt::format("**Verdict: {}**", o.verdict);
  if (o.culprit >= 0) {
    const auto& c = commits[size_t(o.culprit)];
    md += fmt::format(" — `{}` {} ({}, {})", short_sha(c.sha), md_escape(c.subject), md_escape(c.author_name),
                      iso_date(c.author_time));
  }
  md += "\n\n" + md_escape(o.summary) + "\n\n";
  md += fmt::format("Range: {} commits, good `{}` .. bad `{}`; metric {}, threshold {}.\n\n", commits.size() - 1,
                    short_sha(commits.front().sha), short_sha(commits.back().sha), metric_label(cfg.metric, cfg.metric_column),
                    cfg.threshold_absolute ? fmt::format("{:g}", cfg.threshold) : fmt::format("{:g}%", 100 * cfg.threshold));
  md += fmt::format("Spent: {} builds, {} {}, {:.1f} s; {} steps visited, {} measured.\n\n", o.builds,
                    o.samples, samples_label(cfg), o.wall_s, o.visited, o.measured_steps);
  md += builds_ahead_line(o);
  md += runs_line(cfg, o);
  if (!o.culprits.empty()) {
    md += "## Culprits\n\n| commit | subject | kind | verified | effect |\n|---|---|---|---|---|\n";
    for (const auto& cu : o.culprits)
      md += fmt::format("| `{}` | {} | {}{} | {} | {} |\n", short_sha(commits[size_t(cu.index)].sha),
                        md_escape(commits[size_t(cu.index)].subject), cu.improvement ? "improvement" : "regression",
                        cu.index == o.culprit ? " (main)" : "", cu.verified ? "yes" : "no", culprit_text(cfg, cu));
    md += "\n";
  }
  if (!o.candidates.empty()) {
    md += "## Candidates\n\n";
    for (int i : o.candidates)
      md += fmt::format("- `{}` {}\n", short_sha(commits[size_t(i)].sha), md_escape(commits[size_t(i)].subject));
    md += "\n";
  }
  md += "## Steps\n\n| # | phase | commit | subject | side | how | metric vs good | evidence |\n";
  md += "|---|---|---|---|---|---|---|---|\n";
  int k = 0;
  auto row = [&](const Step& s) {
    md += fmt::format("| {} | {} | `{}` | {} | {} | {} | {} | {} |\n", k++, s.phase, short_sha(s.sha),
                      s.index >= 0 ? md_escape(commits[size_t(s.index)].subject) : "", s.side ? to_string(*s.side) : "",
                      s.how, level_text(cfg, s), md_escape(s.reason));
  };
  if (o.reproduce) row(*o.reproduce);
  for (const auto& s : o.steps) row(s);
  for (const auto& cu : o.culprits) row(cu.verify);
  if (o.culprits.empty() && o.verify) row(*o.verify);
  return md;
}

// The metric per commit through report/svg: x = commit index, y = effect vs good (CI bars), the culprit step.
std::string plot_svg(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits) {
  const int n = int(commits.size());
  const bool tm = timed(cfg);
  auto yval = [&](double lvl) { return tm ? 100 * std::expm1(lvl) : lvl; };
  auto tip = [&](int i, const std::string& what) {
    return fmt::format("{} {} {}: {}", i, short_sha(commits[size_t(i)].sha), commits[size_t(i)].subject, what);
  };
  report::svg::Plot p;
  p.width = 860, p.height = 320, p.aria_label = "bisect: " + cfg.name;
  p.x.label = fmt::format("commit index (0 = good, {} = bad)", n - 1);
  p.y = {tm ? metric_label(cfg.metric, cfg.metric_column) + " vs good (time, %)" : metric_label(cfg.metric, cfg.metric_column), tm, tm ? "%" : ""};
  auto measured = report::svg::series("", "#246");
  auto same = report::svg::series("", "#246");
  auto stat = report::svg::series("", "#284");
  measured.line = same.line = stat.line = false, same.hollow = true;
  measured.dot_radius = same.dot_radius = stat.dot_radius = 4;
  auto add = [](report::svg::Series& s, double x, double y, double lo, double hi, std::string title) {
    s.points.push_back({x, y}), s.bars.push_back({lo, hi}), s.titles.push_back(std::move(title));
  };
  const double good_y = o.good_level;
  std::optional<double> bad_y;
  if (o.reproduce && o.reproduce->has_level) {
    bad_y = yval(o.reproduce->level);
    add(measured, n - 1, *bad_y, yval(o.reproduce->level_lo), yval(o.reproduce->level_hi), tip(n - 1, "bad"));
  }
  add(measured, 0, good_y, good_y, good_y, tip(0, "good"));
  for (const auto& s : o.steps) {
    if (s.side == Side::skip) {
      p.markers.push_back(report::svg::vertical_marker(double(s.index), "#c60", short_sha(s.sha) + " skipped"));
    } else if (s.has_level) {
      add(tm ? measured : stat, s.index, yval(s.level), yval(tm ? s.level_lo : s.level), yval(tm ? s.level_hi : s.level),
          tip(s.index, s.how));
    } else if (s.how == "same-code") {
      const double y = s.side == Side::bad && bad_y ? *bad_y : good_y;
      add(same, s.index, y, y, y, tip(s.index, s.reason));
    }
  }
  // The step line through the verified level of every culprit, one marker per culprit.
  auto step = report::svg::series("", "#c33");
  step.dots = false;
  if (bad_y) {
    double y = good_y;
    step.points.push_back({0, y});
    for (const auto& cu : o.culprits.size() > 1 ? o.culprits : std::vector<Culprit>{}) {
      if (!cu.verify.has_level) continue;
      step.points.push_back({cu.index - 0.5, y});
      y = yval(cu.verify.level);
      step.points.push_back({cu.index - 0.5, y});
    }
    if (o.culprits.size() <= 1 && o.culprit >= 0)
      step.points.push_back({o.culprit - 0.5, y}), step.points.push_back({o.culprit - 0.5, y = *bad_y});
    step.points.push_back({double(n - 1), y});
  }
  auto mark = [&](int i, bool improvement) {
    const std::string what = improvement ? "improvement " : "culprit ";
    p.markers.push_back(report::svg::vertical_marker(i - 0.5, improvement ? "#282" : "#c33", tip(i, what),
                                                     what + short_sha(commits[size_t(i)].sha)));
  };
  if (bad_y && o.culprits.size() > 1)
    for (const auto& cu : o.culprits) mark(cu.index, cu.improvement);
  else if (bad_y && o.culprit >= 0)
    mark(o.culprit, false);
  if (step.points.size() > 2) p.series.push_back(step);
  for (auto* s : {&measured, &stat, &same})
    if (!s->points.empty()) p.series.push_back(*s);
  return report::svg::render(p);
}

std::string report_html(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits) {
  std::string h = report::page_begin("kbisect bisect: " + cfg.name);
  h += "<h1>kbisect bisect: " + html_escape(cfg.name) + "</h1>\n";
  h += "<p><b>Verdict: " + html_escape(o.verdict) + "</b>";
  if (o.culprit >= 0) {
    const auto& c = commits[size_t(o.culprit)];
    h += fmt::format(" — <code>{}</code> {} ({}, {})", html_escape(short_sha(c.sha)), html_escape(c.subject),
                     html_escape(c.author_name), iso_date(c.author_time));
  }
  h += "</p>\n<p>" + html_escape(o.summary) + "</p>\n";
  h += fmt::format("<p>Spent: {} builds, {} {}, {:.1f} s; {} steps visited, {} measured.</p>\n", o.builds,
                   o.samples, samples_label(cfg), o.wall_s, o.visited, o.measured_steps);
  if (const std::string b = builds_ahead_line(o); !b.empty()) h += "<p>" + html_escape(b) + "</p>\n";
  if (const std::string r = runs_line(cfg, o); !r.empty()) h += "<p>" + html_escape(r) + "</p>\n";
  if (!o.culprits.empty()) {
    h += "<table><tr><th>commit</th><th>subject</th><th>kind</th><th>verified</th><th>effect</th></tr>\n";
    for (const auto& cu : o.culprits)
      h += fmt::format("<tr><td><code>{}</code></td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>\n",
                       html_escape(short_sha(commits[size_t(cu.index)].sha)), html_escape(commits[size_t(cu.index)].subject),
                       cu.improvement ? "improvement" : "regression", cu.index == o.culprit ? " (main)" : "",
                       cu.verified ? "yes" : "no", html_escape(culprit_text(cfg, cu)));
    h += "</table>\n";
  }
  h += plot_svg(cfg, o, commits);
  h += "<p>Filled circles: measured (bars: 95% CI); hollow: identical code to a classified commit; "
       "crosses: skipped; red line: the step at the culprit.</p>\n";
  h += "<table><tr><th>phase</th><th>commit</th><th>subject</th><th>side</th><th>how</th><th>metric vs good</th><th>evidence</th></tr>\n";
  auto row = [&](const Step& s) {
    h += fmt::format("<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     s.phase, html_escape(short_sha(s.sha)), s.index >= 0 ? html_escape(commits[size_t(s.index)].subject) : "",
                     s.side ? to_string(*s.side) : "", html_escape(s.how), html_escape(level_text(cfg, s)), html_escape(s.reason));
  };
  if (o.reproduce) row(*o.reproduce);
  for (const auto& s : o.steps) row(s);
  for (const auto& cu : o.culprits) row(cu.verify);
  if (o.culprits.empty() && o.verify) row(*o.verify);
  h += "</table>\n" + report::page_end();
  return h;
}

ReportPaths write_reports(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits,
                          const std::string& dir) {
  make_dirs(dir);
  ReportPaths p{dir + "/result.json", dir + "/report.md", dir + "/report.html"};
  write_file_atomic(p.result_json, result_json(cfg, o, commits).dump(2) + "\n");
  write_file_atomic(p.report_md, report_markdown(cfg, o, commits));
  write_file_atomic(p.report_html, report_html(cfg, o, commits));
  return p;
}

}  // namespace kb::bisect
