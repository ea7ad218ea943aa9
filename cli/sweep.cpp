// kbisect sweep FILE: run a YAML sweep, write results (JSON always; CSV, gbench JSON, Markdown on
// request) and print the table. --shard I/N runs shard I (1-based) of a deterministic, cost-balanced
// N-way partition (harness/shard.h); `kbisect merge` joins the shards.
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "cli/terminal_log.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/printers.h"
#include "harness/runner.h"
#include "harness/shard.h"
#include "harness/sweep.h"

namespace kb::cli {
namespace {

struct Opts {
  std::string file, out, formats = "table,json", filter, tier, shard;
  std::vector<std::string> toolchains;
  int jobs = 0;
};

int run(const Opts& o) {
  auto formats = parse_formats(o.formats, {"table", "json", "csv", "gbench", "md"});
  if (o.jobs < 0) throw InputError(fmt::format("--jobs {} must be 0 (one per core) or more", o.jobs));
  if (!o.tier.empty() && o.tier != "l1" && o.tier != "l2" && o.tier != "l3")
    throw InputError(fmt::format("--tier '{}' must be l1, l2 or l3", o.tier));
  SweepOptions so{o.toolchains, o.filter, o.tier};
  Sweep sw = load_sweep(o.file, so);
  if (sw.cases.empty()) throw InputError(fmt::format("{}: no cases left after --filter/--tier", o.file));
  const std::string list_hash = case_list_hash(sw.cases);
  std::optional<ShardInfo> shard;
  if (!o.shard.empty()) {
    ShardSpec spec = parse_shard(o.shard);
    auto picked = shard_cases(sw.cases, spec);
    shard = make_shard_info(sw, spec, picked);
    std::vector<PlannedCase> mine;
    for (size_t p : picked) mine.push_back(sw.cases[p]);
    sw.cases = std::move(mine);
  }
  std::string dir = !o.out.empty() ? o.out
                    : shard ? fmt::format("kbisect-out/{}-shard-{}of{}", sw.name, shard->spec.index + 1, shard->spec.count)
                            : "kbisect-out/" + sw.name;
  make_dirs(dir);
  // The shard's plan goes next to its results first, so a merge can tell an unfinished shard from a
  // missing one.
  if (shard) write_file_atomic(dir + "/shard.json", shard->to_json().dump(2) + "\n");
  RunResults res = run_sweep(sw, dir + "/results.json", progress_log(), o.jobs);
  if (!res.extra.is_object()) res.extra = nlohmann::json::object();
  res.extra["case_list_hash"] = list_hash;
  if (shard) res.extra["shard"] = shard->to_json();
  save_results(res, dir + "/results.json");
  std::string table = write_outputs(res, dir, formats);
  if (!table.empty()) std::cout << table;
  std::cout << fmt::format("results: {}/results.json\n", dir);
  for (const auto& c : res.cases)
    if (c.status == CaseStatus::failed || c.status == CaseStatus::incorrect) return kExitFound;
  return kExitOk;
}

Registrar reg("sweep", "Run a YAML sweep: compile with the toolchain(s) under test, check, measure, write results",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("file", o->file, "sweep YAML file")->required();
                app->add_option("-o,--out", o->out, "output directory (default kbisect-out/<sweep name>)");
                app->add_option("--format", o->formats, "comma list of table,json,csv,gbench,md")
                    ->default_val("table,json");
                app->add_option("--filter", o->filter, "regex on case ids (kernel[params]/dtype/MxNxK/toolchain)");
                app->add_option("--tier", o->tier, "only benchmarks of this tier (l1, l2, l3)");
                app->add_option("--shard", o->shard,
                                "run shard I of N (1-based, e.g. 2/4) of a deterministic cost-balanced partition; "
                                "join the shards with 'kbisect merge'");
                app->add_option("--toolchain", o->toolchains,
                                "toolchain name or YAML file; overrides the sweep's toolchains (repeatable)");
                app->add_option("--jobs", o->jobs, "builds compiled at once before measuring (0: one per core)")
                    ->capture_default_str();
                app->footer(
                    "Exit codes: 0 all cases ok or skipped, 1 a case failed or was incorrect, 2 bad input, "
                    "3 environment missing.");
                return [o] { return run(*o); };
              });

}  // namespace
}  // namespace kb::cli
