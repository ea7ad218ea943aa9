// kbisect history: the nightly history in SQLite (nightly/history.h).
//   kbisect history [CASE-FILTER] --db FILE [--last N] [--format table|csv|json]   series per case, with
//       change points (stats/changepoint.h) marked
//   kbisect history --db FILE --record RESULTS [--date D --label L --machine M --kbisect-sha S
//       --compiler-commit TOOLCHAIN=SHA ...]                                         record a merged run
//   kbisect history --db FILE --runs [--last N]                                      list the runs
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "stats/changepoint.h"
#include "harness/compare.h"
#include "core/error.h"
#include "nightly/history.h"
#include "core/text.h"

namespace kb::cli {
namespace {

using json = nlohmann::json;

struct Opts {
  std::string filter = ".*", db, format = "table", record;
  int last = 0;
  bool runs = false, no_change_points = false;
  std::string date, label, machine, kbisect_sha;
  std::vector<std::string> commits;
  double alpha = 0.01, min_change = 0.0;
  int min_segment = 3, permutations = 999;
  uint64_t seed = 1;
};

int do_record(const Opts& o, History& h) {
  std::string path = o.record;
  if (std::filesystem::is_directory(path)) path += "/results.json";
  RunResults r = load_results(path);
  RunMeta m;
  m.date = o.date;
  m.label = o.label;
  m.machine = o.machine;
  m.kbisect_sha = o.kbisect_sha;
  for (const auto& c : o.commits) {
    auto eq = c.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == c.size())
      throw InputError(fmt::format("--compiler-commit '{}': expected TOOLCHAIN=SHA", c));
    m.compiler_commits[c.substr(0, eq)] = c.substr(eq + 1);
  }
  int64_t id = h.record(r, m);
  std::cout << fmt::format("recorded run {} (sweep '{}', {} cases) in {}\n", id, r.name, r.cases.size(), h.path());
  return kExitOk;
}

int do_runs(const Opts& o, const History& h) {
  auto rows = h.runs(o.last);
  if (o.format == "json") {
    json a = json::array();
    for (const auto& r : rows)
      a.push_back({{"id", r.id}, {"date", r.date}, {"label", r.label}, {"machine", r.machine},
                   {"kbisect_sha", r.kbisect_sha}, {"sweep", r.sweep}, {"case_list_hash", r.case_list_hash},
                   {"toolchains", r.toolchains}, {"compiler_commits", r.compiler_commits}, {"cases", r.cases},
                   {"ok_cases", r.ok_cases}});
    std::cout << a.dump(2) << "\n";
    return kExitOk;
  }
  if (o.format == "csv") {
    std::cout << "id,date,label,machine,kbisect_sha,sweep,cases,ok_cases\n";
    for (const auto& r : rows)
      std::cout << fmt::format("{},{},{},{},{},{},{},{}\n", r.id, csv_field(r.date), csv_field(r.label),
                               csv_field(r.machine), csv_field(r.kbisect_sha), csv_field(r.sweep), r.cases, r.ok_cases);
    return kExitOk;
  }
  std::cout << fmt::format("{:>5}  {:<25} {:<16} {:<14} {:<12} {:<16} {:>6}  {}\n", "run", "date", "label", "machine",
                           "kbisect", "sweep", "cases", "compiler commits");
  for (const auto& r : rows) {
    std::string cc;
    for (const auto& [k, v] : r.compiler_commits) cc += fmt::format("{}{}={}", cc.empty() ? "" : " ", k, v.substr(0, 12));
    std::cout << fmt::format("{:>5}  {:<25} {:<16} {:<14} {:<12} {:<16} {:>6}  {}\n", r.id, r.date, r.label, r.machine,
                             r.kbisect_sha.substr(0, 12), r.sweep, fmt::format("{}/{}", r.ok_cases, r.cases), cc);
  }
  return kExitOk;
}

int do_series(const Opts& o, const History& h) {
  auto by_case = h.series_by_case(o.filter, o.last);
  ChangePointConfig cfg;
  cfg.alpha = o.alpha;
  cfg.min_segment = o.min_segment;
  cfg.permutations = o.permutations;
  cfg.seed = o.seed;
  cfg.min_rel_change = o.min_change;
  std::map<std::string, std::vector<ChangePoint>> cps;
  if (!o.no_change_points)
    for (const auto& [id, pts] : by_case)
      for (auto& cp : detect_in_series(pts, cfg)) cps[id].push_back(cp);
  auto cp_at = [&](const std::string& id, int64_t run_id) -> const ChangePoint* {
    auto it = cps.find(id);
    if (it == cps.end()) return nullptr;
    for (const auto& cp : it->second)
      if (cp.run_id == run_id) return &cp;
    return nullptr;
  };

  if (o.format == "json") {
    json out = {{"db", h.path()}, {"filter", o.filter}, {"cases", json::array()}};
    if (!o.no_change_points)
      out["change_point_method"] = {{"method", "e-divisive (energy statistic, exponent 1) on log medians, permutation test"},
                                    {"alpha", cfg.alpha}, {"min_segment", cfg.min_segment},
                                    {"permutations", cfg.permutations}, {"seed", cfg.seed},
                                    {"min_rel_change", cfg.min_rel_change}};
    for (const auto& [id, pts] : by_case) {
      json c = {{"case_id", id}, {"points", json::array()}, {"change_points", json::array()}};
      for (const auto& p : pts)
        c["points"].push_back({{"run_id", p.run_id}, {"date", p.date}, {"label", p.label}, {"status", p.status},
                               {"median_s", p.median_s}, {"ci_rel", p.ci_rel}, {"samples", p.samples},
                               {"toolchain_identity", p.toolchain_identity}});
      for (const auto& cp : cps[id])
        c["change_points"].push_back({{"index", cp.index}, {"run_id", cp.run_id}, {"date", cp.date},
                                      {"before_s", cp.before}, {"after_s", cp.after},
                                      {"rel_change", cp.rel_change}, {"p_value", cp.p_value}});
      out["cases"].push_back(c);
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  if (o.format == "csv") {
    std::cout << "case_id,run_id,date,label,status,median_s,ci_rel,samples,toolchain_identity,change_point_rel,"
                 "change_point_p\n";
    for (const auto& [id, pts] : by_case)
      for (const auto& p : pts) {
        const ChangePoint* cp = cp_at(id, p.run_id);
        std::cout << fmt::format("{},{},{},{},{},{:.9g},{:.6g},{},{},{},{}\n", csv_field(id), p.run_id,
                                 csv_field(p.date), csv_field(p.label), p.status, p.median_s, p.ci_rel, p.samples,
                                 p.toolchain_identity, cp ? fmt::format("{:.6g}", cp->rel_change) : "",
                                 cp ? fmt::format("{:.4g}", cp->p_value) : "");
      }
    return kExitOk;
  }
  if (by_case.empty()) {
    std::cout << fmt::format("no case matches '{}' in {}\n", o.filter, h.path());
    return kExitOk;
  }
  for (const auto& [id, pts] : by_case) {
    std::cout << id << "\n";
    std::cout << fmt::format("  {:>5}  {:<25} {:<16} {:>12} {:>8} {:>8} {:>8}  {}\n", "run", "date", "label", "median",
                             "±ci", "vs prev", "samples", "status");
    double prev = 0;
    for (const auto& p : pts) {
      bool ok = p.status == "ok" && p.median_s > 0;
      std::string delta = ok && prev > 0 ? fmt::format("{:+.2f}%", (p.median_s / prev - 1) * 100) : "";
      std::string mark;
      if (const ChangePoint* cp = cp_at(id, p.run_id))
        mark = fmt::format("  << change {:+.2f}% ({} -> {}, p={:.3g})", cp->rel_change * 100, format_seconds(cp->before),
                           format_seconds(cp->after), cp->p_value);
      std::cout << fmt::format("  {:>5}  {:<25} {:<16} {:>12} {:>8} {:>8} {:>8}  {}{}\n", p.run_id, p.date, p.label,
                               ok ? format_seconds(p.median_s) : "-",
                               ok ? fmt::format("{:.2f}%", p.ci_rel * 100) : "", delta, p.samples, p.status, mark);
      if (ok) prev = p.median_s;
    }
  }
  return kExitOk;
}

int run(const Opts& o) {
  if (o.format != "table" && o.format != "csv" && o.format != "json")
    throw InputError(fmt::format("--format '{}' must be table, csv or json", o.format));
  if (o.last < 0) throw InputError(fmt::format("--last {} must be >= 0", o.last));
  if (!o.record.empty() && o.runs) throw InputError("--record and --runs cannot be combined");
  // Only --record creates the database; reading a file that is not there is a mistyped path.
  History h(o.db, !o.record.empty());
  if (!o.record.empty()) return do_record(o, h);
  if (o.runs) return do_runs(o, h);
  return do_series(o, h);
}

Registrar reg("history", "Nightly history in SQLite: record a merged run, list runs, print per-case series with change points",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("filter", o->filter, "regex on case ids (default: all)");
                app->add_option("--db", o->db, "SQLite history file (created by --record when missing)")->required();
                app->add_option("--last", o->last, "only the last N runs");
                app->add_option("--format", o->format, "table, csv or json")->default_val("table");
                app->add_option("--record", o->record, "record this merged results.json (or its directory)");
                app->add_option("--date", o->date, "with --record: the run's date (default: its start time)");
                app->add_option("--label", o->label, "with --record: a label, e.g. nightly");
                app->add_option("--machine", o->machine, "with --record: machine name (default: the host)");
                app->add_option("--kbisect-sha", o->kbisect_sha, "with --record: kbisect commit (default: from the results)");
                app->add_option("--compiler-commit", o->commits,
                                "with --record: TOOLCHAIN=SHA, the compiler commit a toolchain was built from (repeatable)");
                app->add_flag("--runs", o->runs, "list the recorded runs");
                app->add_flag("--no-change-points", o->no_change_points, "do not scan the series for change points");
                app->add_option("--alpha", o->alpha, "change points: permutation-test significance")->default_val(0.01);
                app->add_option("--min-segment", o->min_segment, "change points: shortest segment (runs)")->default_val(3);
                app->add_option("--permutations", o->permutations, "change points: permutations per test")->default_val(999);
                app->add_option("--seed", o->seed, "change points: permutation seed")->default_val(1);
                app->add_option("--min-change", o->min_change,
                                "change points: ignore changes smaller than this fraction (0.005 = 0.5%)")
                    ->default_val(0.0);
                app->footer("Exit codes: 0 ok, 2 bad input (file, regex, option), 3 SQLite failure.");
                return [o] { return run(*o); };
              });

}  // namespace
}  // namespace kb::cli
