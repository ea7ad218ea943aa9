// The presubmit's reports: summary.md (fit for a pull-request comment), junit.xml (one test case per case,
// for CI systems) and presubmit.json (everything, for tools), all written atomically.
#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"
#include "harness/compare.h"
#include "presubmit/presubmit.h"

namespace kb::presubmit {

using json = nlohmann::json;

namespace {

// A code span in a table cell: no Markdown escapes inside it (they would show), only what ends it or the cell.
std::string code(const std::string& s) {
  std::string t;
  for (char ch : s) t += ch == '`' ? std::string("'") : ch == '|' ? std::string("\\|") : ch == '\n' ? std::string(" ") : std::string(1, ch);
  return "`" + t + "`";
}

std::string secs(double s) { return fmt::format("{:.1f} s", s); }

std::string pct(double frac) { return fmt::format("{:+.2f}%", 100 * frac); }

std::string effect_cell(const stats::Decision& d) {
  return fmt::format("{} [{}, {}]", pct(d.effect_pct()), pct(d.ci_lo_pct()), pct(d.ci_hi_pct()));
}

std::string cost_cell(const CaseReport& c) {
  if (!c.cost) return "unknown";
  return fmt::format("{} ({} blocks, from {})", format_seconds(c.cost->seconds), c.cost->blocks, c.cost->from);
}

std::string moves_text(const StaticCase& s) {
  std::string t;
  for (const auto& m : s.moves) t += fmt::format("{}{} {:g} → {:g}", t.empty() ? "" : ", ", m.metric, m.before, m.after);
  return t;
}

// Why the change's side of a case that compiled with the base does not compile.
std::string broken_why(const StaticCase& s) {
  if (s.c.status == Build::Status::absent) return "the case is gone from the change's sweep";
  return to_string(s.c.status) + ": " + tail(s.c.reason, 600);
}

std::string budget_text(const Outcome& o) {
  std::string t;
  for (const auto& [name, budget, spent, has] :
       {std::tuple{"CPU", o.cpu_budget_s, o.cpu_spent_s, o.cfg.cpu_budget_s.has_value()},
        {"GPU", o.gpu_budget_s, o.gpu_spent_s, o.cfg.gpu_budget_s.has_value()}})
    if (has) t += fmt::format("{}{} budget {}, spent {}", t.empty() ? "" : "; ", name, secs(budget), secs(spent));
  return t;
}

// The timed, deferred and not-timed tables of the Markdown summary.
void render_choice(const Outcome& o, std::string& md) {
  std::string timed, deferred, static_only;
  for (const CaseReport& c : o.cases) {
    if (c.ab) {
      const auto& d = c.ab->decision;
      std::string verdict = stats::to_string(d.verdict);
      if (c.confirm) verdict += fmt::format(", confirmed: {}", stats::to_string(c.confirm->decision.verdict));
      if (c.unconfirmed) verdict += " (not confirmed within the budget: still counted)";
      timed += fmt::format("| {} | {} | {} | {} | {:.3g} | {} |\n", code(c.s.name), verdict, effect_cell(d),
                           d.n_base, c.value, format_seconds(c.ab->wall_s + (c.confirm ? c.confirm->wall_s : 0)));
    } else if (c.choice == CaseReport::Choice::deferred) {
      deferred += fmt::format("| {} | {:.3g} | {} | {} |\n", code(c.s.name), c.value, cost_cell(c), md_escape(c.deferred_why));
    } else if (c.s.state == StaticCase::State::changed && !c.not_timable.empty()) {
      static_only += fmt::format("| {} | {} |\n", code(c.s.name), md_escape(c.not_timable));
    }
  }
  if (!timed.empty())
    md += "\n### Timed (interleaved A/B, sequential decision)\n\n| case | verdict | effect [95% CI] | pairs | value | "
          "device time |\n|---|---|---|---:|---:|---:|\n" + timed;
  if (!deferred.empty())
    md += "\n### Deferred to trunk\n\n| case | value | expected cost | why |\n|---|---:|---|---|\n" + deferred;
  if (!static_only.empty())
    md += "\n### Changed, not timed here (static metrics only)\n\n| case | why |\n|---|---|\n" + static_only;
}

}  // namespace

std::string render_markdown(const Outcome& o) {
  std::string md = fmt::format("## kbisect presubmit `{}`: {}\n\n", md_escape(o.cfg.name),
                               o.failed() ? "**FAIL**" : "pass");
  for (const auto& p : o.pairs)
    md += fmt::format("- base {} → change {}\n", code(p.base_label), code(p.change_label));
  md += fmt::format("- {} cases compiled with both ({} builds, {} not in the compile cache, {}): **{} unchanged**, "
                    "{} changed code{}\n",
                    o.cases.size(), o.diff.builds, o.diff.compiled_afresh, format_seconds(o.diff.compile_wall_s),
                    o.count(StaticCase::State::unchanged), o.count(StaticCase::State::changed),
                    o.count(StaticCase::State::broken) ? fmt::format(", {} no longer compile", o.count(StaticCase::State::broken)) : "");
  md += fmt::format("- {} measurements; {}\n", o.measurements, budget_text(o));
  if (o.count(StaticCase::State::changed) == 0 && o.broken() == 0) md += "\n**No kernel's code changed.**\n";
  std::string fails;
  for (const CaseReport& c : o.cases) {
    if (c.regression)
      fails += fmt::format("| {} | regression {}{} |\n", code(c.s.name),
                           effect_cell(c.confirm && !c.unconfirmed ? c.confirm->decision : c.ab->decision),
                           c.unconfirmed ? " (unconfirmed: the budget ran out)" : ", confirmed");
    for (const auto& g : c.s.gate_failures) fails += fmt::format("| {} | static gate: {} |\n", code(c.s.name), code(g));
    if (c.s.state == StaticCase::State::broken)
      fails += fmt::format("| {} | no longer compiles: {} |\n", code(c.s.name), md_escape(broken_why(c.s)));
    if (c.incorrect) fails += fmt::format("| {} | {} |\n", code(c.s.name), md_escape(tail(c.check, 300)));
  }
  if (!fails.empty()) md += "\n### Failures\n\n| case | why |\n|---|---|\n" + fails;
  std::string moved;
  for (const CaseReport& c : o.cases)
    if (!c.s.moves.empty()) moved += fmt::format("| {} | {} |\n", code(c.s.name), md_escape(moves_text(c.s)));
  if (!moved.empty()) md += "\n### Static metrics that moved (base → change)\n\n| case | metrics |\n|---|---|\n" + moved;
  render_choice(o, md);
  std::string unchanged;
  for (const CaseReport& c : o.cases)
    if (c.s.state == StaticCase::State::unchanged) unchanged += "- " + code(c.s.name) + "\n";
  if (!unchanged.empty())
    md += fmt::format("\n<details><summary>{} unchanged cases (same code hash under both: not measured)</summary>\n\n{}"
                      "\n</details>\n", o.count(StaticCase::State::unchanged), unchanged);
  for (const auto& n : o.notes) md += "\n> " + md_escape(n) + "\n";
  return md;
}

std::string render_junit(const Outcome& o) {
  std::string cases;
  int failures = 0, skipped = 0;
  for (const CaseReport& c : o.cases) {
    const PlannedCase* pc = c.s.change ? c.s.change : c.s.base;
    std::string body;
    std::vector<std::pair<std::string, std::string>> fails;  // type, message
    for (const auto& g : c.s.gate_failures) fails.emplace_back("static-gate", g);
    if (c.s.state == StaticCase::State::broken) fails.emplace_back("compile", broken_why(c.s));
    if (c.incorrect) fails.emplace_back("correctness", tail(c.check, 600));
    if (c.regression) fails.emplace_back("regression", effect_cell(c.ab->decision));
    for (const auto& [type, msg] : fails)
      body += fmt::format("<failure type=\"{}\" message=\"{}\">{}</failure>", type, html_escape(msg), html_escape(msg));
    failures += !fails.empty();
    std::string skip;
    if (fails.empty() && c.choice == CaseReport::Choice::deferred)
      skip = fmt::format("deferred to trunk: value {:.3g}, expected cost {}; {}", c.value, cost_cell(c), c.deferred_why);
    else if (fails.empty() && c.s.state == StaticCase::State::changed && !c.not_timable.empty())
      skip = "changed, static metrics only: " + c.not_timable;
    if (!skip.empty()) {
      body += fmt::format("<skipped message=\"{}\"/>", html_escape(skip));
      ++skipped;
    }
    std::string out = to_string(c.s.state);
    if (!c.s.moves.empty()) out += "; " + moves_text(c.s);
    if (c.ab) out += "; " + stats::to_string(c.ab->decision.verdict) + " " + effect_cell(c.ab->decision);
    body += fmt::format("<system-out>{}</system-out>", html_escape(out));
    cases += fmt::format("    <testcase classname=\"presubmit.{}\" name=\"{}\" time=\"{:.3f}\">{}</testcase>\n",
                         pc->c.kernel->backend, html_escape(c.s.name), c.spent_s, body);
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kbisect presubmit\" tests=\"{0}\" "
      "failures=\"{1}\" skipped=\"{2}\" time=\"{3:.3f}\">\n  <testsuite name=\"{4}\" tests=\"{0}\" failures=\"{1}\" "
      "errors=\"0\" skipped=\"{2}\" time=\"{3:.3f}\" timestamp=\"{5}\">\n{6}  </testsuite>\n</testsuites>\n",
      o.cases.size(), failures, skipped, o.wall_s, html_escape(o.cfg.name), html_escape(o.started), cases);
}

namespace {
json case_json(const CaseReport& c) {
  json moves = json::array();
  for (const auto& m : c.s.moves) moves.push_back({{"metric", m.metric}, {"before", m.before}, {"after", m.after}});
  json j = {{"case", c.s.name}, {"key", c.s.key}, {"pair", c.s.pair}, {"state", to_string(c.s.state)},
            {"base", {{"build", to_string(c.s.b.status)}, {"code_hash", c.s.b.art.code_hash}, {"reason", c.s.b.reason}}},
            {"change", {{"build", to_string(c.s.c.status)}, {"code_hash", c.s.c.art.code_hash}, {"reason", c.s.c.reason}}},
            {"static_moves", moves}, {"static_size", c.s.static_size}, {"gate_failures", c.s.gate_failures},
            {"device", c.device}, {"choice", to_string(c.choice)}, {"spent_s", c.spent_s}};
  if (!c.not_timable.empty()) j["not_timable"] = c.not_timable;
  if (c.s.state == StaticCase::State::changed && c.not_timable.empty()) {
    j["value"] = {{"value", c.value}, {"weight", c.candidate.weight}, {"change_points", c.candidate.change_points},
                  {"history_points", c.history_points}, {"static_size", c.candidate.static_size}};
    if (c.cost)
      j["cost"] = {{"seconds", c.cost->seconds}, {"blocks", c.cost->blocks}, {"reached", c.cost->reached},
                   {"block_sd", c.cost->block_sd}, {"block_s", c.cost->block_s}, {"effect", c.cost->effect},
                   {"from", c.cost->from}};
  }
  if (c.round) j["round"] = c.round;
  if (!c.deferred_why.empty()) j["deferred_why"] = c.deferred_why;
  if (!c.check.empty()) j["check"] = c.check;
  for (const auto& [name, po] : {std::pair{"ab", &c.ab}, {"confirmation", &c.confirm}})
    if (*po)
      j[name] = {{"decision", decision_to_json((*po)->decision)}, {"wall_s", (*po)->wall_s}, {"looks", (*po)->looks},
                 {"block_effects", (*po)->block_effects}};
  j["regression"] = c.regression;
  j["incorrect"] = c.incorrect;
  if (c.unconfirmed) j["unconfirmed"] = true;
  return j;
}
}  // namespace

json to_json(const Outcome& o) {
  json pairs = json::array();
  for (const auto& p : o.pairs)
    pairs.push_back({{"base", p.base}, {"change", p.change}, {"base_label", p.base_label}, {"change_label", p.change_label}});
  json cases = json::array();
  for (const CaseReport& c : o.cases) cases.push_back(case_json(c));
  return {{"kind", "presubmit"},
          {"name", o.cfg.name},
          {"config", o.cfg.file},
          {"verdict", o.failed() ? "fail" : "pass"},
          {"summary", o.verdict_line()},
          {"started", o.started},
          {"finished", o.finished},
          {"wall_s", o.wall_s},
          {"environment", describe_environment()},
          {"pairs", pairs},
          {"counts",
           {{"cases", o.cases.size()}, {"unchanged", o.count(StaticCase::State::unchanged)},
            {"changed", o.count(StaticCase::State::changed)}, {"broken", o.count(StaticCase::State::broken)},
            {"fixed", o.count(StaticCase::State::fixed)}, {"not_compiled", o.count(StaticCase::State::not_compiled)},
            {"regressions", o.regressions()}, {"gate_failures", o.gate_failures()}, {"measurements", o.measurements}}},
          {"compile", {{"builds", o.diff.builds}, {"compiled_afresh", o.diff.compiled_afresh}, {"wall_s", o.diff.compile_wall_s}}},
          {"budget",
           {{"cpu_s", o.cpu_budget_s}, {"cpu_spent_s", o.cpu_spent_s}, {"gpu_s", o.gpu_budget_s}, {"gpu_spent_s", o.gpu_spent_s}}},
          {"notes", o.notes},
          {"cases", cases}};
}

void write_reports(Outcome& o, const std::string& dir) {
  make_dirs(dir);
  o.summary_md = dir + "/summary.md";
  o.junit_xml = dir + "/junit.xml";
  o.json_file = dir + "/presubmit.json";
  write_file_atomic(o.summary_md, render_markdown(o));
  write_file_atomic(o.junit_xml, render_junit(o));
  write_file_atomic(o.json_file, to_json(o).dump(2) + "\n");
}

}  // namespace kb::presubmit
