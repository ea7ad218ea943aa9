#include "tune/report.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  if (st.static_only) h += "  " + st.static_only_reason + "; the order is a static estimate, not a measurement\n";
  else
    h += fmt::format("  race: {} rounds, {} samples, {} of {} looks, {:.1f} s measuring (+{:.1f} s calibrating), "
                     "stopped: {}; {} new compiles\n",
                     st.race.rounds, st.race.samples, st.race.looks_taken, st.race.looks, st.race.measured_s,
                     st.calibrate_s, st.race.stop, st.compiles);
  if (!st.model.empty()) h += fmt::format("  {}: {}\n", st.static_only ? "ranked by" : "raced in the order of", st.model);
  if (!st.build_check.empty()) h += "  build: " + st.build_check + "\n";
  if (st.winner && st.static_only) {
    const Candidate& w = st.candidates[*st.winner];
    h += fmt::format("  first estimate [{}]{}\n  default [{}]\n", w.params.str(),
                     w.estimate ? ": " + describe(*w.estimate) : "", st.default_params.str());
  } else if (st.winner) {
    h += fmt::format("  winner  [{}]\n  default [{}]\n", st.candidates[*st.winner].params.str(), st.default_params.str());
  }
  if (st.confirm)
    h += fmt::format("  gain over default: {:+.2f}% [{:+.2f}%, {:+.2f}%] ({}, {:.1f} s A/B with fresh loads)\n",
                     st.gain_pct(), st.gain_ci_pct().lo, st.gain_ci_pct().hi, stats::to_string(st.confirm->verdict),
                     st.confirm_s);
  return h;
}

// Measured candidates first (fastest first), then those the static model estimated (in its order), then
// the rest in their order.
std::vector<const Candidate*> display_order(const ShapeTune& st) {
  std::vector<const Candidate*> out;
  for (const auto& c : st.candidates) out.push_back(&c);
  auto group = [](const Candidate* c) { return !c->race.samples_s.empty() ? 0 : c->estimate ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const Candidate* a, const Candidate* b) {
    if (group(a) != group(b)) return group(a) < group(b);
    if (group(a) == 0) return a->race.median_s < b->race.median_s;
    return group(a) == 1 && ranks_before(*a->estimate, *b->estimate);
  });
  return out;
}

std::string estimated(const Candidate& c) { return c.estimate ? describe(*c.estimate) : ""; }

bool any_estimate(const ShapeTune& st) {
  return std::any_of(st.candidates.begin(), st.candidates.end(), [](const Candidate& c) { return bool(c.estimate); });
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
    const bool est = any_estimate(st);
    std::vector<report::Column> cols = {{"status"}, {"params"}, {"time (median, 95% CI)", true}};
    if (est) cols.push_back({"static estimate"});
    cols.push_back({"reason"});
    report::TextTable t(cols, "  ");
    for (const Candidate* c : display_order(st)) {
      std::vector<std::string> row = {c->status, c->params.str(), measured(*c)};
      if (est) row.push_back(estimated(*c));
      row.push_back(c->reason);
      t.add_row(row);
    }
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
    h += "<table><tr><th>status</th><th>params</th><th>time</th><th>static estimate</th><th>reason</th></tr>\n";
    for (const Candidate* c : display_order(st))
      h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n",
                       html_escape(c->status), html_escape(c->params.str()), html_escape(measured(*c)),
                       html_escape(estimated(*c)), html_escape(c->reason));
    h += "</table>\n";
  }
  return h + report::page_end();
}

namespace {

nlohmann::json estimate_json(const Estimate& e) {
  nlohmann::json j = {{"model", e.gemm ? "gemm" : "generic"}, {"score", e.score}};
  if (!e.gemm) {
    j["note"] = e.note;
    return j;
  }
  j.update({{"time_s", e.time_s}, {"tflops", e.tflops}, {"bound", e.bound}, {"bytes_per_flop", e.bytes_per_flop},
            {"tiles", e.tiles}, {"tiles_per_sm", e.tiles_per_sm}, {"wave_efficiency", e.wave_efficiency},
            {"resident", e.resident}, {"stages_asked", e.stages_asked}, {"stages_held", e.stages_held},
            {"inflight_bytes", e.inflight_bytes}, {"latency_cover", e.latency_cover}, {"latency_margin", e.latency_margin},
            {"spill_bytes", e.spill_bytes}});
  return j;
}

nlohmann::json candidate_json(const Candidate& c) {
  nlohmann::json j = {{"params", params_to_json(c.params)}, {"status", c.status}, {"reason", c.reason},
                      {"metrics", c.metrics}};
  if (!c.race.samples_s.empty())
    j["measured"] = {{"median_s", c.race.median_s}, {"ci_s", {c.race.ci.lo, c.race.ci.hi}},
                     {"samples", c.race.samples_s.size()}};
  if (c.estimate) j["estimate"] = estimate_json(*c.estimate);
  return j;
}

}  // namespace

std::string render_tune_json(const TuneRun& run) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& st : run.shapes) {
    nlohmann::json s = {{"shape", st.shape.str()}, {"static_only", st.static_only}, {"model", st.model},
                        {"default", params_to_json(st.default_params)}, {"compiles", st.compiles},
                        {"measuring_s", st.measuring_s()}, {"race_s", st.race.measured_s},
                        {"calibrate_s", st.calibrate_s}, {"confirm_s", st.confirm_s}, {"stop", st.race.stop},
                        {"winner", st.winner ? params_to_json(st.candidates[*st.winner].params) : nlohmann::json()}};
    if (st.static_only) s["static_only_reason"] = st.static_only_reason;
    if (st.confirm)
      s["gain"] = {{"pct", st.gain_pct()}, {"ci_pct", {st.gain_ci_pct().lo, st.gain_ci_pct().hi}},
                   {"verdict", stats::to_string(st.confirm->verdict)}};
    nlohmann::json cands = nlohmann::json::array();
    for (const Candidate* c : display_order(st)) cands.push_back(candidate_json(*c));
    s["candidates"] = std::move(cands);
    shapes.push_back(std::move(s));
  }
  nlohmann::json j = {{"format", "kbisect-tune/1"}, {"kernel", run.kernel}, {"backend", run.backend},
                      {"toolchain", run.toolchain}, {"toolchain_identity", run.toolchain_identity},
                      {"machine", run.machine}, {"dtype", to_string(run.dtype)}, {"shapes", std::move(shapes)}};
  return j.dump(1) + "\n";
}

}  // namespace kb::tune
