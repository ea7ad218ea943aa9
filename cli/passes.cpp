// kbisect passes SWEEP --toolchain T [--filter RE] [--metric time|code_bytes|registers|...] [--threshold 0.5%]:
// the LLVM pass execution at which the metric crosses from its no-optimization level to its fully optimized
// level (-mllvm -opt-bisect-limit=N, bisection on N with statistical placement and a confirmed crossing).
// The last stdout line per case: "crossing: N <Pass> on <unit>" (or the verdict). Exit 0 when every case
// ran (whatever it found), 2 bad input, 3 missing environment.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "cli/terminal_log.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "passes/passes.h"
#include "harness/sweep.h"

namespace kb::cli {
namespace {

struct Args {
  std::string sweep, toolchain, filter, metric = "time", threshold = "0.5%", out;
  double cut = 0.5, alpha = 0.05, budget_s = 20;
  int max_pairs = 512;
  uint64_t seed = 1;
  bool json = false;
};

int run(const Args& a) {
  PassesOptions o;
  o.sweep_file = a.sweep;
  o.toolchain = a.toolchain;
  o.filter = a.filter;
  o.metric = a.metric;
  o.threshold = parse_fraction(a.threshold, "--threshold");
  o.cut = a.cut;
  o.alpha = a.alpha;
  o.probe_budget_s = a.budget_s;
  o.max_pairs = a.max_pairs;
  o.seed = a.seed;
  o.log = &progress_log();
  auto r = run_passes(o);
  if (!a.out.empty()) {
    make_dirs(a.out);
    write_file_atomic(a.out + "/passes.json", passes_to_json(r).dump(2) + "\n");
    std::cerr << "results: " << a.out << "/passes.json\n";
  }
  if (a.json) {
    std::cout << passes_to_json(r).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << render_passes(r);
  for (const auto& c : r)
    std::cout << (c.n > 0 ? fmt::format("crossing: {} {} on {}{}\n", c.n, c.pass, c.unit, c.verdict == "found" ? "" : " (unconfirmed)")
                          : fmt::format("verdict: {}\n", c.verdict));
  return kExitOk;
}

Registrar reg("passes",
              "Name the LLVM pass execution where a kernel's metric crosses from its unoptimized to its optimized "
              "level (clang -mllvm -opt-bisect-limit=N, bisection on N, confirmed crossing)",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("SWEEP", a->sweep, "sweep YAML file (the case(s) to analyse)")->required();
                app->add_option("--toolchain", a->toolchain, "clang-based toolchain (kind clang, clang-cuda, clang-hip)")
                    ->required();
                app->add_option("--filter", a->filter, "regex on case ids");
                app->add_option("--metric", a->metric,
                                "time, code_bytes, or a static metric of the backend (registers, vgprs, sgprs, ...)")
                    ->capture_default_str();
                app->add_option("--threshold", a->threshold, "the two levels must differ by more than this")
                    ->capture_default_str();
                app->add_option("--cut", a->cut, "fraction of the (log) gap that counts as reaching the optimized level")
                    ->capture_default_str()
                    ->check(CLI::Range(0.01, 1.0));
                app->add_option("--alpha", a->alpha, "error rate of each statistical placement")
                    ->capture_default_str()
                    ->check(CLI::Range(1e-6, 0.499));
                app->add_option("--budget-s", a->budget_s, "measurement time per probe")->capture_default_str();
                app->add_option("--max-pairs", a->max_pairs, "rounds per probe at most")->capture_default_str();
                app->add_option("--seed", a->seed, "seed of the interleaving order")->capture_default_str();
                app->add_option("-o,--out", a->out, "directory for passes.json");
                app->add_flag("--json", a->json, "print JSON instead of the table");
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
