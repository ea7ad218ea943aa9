// kbisect ab SWEEP --toolchain A --toolchain B: both builds of every case in one process, measured
// interleaved in blocks (both loaded afresh per block, harness/ab.h says why) until each case is decided
// (worse / better / same) or its budget runs out (unsure). Exit code 1 when B is slower than A beyond the
// threshold in any case.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "cli/terminal_log.h"
#include "harness/ab.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/sweep.h"

namespace kb::cli {
namespace {

struct Args {
  AbOptions o;  // the flags bind to its fields, so its defaults are the ones --help shows
  std::vector<std::string> toolchains;
  std::string threshold = "0.5%";
  std::string format = "table";
};

// The flags are checked here so that messages name them; the library checks the same values by field name.
void check_flags(const AbOptions& o) {
  if (!(o.threshold > 0 && o.threshold < 1)) throw InputError(fmt::format("--threshold {} must be in (0, 1)", o.threshold));
  if (!(o.alpha > 0 && o.alpha < 0.5)) throw InputError(fmt::format("--alpha {} must be in (0, 0.5)", o.alpha));
  if (!(o.budget_s > 0)) throw InputError(fmt::format("--budget-s {} must be positive", o.budget_s));
  if (o.pairs_per_block == 1 || o.pairs_per_block < 0)
    throw InputError(fmt::format("--block-pairs {} must be 0 (one load) or at least 2", o.pairs_per_block));
  check_placement(o.placement, "--placement");
}

int run(const Args& a) {
  if (a.toolchains.size() != 2)
    throw InputError(fmt::format("ab needs exactly two --toolchain options (got {})", a.toolchains.size()));
  AbOptions o = a.o;
  o.toolchain_a = a.toolchains[0];
  o.toolchain_b = a.toolchains[1];
  o.threshold = parse_fraction(a.threshold, "--threshold");
  o.log = &progress_log();
  if (a.format != "table" && a.format != "md" && a.format != "json")
    throw InputError(fmt::format("--format: unknown format '{}' (table, md, json)", a.format));
  check_flags(o);
  auto r = run_ab(o);
  if (a.format == "table") std::cout << render_table(r.comparison);
  else if (a.format == "md") std::cout << render_markdown(r.comparison);
  else std::cout << comparison_to_json(r.comparison).dump(2) << "\n";
  if (!r.results_path.empty()) {
    write_file_atomic(o.out_dir + "/ab.md", render_markdown(r.comparison));
    std::cerr << "results: " << r.results_path << "\n";
  }
  return exit_code_for(r.comparison);
}

Registrar reg("ab",
              "Measure two toolchains' builds of a sweep interleaved in one process until each case is "
              "decided (worse/better/same) or its budget runs out (unsure); exit 1 if B is slower beyond the threshold",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("SWEEP", a->o.sweep_file, "sweep YAML file")->required();
                app->add_option("--toolchain", a->toolchains, "toolchain A, then toolchain B (names or files)")
                    ->required();
                app->add_option("--threshold", a->threshold, "smallest change that matters (e.g. 0.5%)")
                    ->capture_default_str();
                app->add_option("--alpha", a->o.alpha, "error rate of calling identical code different")
                    ->capture_default_str()
                    ->check(CLI::Range(1e-6, 0.499));
                app->add_option("--budget-s", a->o.budget_s, "time budget per case in seconds")->capture_default_str();
                app->add_option("--block-pairs", a->o.pairs_per_block,
                                "pairs per block; both sides are loaded afresh for every block (0: one load per "
                                "side, looks on single pairs)")
                    ->capture_default_str();
                app->add_option("--min-blocks", a->o.min_blocks, "first look (blocks): no verdict on fewer placements")
                    ->capture_default_str();
                app->add_option("--max-blocks", a->o.max_blocks, "last planned look (blocks)")->capture_default_str();
                app->add_option("--max-pairs", a->o.max_pairs, "last planned look (pairs) with --block-pairs 0")
                    ->capture_default_str();
                app->add_option("-o,--out", a->o.out_dir, "directory for ab.json (raw paired samples) and ab.md");
                app->add_option("--filter", a->o.filter, "regex on case ids (kernel[params]/dtype/MxNxK/toolchain)");
                app->add_option("--format", a->format, "stdout format: table, md, json")->capture_default_str();
                app->add_option("--placement", a->o.placement,
                                "where each block of CPU loads is measured: process (a new kbisect-worker per "
                                "block, ASLR re-draws everything) or loads (this process, the loads re-placed)")
                    ->capture_default_str();
                app->add_option("--seed", a->o.seed, "seed of the interleaving order")->capture_default_str();
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
