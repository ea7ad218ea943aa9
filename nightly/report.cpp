// The finish step's report: RUN/nightly.json and report.md (report.html: report_html.cpp).
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/fsutil.h"
#include "core/text.h"
#include "git/git.h"
#include "nightly/context.h"

namespace kb::nightly {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const Markup kMarkdown{md_escape, "", "", "**", "**"};

json report_json(const Context& cx) {
  const Plan& p = cx.plan;
  json j = {{"name", p.name}, {"date", p.date}, {"complete", cx.complete}, {"outcome", to_string(cx.outcome)},
            {"summary", cx.summary}, {"history", p.history}, {"run_id", cx.run_id}, {"notes", cx.notes},
            {"shard_problems", cx.shard_notes}};
  if (!cx.merge_error.empty()) j["merge_error"] = cx.merge_error;
  if (!p.compiler_sha.empty()) j["compiler"] = {{"sha", p.compiler_sha}, {"subject", p.compiler_subject}, {"toolchain", p.toolchain_name}};
  if (cx.prev) j["previous"] = {{"run_id", cx.prev->id}, {"date", cx.prev->date}};
  if (cx.cmp) j["compare"] = comparison_to_json(*cx.cmp);
  j["alerts"] = json::array();
  for (const auto& a : cx.alerts) j["alerts"].push_back(alert_json(a));
  j["bisections"] = json::array();
  for (const auto& b : cx.bisections)
    j["bisections"].push_back({{"dir", b.dir}, {"config", b.config}, {"good", b.good_sha}, {"bad", b.bad_sha},
                               {"good_date", b.good_date}, {"bad_date", b.bad_date}, {"cases", b.cases},
                               {"status", b.status}, {"note", b.note}, {"final_line", b.final_line},
                               {"descent_line", b.descent_line},
                               {"job_id", b.job_id}, {"result", b.result}});
  return j;
}

// Title, compiler, scheduler, incomplete shards, notes.
std::string md_head(const Context& cx) {
  const Plan& p = cx.plan;
  std::string md = fmt::format("# kbisect nightly: {} — {}\n\n**{}**\n\n", md_escape(p.name), md_escape(p.date), md_escape(cx.summary));
  if (!p.compiler_sha.empty())
    md += fmt::format("Compiler: `{}` {} ({} {})\n\n", git::short_sha(p.compiler_sha), md_escape(p.compiler_subject),
                      md_escape(p.toolchain_name), md_escape(p.compiler_ref));
  md += fmt::format("Scheduler: {}, {} shard(s); history: `{}`", p.scheduler, p.shards, md_escape(p.history));
  md += cx.prev ? fmt::format("; previous nightly: {}\n\n", md_escape(cx.prev->date)) : "; first nightly of this name\n\n";
  if (!cx.complete) {
    md += "## Incomplete nightly\n\n";
    for (const auto& s : cx.shard_notes) md += "- " + md_escape(s) + "\n";
    md += "\nMerge: " + md_escape(cx.merge_error) + "\n\n";
  }
  for (const auto& n : cx.notes) md += "> " + md_escape(n) + "\n\n";
  return md;
}

// Alerts (new, then known) and bisections.
std::string md_alerts(const Context& cx) {
  std::vector<const Alert*> fresh, known;
  for (const auto& a : cx.alerts) (a.known ? known : fresh).push_back(&a);
  std::string md = "## Alerts\n\n";
  if (fresh.empty()) md += "None.\n\n";
  for (const auto* a : fresh) md += "- " + md_escape(a->case_id) + ": " + md_escape(reasons_text(*a)) + "\n";
  if (!known.empty()) {
    md += "\nStill regressed (alerted before, same change point):\n\n";
    for (const auto* a : known) md += "- " + md_escape(a->case_id) + ": " + md_escape(reasons_text(*a)) + "\n";
  }
  md += "\n";
  if (!cx.bisections.empty()) {
    md += "## Bisections\n\n";
    for (const auto& b : cx.bisections) {
      md += "- " + bisection_line(b, kMarkdown);
      if (!b.report_md.empty()) md += fmt::format(" ([report]({}))", relpath(b.report_md, cx.plan.run_dir));
      md += "\n";
    }
    md += "\n";
  }
  return md;
}

// The verdicts vs the previous nightly, or tonight's medians for a first nightly; the change points of the
// alerted cases.
std::string md_tables(const Context& cx) {
  std::string md;
  if (cx.cmp) {
    md += fmt::format("## Verdicts vs {} (threshold {}, alpha {})\n\n", md_escape(cx.prev->date), md_escape(cx.cfg.threshold_text),
                      cx.cfg.alpha);
    md += "| case | last | tonight | effect | 95% CI | verdict |\n|---|---:|---:|---:|---|---|\n";
    for (const auto& cc : cx.cmp->cases) {
      if (cc.compared)
        md += fmt::format("| {} | {} | {} |\n", md_escape(cc.key), fmt::join(verdict_numbers(cc), " | "), verdict_cell(cc));
      else
        md += fmt::format("| {} | | | | | {} |\n", md_escape(cc.key), md_escape(verdict_cell(cc)));
    }
    md += "\n";
  } else if (cx.merged) {
    md += "## Tonight\n\n| case | median | samples | status |\n|---|---:|---:|---|\n";
    for (const auto& c : cx.merged->cases)
      md += fmt::format("| {} | {} | {} | {} |\n", md_escape(c.id()), c.status == CaseStatus::ok ? format_seconds(c.summary.median_s) : "",
                        c.summary.samples, md_escape(to_string(c.status) + (c.reason.empty() ? "" : ": " + c.reason)));
    md += "\n";
  }
  if (!cx.alerts.empty()) {
    md += "## Trends\n\nSee report.html for the plots. Change points (last " + std::to_string(cx.window.size()) + " nightlies):\n\n";
    for (const auto& a : cx.alerts) {
      md += "- " + md_escape(a.case_id) + ":";
      const auto it = cx.cps.find(a.case_id);
      if (it == cx.cps.end() || it->second.empty()) md += " none";
      else
        for (const auto& c : it->second) md += fmt::format(" {} {} (p={:.3g});", md_escape(c.date), pct(c.rel_change, 1), c.p_value);
      md += "\n";
    }
  }
  return md;
}

}  // namespace

