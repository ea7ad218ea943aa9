#include "tune/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "report/html.h"
#include "report/svg.h"
#include "report/table.h"

namespace kb::tune {

namespace {

std::string measured(const Candidate& c) {
  if (c.race.samples_s.empty()) return "";
  return fmt::format("{:.3f} ms [{:.3f}, {:.3f}] n={}", 1e3 * c.race.median_s, 1e3 * c.race.ci.lo, 1e3 * c.race.ci.hi,
                     c.race.samples_s.size());
}

std::string headline(const TuneRun& run, const ShapeTune& st) {
  std::string h = fmt::format("{}/{} {} {} on {} ({})\n", run.backend, run.kernel, to_string(run.dtype), st.shape.str(),
                              run.toolchain, run.machine);
  if (st.static_only) h += "  " + st.static_only_reason + "\n";
  else
    h += fmt::format("  race: {} rounds, {} samples, {} of {} looks, {:.1f} s measuring (+{:.1f} s calibrating), "
                     "stopped: {}; {} new compiles\n",
                     st.race.rounds, st.race.samples, st.race.looks_taken, st.race.looks, st.race.measured_s,
                     st.calibrate_s, st.race.stop, st.compiles);
  if (!st.build_check.empty()) h += "  build: " + st.build_check + "\n";
  if (st.winner) h += fmt::format("  winner  [{}]\n  default [{}]\n", st.candidates[*st.winner].params.str(), st.default_params.str());
  if (st.confirm)
    h += fmt::format("  gain over default: {:+.2f}% [{:+.2f}%, {:+.2f}%] ({}, {:.1f} s A/B with fresh loads)\n",
                     st.gain_pct(), st.gain_ci_pct().lo, st.gain_ci_pct().hi, stats::to_string(st.confirm->verdict),
                     st.confirm_s);
  return h;
}

// Measured candidates first (fastest first), then the rest in their order.
std::vector<const Candidate*> display_order(const ShapeTune& st) {
  std::vector<const Candidate*> out;
  for (const auto& c : st.candidates) out.push_back(&c);
  std::stable_sort(out.begin(), out.end(), [](const Candidate* a, const Candidate* b) {
    const bool ma = !a->race.samples_s.empty(), mb = !b->race.samples_s.empty();
    if (ma != mb) return ma;
    return ma && a->race.median_s < b->race.median_s;
  });
  return out;
}

std::string plot_param(const ShapeTune& st, const std::string& param) {
  report::svg::Plot p;
  p.aria_label = "time against " + param;
  p.x.label = param;
  p.x.include_zero = false;
  p.y.label = "median time (ms)";
  auto s = report::svg::series("measured", "#1f5fa8");
  s.line = false;
  for (const auto& c : st.candidates) {
    if (c.race.samples_s.empty() || !c.params.has(param)) continue;
    const auto& v = c.params.values().at(param);
    if (!std::holds_alternative<int64_t>(v)) continue;
    s.points.emplace_back(double(std::get<int64_t>(v)), 1e3 * c.race.median_s);
    s.bars.emplace_back(1e3 * c.race.ci.lo, 1e3 * c.race.ci.hi);
    s.titles.push_back(c.params.str() + ": " + measured(c));
  }
  if (s.points.empty()) return "";
  p.series.push_back(std::move(s));
  return report::svg::render(p);
}

}  // namespace

std::string render_tune_table(const TuneRun& run) {
  std::string out;
  for (const auto& st : run.shapes) {
    out += headline(run, st);
    report::TextTable t({{"status"}, {"params"}, {"time (median, 95% CI)", true}, {"reason"}}, "  ");
    for (const Candidate* c : display_order(st)) t.add_row({c->status, c->params.str(), measured(*c), c->reason});
    out += t.render('-') + "\n";
  }
  return out;
}

std::string render_tune_html(const TuneRun& run) {
  std::string h = report::page_begin(fmt::format("kbisect tune {}/{}", run.backend, run.kernel));
  h += fmt::format("<h1>kbisect tune: {}/{}</h1>\n", html_escape(run.backend), html_escape(run.kernel));
  for (const auto& st : run.shapes) {
    h += fmt::format("<h2>{} {}</h2>\n<pre>{}</pre>\n", to_string(run.dtype), st.shape.str(), html_escape(headline(run, st)));
    std::vector<std::string> main_params;
    for (const auto& [name, v] : st.default_params.values())
      if (main_params.size() < 2 && st.candidates.size() > 1 &&
          std::any_of(st.candidates.begin(), st.candidates.end(), [&](const Candidate& c) {
            return c.params.values().at(name) != st.candidates.front().params.values().at(name);
          }))
        main_params.push_back(name);
    for (const auto& p : main_params) h += plot_param(st, p);
    h += "<table><tr><th>status</th><th>params</th><th>time</th><th>reason</th></tr>\n";
    for (const Candidate* c : display_order(st))
      h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n", html_escape(c->status),
                       html_escape(c->params.str()), html_escape(measured(*c)), html_escape(c->reason));
    h += "</table>\n";
  }
  return h + report::page_end();
}

}  // namespace kb::tune
