// The finish step's HTML report (RUN/report.html), with an inline SVG trend plot per alerted case.
#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "git/git.h"
#include "nightly/context.h"
#include "report/html.h"
#include "report/svg.h"

namespace kb::nightly {

namespace {

const Markup kHtml{html_escape, "<code>", "</code>", "<b>", "</b>"};

// Inline SVG through report/svg: the case's nightly medians (tooltip: date, median), change points as dashed
// markers "change +x% (p=...)" with the segment levels before and after, tonight's point in red.
std::string trend_svg(const std::vector<SeriesPoint>& pts, const std::vector<ChangePoint>& cps, int64_t tonight) {
  std::vector<const SeriesPoint*> ok;
  for (const auto& p : pts)
    if (p.status == "ok" && p.median_s > 0) ok.push_back(&p);
  if (ok.empty())
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"220\" role=\"img\">"
           "<text x=\"10\" y=\"20\">no data</text></svg>";
  double hi = 0;
  for (auto* p : ok) hi = std::max(hi, p->median_s);
  const auto [unit, scale] = hi < 1e-3 ? std::pair{"us", 1e6} : hi < 1 ? std::pair{"ms", 1e3} : std::pair{"s", 1.0};
  report::svg::Plot plot;
  plot.width = 640, plot.height = 220, plot.aria_label = "nightly trend";
  plot.y = {std::string("median (") + unit + ")", false, "", false};
  plot.x.label = "night";
  auto medians = report::svg::series("median", "#2c3e50");
  auto last = report::svg::series("", "#c0392b");
  last.line = false, last.dot_radius = 4;
  const size_t n = ok.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string title = ok[i]->date + " " + format_seconds(ok[i]->median_s);
    medians.points.push_back({double(i), ok[i]->median_s * scale}), medians.titles.push_back(title);
    if (ok[i]->run_id == tonight) last.points.push_back(medians.points.back()), last.titles.push_back(title);
    plot.x_labels.push_back({double(i), ok[i]->date});
  }
  plot.series.push_back(medians);
  for (const auto& cp : cps) {
    size_t k = 0;
    while (k < n && ok[k]->run_id != cp.run_id) ++k;
    if (k == n || k == 0) continue;
    const double cx = double(k) - 0.5;
    const std::string color = cp.rel_change > 0 ? "#c0392b" : "#27ae60";
    const std::string text = fmt::format("change {} (p={:.3g})", pct(cp.rel_change, 1), cp.p_value);
    plot.markers.push_back(report::svg::vertical_marker(cx, color, text, text));
    auto before = report::svg::series("", color);
    auto after = report::svg::series("", color);
    before.dots = after.dots = false;
    before.points = {{0, cp.before * scale}, {cx, cp.before * scale}};
    after.points = {{cx, cp.after * scale}, {double(n - 1), cp.after * scale}};
    plot.series.push_back(before), plot.series.push_back(after);
  }
  if (!last.points.empty()) plot.series.push_back(last);
  return report::svg::render(plot);
}

// Title, compiler, scheduler, incomplete shards, notes.
std::string html_head(const Context& cx) {
  const Plan& p = cx.plan;
  std::string h = "<h1>kbisect nightly: " + html_escape(p.name) + " — " + html_escape(p.date) + "</h1>";
  h += "<p><b>" + html_escape(cx.summary) + "</b></p>";
  if (!p.compiler_sha.empty())
    h += "<p>Compiler: <code>" + html_escape(git::short_sha(p.compiler_sha)) + "</code> " + html_escape(p.compiler_subject) + " (" +
         html_escape(p.toolchain_name) + ")</p>";
  h += fmt::format("<p>Scheduler: {}, {} shard(s). {}</p>", html_escape(p.scheduler), p.shards,
                   cx.prev ? "Previous nightly: " + html_escape(cx.prev->date) : std::string("First nightly of this name."));
  if (!cx.complete) {
    h += "<h2 class=\"alert\">Incomplete nightly</h2><ul>";
    for (const auto& s : cx.shard_notes) h += "<li>" + html_escape(s) + "</li>";
    h += "</ul><pre>" + html_escape(cx.merge_error) + "</pre>";
  }
  for (const auto& n : cx.notes) h += "<p><i>" + html_escape(n) + "</i></p>";
  return h;
}

// Alerts (new, then known) and bisections.
std::string html_alerts(const Context& cx) {
  std::vector<const Alert*> fresh, known;
  for (const auto& a : cx.alerts) (a.known ? known : fresh).push_back(&a);
  std::string h = "<h2>Alerts</h2>";
  if (fresh.empty()) h += "<p>None.</p>";
  else {
    h += "<ul>";
    for (const auto* a : fresh)
      h += "<li class=\"alert\"><code>" + html_escape(a->case_id) + "</code>: " + html_escape(reasons_text(*a)) + "</li>";
    h += "</ul>";
  }
  if (!known.empty()) {
    h += "<p>Still regressed (alerted before, same change point):</p><ul>";
    for (const auto* a : known) h += "<li><code>" + html_escape(a->case_id) + "</code>: " + html_escape(reasons_text(*a)) + "</li>";
    h += "</ul>";
  }
  if (!cx.bisections.empty()) {
    h += "<h2>Bisections</h2><ul>";
    for (const auto& b : cx.bisections) {
      h += "<li>" + bisection_line(b, kHtml);
      if (!b.report_html.empty()) h += " (<a href=\"" + html_escape(relpath(b.report_html, cx.plan.run_dir)) + "\">report</a>)";
      h += "</li>";
    }
    h += "</ul>";
  }
  return h;
}

// The trend plots of the alerted cases and the verdicts vs the previous nightly.
std::string html_tables(const Context& cx) {
  std::string h;
  if (!cx.alerts.empty()) {
    h += "<h2>Trends of alerted cases</h2>";
    for (const auto& a : cx.alerts) {
      h += "<h3><code>" + html_escape(a.case_id) + "</code></h3>";
      const auto s = cx.series.find(a.case_id);
      const auto c = cx.cps.find(a.case_id);
      h += trend_svg(s == cx.series.end() ? std::vector<SeriesPoint>{} : s->second,
                     c == cx.cps.end() ? std::vector<ChangePoint>{} : c->second, cx.run_id);
    }
  }
  if (cx.cmp) {
    h += "<h2>Verdicts vs " + html_escape(cx.prev->date) + "</h2><table><tr><th>case</th><th>last</th><th>tonight</th><th>effect</th>"
         "<th>95% CI</th><th>verdict</th></tr>";
    for (const auto& cc : cx.cmp->cases) {
      if (cc.compared) {
        const auto v = verdict_numbers(cc);
        h += fmt::format("<tr class=\"{}\"><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                         "<td>{}</td><td>{}</td></tr>",
                         stats::to_string(cc.decision.verdict), html_escape(cc.key), html_escape(v[0]), html_escape(v[1]),
                         html_escape(v[2]), html_escape(v[3]), html_escape(verdict_cell(cc)));
      } else {
        h += "<tr><td><code>" + html_escape(cc.key) + "</code></td><td></td><td></td><td></td><td></td><td>" + html_escape(verdict_cell(cc)) + "</td></tr>";
      }
    }
    h += "</table>";
  }
  return h;
}

}  // namespace

std::string render_html(const Context& cx) {
  const Plan& p = cx.plan;
  std::string h = report::page_begin("kbisect nightly " + p.name + " " + p.date,
                                     ".worse{background:#fdecea}.better{background:#eafaf1}.unsure{background:#fef9e7}"
                                     ".alert{color:#c0392b}");
  h += html_head(cx) + html_alerts(cx) + html_tables(cx);
  return h + report::page_end();
}

}  // namespace kb::nightly
