// kbisect tune KERNEL --toolchain T --shape MxNxK... --dtype D [--budget-s S] [-o TABLE]: search the
// kernel's declared space on this machine (tune/tuner.h), print the candidates, write the winners into
// the tuned-config table that `config: tuned` reads, and optionally an HTML report.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/terminal_log.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "backends/triton/user_kernel.h"
#include "harness/tuned_table.h"
#include "tune/report.h"
#include "tune/tuner.h"

namespace kb::cli {
namespace {

struct Args {
  tune::TuneOptions o;  // the flags bind to its fields, so its defaults are the ones --help shows
  std::string dtype = "f32", table, html, json;
  std::vector<std::string> shapes, space;
};

// "MR=4,6,8" -> {"MR", [4, 6, 8]}; "MR=" is an empty space (refused by the tuner, naming MR).
std::pair<std::string, std::vector<ParamValue>> parse_space(const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("--space '{}' must be NAME=V1,V2,...", s));
  std::vector<ParamValue> values;
  std::string rest = s.substr(eq + 1);
  for (size_t p = 0; !rest.empty() && p != std::string::npos;) {
    size_t c = rest.find(',', p);
    std::string v = rest.substr(p, c == std::string::npos ? std::string::npos : c - p);
    if (!v.empty()) values.push_back(parse_param_value(v));
    p = c == std::string::npos ? c : c + 1;
  }
  return {s.substr(0, eq), values};
}

int run(const Args& a) {
  tune::TuneOptions o = a.o;
  o.dtype = parse_dtype(a.dtype);
  const triton::UserKernel* user = nullptr;
  const std::string& kernel = a.o.kernel;
  auto ends = [&](const std::string& tail) {
    return kernel.size() > tail.size() && kernel.compare(kernel.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends(".yaml") || ends(".yml")) {  // a user's kernel file: its shapes by name
    user = &triton::load_user_kernel(kernel);
    o.kernel = user->name;
  }
  for (const auto& s : a.shapes) {
    if (!user) {
      o.shapes.push_back(parse_shape_text(s, "--shape"));
      continue;
    }
    std::string names;
    for (const auto& us : user->shapes) {
      if (us.label == s) o.shapes.push_back(us);
      names += (names.empty() ? "" : ", ") + us.label;
    }
    if (o.shapes.empty() || o.shapes.back().label != s)
      throw InputError(fmt::format("--shape '{}': {} has no such shape (it has: {})", s, kernel,
                                   names.empty() ? "none" : names));
  }
  for (const auto& s : a.space) o.space.push_back(parse_space(s));
  if (!(o.prune.max_spill_bytes >= 0))
    throw InputError(fmt::format("--max-spill-bytes {} must be 0 or more", o.prune.max_spill_bytes));
  tune::TuneRun r = tune::run_tune(o, progress_log());
  std::cout << tune::render_tune_table(r);
  if (!a.table.empty()) {
    TunedTable t = TunedTable::load(a.table);
    for (const auto& e : r.entries()) t.put(e);
    t.save(a.table);
    std::cerr << "tuned table: " << a.table << "\n";
  }
  if (!a.html.empty()) {
    write_file_atomic(a.html, tune::render_tune_html(r));
    std::cerr << "report: " << a.html << "\n";
  }
  if (!a.json.empty()) {
    write_file_atomic(a.json, tune::render_tune_json(r));
    std::cerr << "json: " << a.json << "\n";
  }
  return 0;
}

Registrar reg("tune",
              "Search a kernel's tunable space on this machine: prune what cannot win, race the survivors in the static "
              "model's order, confirm the winner against the built-in default, and record it in a tuned-config table",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("KERNEL", a->o.kernel, "kernel name (see kbisect list), or a user's triton_kernel YAML file")
                    ->required();
                app->add_option("--toolchain", a->o.toolchain, "toolchain name or YAML file")->required();
                app->add_option("--shape", a->shapes, "MxNxK, or a user kernel file's shape name (repeatable)")->required();
                app->add_option("--dtype", a->dtype, "f32, f16 or bf16")->capture_default_str();
                app->add_option("--budget-s", a->o.budget_s, "measuring time per shape in seconds")->capture_default_str();
                app->add_option("--space", a->space, "NAME=V1,V2,... replaces the declared values (repeatable)");
                app->add_option("--alpha", a->o.alpha, "error rate of the race and of the confirming A/B")
                    ->capture_default_str();
                app->add_option("--jobs", a->o.jobs, "parallel compiles (0: one per core)")->capture_default_str();
                app->add_option("-o,--out", a->table, "tuned-config table (JSON) to add the winners to");
                app->add_option("--html", a->html, "write the search as an HTML page here");
                app->add_option("--json", a->json, "write the search (every candidate, estimate and measurement) as JSON here");
                app->add_option("--device", a->o.device,
                                "GPU whose public facts the static model uses (default: the target's first, e.g. "
                                "H100 SXM5 for sm_90a; also H200 SXM, A100 SXM4, B200, MI300X)");
                app->add_flag("--static-only", a->o.static_only,
                              "rank on the static model only, even where the device can run (nothing is measured)");
                app->add_option("--max-spill-bytes", a->o.prune.max_spill_bytes,
                                "GPU: prune a candidate that spills more bytes per thread (stores + loads); "
                                "default: no bound");
                app->add_option("--seed", a->o.seed, "seed of the measuring order")->capture_default_str();
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
