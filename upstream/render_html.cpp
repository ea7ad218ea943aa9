// The HTML form of an upstream report: the summary first (figures, both integration points, the plan
// by step, the top risks), then details: the ingestion plan, the emergency pick, the weekly history.
#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "report/html.h"
#include "report/svg.h"
#include "report/table.h"
#include "upstream/internal.h"

namespace kb::upstream {

using namespace detail;
using git::short_sha;

namespace {

// The history chart: days behind (left axis, solid) and backlog commits (right axis, dashed), one point
// per week.
std::string history_svg(const std::vector<HistoryRow>& rows) {
  report::svg::Plot p;
  p.aria_label = "days behind and backlog per week";
  p.y.label = "days behind";
  p.y2.label = "backlog commits";
  auto days = report::svg::series("days behind", "#1f5fa8");
  auto frontier = report::svg::series("days behind the frontier", "#4a9a3a");
  auto backlog = report::svg::series("backlog commits", "#b04a00");
  backlog.dashed = backlog.right_axis = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& h = rows[i];
    std::string when = format_time(h.as_of);
    days.points.push_back({double(i), h.metrics.days_behind});
    days.titles.push_back(fmt::format("{}: {:.2f} days behind", when, h.metrics.days_behind));
    frontier.points.push_back({double(i), h.metrics.days_behind_frontier});
    frontier.titles.push_back(fmt::format("{}: {:.2f} days behind the newest integrated commit", when,
                                          h.metrics.days_behind_frontier));
    backlog.points.push_back({double(i), double(h.metrics.backlog_commits)});
    backlog.titles.push_back(fmt::format("{}: backlog {}", when, h.metrics.backlog_commits));
    p.x_labels.push_back({double(i), when.substr(0, 10)});
  }
  p.series = {days, frontier, backlog};
  return report::svg::render(p);
}

// Figures, both integration points, the plan in one line per step and the top risks.
std::string html_summary(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o = "<h2>Summary</h2>\n";
  o += "<table><tr><th>days behind</th><th>days behind the frontier</th><th>backlog commits</th><th>pending commits</th>"
       "<th>integrated by cherry-pick</th><th>excluded</th></tr>\n";
  o += fmt::format("<tr><td class=\"num big\">{:.2f}</td><td class=\"num big\">{:.2f}</td><td class=\"num big\">{}</td>"
                   "<td class=\"num big\">{}</td><td class=\"num big\">{}</td><td class=\"num big\">{}</td></tr></table>\n",
                   m.days_behind, m.days_behind_frontier, m.backlog_commits, m.pending_commits, m.integrated_commits,
                   m.excluded_commits);
  o += fmt::format("<p>Integration point (contiguous: everything older integrated or excluded) <code>{}</code> {} ({}){}; "
                   "upstream head {}.</p>\n",
                   short_sha(m.integration_point.sha), html_escape(m.integration_point.subject),
                   format_time(m.integration_point.commit_time), m.integration_point_is_merge_base ? ", the merge base" : "",
                   format_time(m.upstream_head.commit_time));
  if (m.newest_integrated)
    o += fmt::format("<p>Frontier (newest integrated) <code>{}</code> {} ({}).</p>\n", short_sha(m.newest_integrated->sha),
                     html_escape(m.newest_integrated->subject), format_time(m.newest_integrated->commit_time));
  if (r.plan.empty()) return o + "<p>Nothing pending: the fork has every upstream commit.</p>\n";
  o += fmt::format("<p>Plan: {} step{}, bundles first, then each chain alone.</p>\n<ul>\n", r.plan.size(),
                   r.plan.size() == 1 ? "" : "s");
  for (const auto& l : plan_overview(r, kSummarySteps)) o += "<li>" + html_escape(l) + "</li>\n";
  o += "</ul>\n";
  auto risks = top_risks(r, kSummaryRisks);
  if (!risks.empty()) o += "<p>Top risks:</p>\n<ul>\n";
  for (const auto& l : risks) o += "<li>" + html_escape(l) + "</li>\n";
  if (!risks.empty()) o += "</ul>\n";
  return o;
}

// The ingestion plan, capped per step (complete in the JSON).
std::string html_plan(const Report& r) {
  std::string o = "<h3>Ingestion plan</h3>\n<p>Bundles first, then each chain alone, in this order.</p>\n";
  o += "<table><tr><th>step</th><th>kind</th><th>commit</th><th>date</th><th>subject</th><th>reasons</th></tr>\n";
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    size_t shown = std::min(st.commits.size(), kDetailRowsPerStep);
    size_t rows = shown + (shown < st.commits.size() ? 1 : 0);
    for (size_t n = 0; n < shown; ++n) {
      const auto& p = r.pending[st.commits[n]];
      o += fmt::format("<tr class=\"{}\">", st.kind == "bundle" ? "bundle" : (st.risky ? "risky" : ""));
      if (n == 0)
        o += fmt::format("<td rowspan=\"{}\">{}</td><td rowspan=\"{}\">{}{}</td>", rows, i + 1, rows, st.kind,
                         st.risky ? " (risky)" : "");
      o += fmt::format("<td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>\n", short_sha(p.commit.sha),
                       format_time(p.commit.commit_time).substr(0, 10), html_escape(p.commit.subject),
                       html_escape(report::truncate_text(join(commit_reasons(r, st.commits[n]), "; "), kReasonChars)));
    }
    if (shown < st.commits.size())
      o += fmt::format("<tr><td colspan=\"4\">... and {} more (complete in the JSON)</td></tr>\n",
                       st.commits.size() - shown);
  }
  return o + "</table>\n";
}

}  // namespace

