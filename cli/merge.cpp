// kbisect merge INPUT... -o OUT: joins the results of `kbisect sweep --shard I/N` runs (directories or
// results.json files) into one document, after checking that every shard of the same sweep (same
// case-list hash) is present exactly once and complete. Exit 0 merged, 2 missing / duplicate /
// mismatched / incomplete shards (every problem named) or bad input.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/printers.h"
#include "harness/shard.h"

namespace kb::cli {
namespace {

namespace fs = std::filesystem;

struct Opts {
  std::vector<std::string> inputs;
  std::string out, formats = "table,json";
};

// Loads one input: a directory (its results.json, with its shard.json as a fallback for the shard
// metadata of a shard that did not finish) or a results file.
RunResults load_input(const std::string& input, std::string& origin) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    fs::path dir(input);
    origin = (dir / "results.json").string();
    bool has_plan = fs::exists(dir / "shard.json", ec);
    if (!fs::exists(dir / "results.json", ec)) {
      if (has_plan) {
        auto plan = ShardInfo::from_json(nlohmann::json::parse(read_file((dir / "shard.json").string()), nullptr, false),
                                         (dir / "shard.json").string());
        // A started shard without results: the merge reports it as incomplete (all cases missing).
        RunResults r;
        r.name = plan.sweep;
        r.extra = nlohmann::json{{"case_list_hash", plan.case_list_hash}, {"shard", plan.to_json()}};
        return r;
      }
      throw InputError(fmt::format("{}: no results.json (and no shard.json) in this directory", input));
    }
    RunResults r = load_results(origin);
    if (has_plan && (!r.extra.is_object() || !r.extra.contains("shard"))) {
      // Saved mid-run (the metadata is added when the shard finishes): take the plan.
      auto j = nlohmann::json::parse(read_file((dir / "shard.json").string()), nullptr, false);
      auto plan = ShardInfo::from_json(j, (dir / "shard.json").string());
      if (!r.extra.is_object()) r.extra = nlohmann::json::object();
      r.extra["shard"] = plan.to_json();
      r.extra["case_list_hash"] = plan.case_list_hash;
    }
    return r;
  }
  origin = input;
  if (!fs::exists(input, ec)) throw InputError(fmt::format("{}: no such file or directory", input));
  return load_results(input);
}

int run(const Opts& o) {
  auto formats = parse_formats(o.formats, {"table", "json", "csv", "gbench", "md"});
  std::vector<RunResults> shards;
  std::vector<std::string> origins;
  for (const auto& in : o.inputs) {
    std::string origin;
    shards.push_back(load_input(in, origin));
    origins.push_back(origin);
  }
  RunResults merged = merge_results(shards, origins);
  make_dirs(o.out);
  save_results(merged, o.out + "/results.json");
  std::string table = write_outputs(merged, o.out, formats);
  if (!table.empty()) std::cout << table;
  std::cout << fmt::format("merged {} shards of sweep '{}' ({} cases): {}/results.json\n",
                           merged.extra.value("merged_shards", 0), merged.name, merged.cases.size(), o.out);
  return kExitOk;
}

Registrar reg("merge", "Join the results of 'sweep --shard I/N' runs into one document (checks every shard is there once)",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("inputs", o->inputs, "shard output directories or results.json files")->required();
                app->add_option("-o,--out", o->out, "output directory for the merged results")->required();
                app->add_option("--format", o->formats, "comma list of table,json,csv,gbench,md")
                    ->default_val("table,json");
                app->footer(
                    "Exit codes: 0 merged, 2 a shard missing, given twice, incomplete or of another sweep "
                    "(each named), or bad input.");
                return [o] { return run(*o); };
              });

}  // namespace
}  // namespace kb::cli