std::string relpath(const std::string& path, const std::string& base) {
  return fs::path(path).lexically_relative(base).string();
}

std::string pct(double frac, int prec) { return fmt::format("{:+.{}f}%", 100 * frac, prec); }

std::string reasons_text(const Alert& a) { return fmt::format("{}", fmt::join(a.reasons, "; ")); }

std::string bisection_line(const BisectRecord& b, const Markup& m) {
  std::string s = fmt::format("{2}{0}{3}..{2}{1}{3} ", m.escape(git::short_sha(b.good_sha)), m.escape(git::short_sha(b.bad_sha)),
                              m.code_open, m.code_close);
  s += fmt::format("({} → {}), {} case(s): {}{}{}", m.escape(b.good_date), m.escape(b.bad_date), b.cases.size(), m.bold_open,
                   m.escape(b.status), m.bold_close);
  if (!b.final_line.empty()) s += " — " + m.escape(b.final_line);
  if (!b.descent_line.empty()) s += " — " + m.escape(b.descent_line);
  if (!b.note.empty()) s += " — " + m.escape(b.note);
  return s;
}

std::vector<std::string> verdict_numbers(const CaseComparison& cc) {
  return {format_seconds(cc.base_median_s), format_seconds(cc.new_median_s), fmt::format("{:+.2f}%", 100 * cc.decision.effect_pct()),
          fmt::format("[{:+.2f}%, {:+.2f}%]", 100 * cc.decision.ci_lo_pct(), 100 * cc.decision.ci_hi_pct())};
}

std::string verdict_cell(const CaseComparison& cc) {
  if (!cc.compared) return "not compared: " + cc.reason;
  return stats::to_string(cc.decision.verdict);
}

void render(const Context& cx, FinishResult& fr) {
  const Plan& p = cx.plan;
  fr.report_md = p.run_dir + "/report.md";
  fr.report_html = p.run_dir + "/report.html";
  fr.nightly_json = p.run_dir + "/nightly.json";
  write_file_atomic(fr.report_md, md_head(cx) + md_alerts(cx) + md_tables(cx));
  write_file_atomic(fr.report_html, render_html(cx));
  write_file_atomic(fr.nightly_json, report_json(cx).dump(2) + "\n");
}

}  // namespace kb::nightly