std::string render_html(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o;
  o += report::page_begin("kbisect upstream: " + r.fork_ref + " vs " + r.upstream_ref,
                          ".risky{background:#fff1e6}.bundle{background:#eef7ee}.big{font-size:1.6em;font-weight:bold}");
  o += fmt::format("<h1>Upstream sync: <code>{}</code> vs <code>{}</code></h1>\n", html_escape(r.fork_ref),
                   html_escape(r.upstream_ref));
  o += html_summary(r);
  o += "<h2>Details</h2>\n";
  o += fmt::format("<p><small>repository {} · fork head <code>{}</code> · upstream head <code>{}</code> · merge base "
                   "<code>{}</code> ({}) · dependencies at {} level</small></p>\n",
                   html_escape(r.repo), short_sha(r.fork_head.sha), short_sha(m.upstream_head.sha),
                   short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time), html_escape(r.dependency_level));
  for (const auto& w : r.warnings) o += "<p><em>warning: " + html_escape(w) + "</em></p>\n";
  for (const auto& n : r.notes) o += "<p><em>note: " + html_escape(n) + "</em></p>\n";
  if (!r.plan.empty()) o += html_plan(r);
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("<h3>Emergency pick <code>{}</code></h3>\n<ol>\n", short_sha(e.target.sha));
    for (size_t k : e.closure)
      o += fmt::format("<li><code>{}</code> {}</li>\n", short_sha(r.pending[k].commit.sha),
                       html_escape(r.pending[k].commit.subject));
    o += "</ol><ul>\n";
    for (const auto& x : e.effect) o += "<li>" + html_escape(x) + "</li>\n";
    o += "</ul>\n";
  }
  if (!r.history.empty()) {
    o += "<h3>History</h3>\n" + history_svg(r.history);
    o += "<table><tr><th>as of</th><th>fork</th><th>upstream</th><th>days behind</th><th>backlog</th><th>pending</th></tr>\n";
    for (const auto& h : r.history)
      o += fmt::format("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{:.2f}</td>"
                       "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                       format_time(h.as_of), short_sha(h.fork_sha), short_sha(h.upstream_sha), h.metrics.days_behind,
                       h.metrics.backlog_commits, h.metrics.pending_commits);
    o += "</table>\n";
  }
  o += "<h2>Definitions</h2><ul>\n";
  for (const char* d : {kDefinitionDaysBehind, kDefinitionBacklog, kDefinitionPending, kDefinitionIntegrated})
    o += "<li>" + html_escape(d) + ".</li>\n";
  o += "</ul>" + report::page_end();
  return o;
}

}  // namespace kb::upstream
