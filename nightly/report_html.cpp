// The finish step's HTML report (RUN/report.html), with an inline SVG trend plot per alerted case.
#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "git/git.h"
#include "nightly/context.h"
#include "report/html.h"

namespace kb::nightly {

namespace {

const Markup kHtml{html_escape, "<code>", "</code>", "<b>", "</b>"};

// Inline SVG: the case's nightly medians with change points marked.
std::string trend_svg(const std::vector<SeriesPoint>& pts, const std::vector<ChangePoint>& cps, int64_t tonight) {
  const double W = 640, H = 220, L = 70, R = 20, T = 20, B = 40;
  std::vector<const SeriesPoint*> ok;
  for (const auto& p : pts)
    if (p.status == "ok" && p.median_s > 0) ok.push_back(&p);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">"
      "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>",
      W, H, W, H);
  if (ok.empty()) return svg + "<text x=\"10\" y=\"20\">no data</text></svg>";
  double lo = ok[0]->median_s, hi = lo;
  for (auto* p : ok) lo = std::min(lo, p->median_s), hi = std::max(hi, p->median_s);
  if (hi - lo < 1e-12 * hi) hi = lo * 1.01 + 1e-12, lo = lo * 0.99;
  const double pad = 0.08 * (hi - lo);
  lo -= pad, hi += pad;
  const size_t n = ok.size();
  auto x = [&](size_t i) { return n == 1 ? L + (W - L - R) / 2 : L + (W - L - R) * double(i) / double(n - 1); };
  auto y = [&](double v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); };
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>", L, H - B, W - R, H - B);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>", L, T, L, H - B);
  for (double v : {lo + pad, hi - pad})
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>", L - 4, y(v) + 4,
                       html_escape(format_seconds(v)));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", L, H - B + 16, html_escape(ok.front()->date));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>", W - R, H - B + 16,
                     html_escape(ok.back()->date));
  for (const auto& cp : cps) {
    size_t k = 0;
    while (k < n && ok[k]->run_id != cp.run_id) ++k;
    if (k == n || k == 0) continue;
    const double cx = (x(k - 1) + x(k)) / 2;
    const std::string color = cp.rel_change > 0 ? "#c0392b" : "#27ae60";
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"{}\" stroke-dasharray=\"4 3\"/>", cx, T,
                       cx, H - B, color);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" fill=\"{}\">change {} (p={:.3g})</text>", cx + 3, T + 10,
                       color, html_escape(pct(cp.rel_change, 1)), cp.p_value);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>",
                       x(0), y(cp.before), cx, y(cp.before), color);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>", cx,
                       y(cp.after), x(n - 1), y(cp.after), color);
  }
  std::string poly;
  for (size_t i = 0; i < n; ++i) poly += fmt::format("{:.1f},{:.1f} ", x(i), y(ok[i]->median_s));
  svg += "<polyline fill=\"none\" stroke=\"#2c3e50\" stroke-width=\"1.2\" points=\"" + poly + "\"/>";
  for (size_t i = 0; i < n; ++i) {
    const bool last = ok[i]->run_id == tonight;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} {}</title></circle>", x(i),
                       y(ok[i]->median_s), last ? 4 : 2.5, last ? "#c0392b" : "#2c3e50", html_escape(ok[i]->date),
                       html_escape(format_seconds(ok[i]->median_s)));
  }
  return svg + "</svg>";
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
