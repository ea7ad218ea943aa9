// kbisect presubmit CONFIG --base REV --change REV (or --base-toolchain T --change-toolchain T, repeatable in
// pairs): compiles every covered case with both compilers, reports what changed statically and gates on it,
// times the changed cases worth the most per device-second within the budget, and writes summary.md,
// junit.xml and presubmit.json (docs/presubmit.md). Exit 0 pass, 1 a regression / failed gate / broken case.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/terminal_log.h"
#include "presubmit/presubmit.h"

namespace kb::cli {
namespace {

int run(const presubmit::Options& opts, bool quiet) {
  presubmit::Options o = opts;
  o.log = quiet ? &quiet_log() : &progress_log();
  presubmit::Outcome out = presubmit::run_presubmit(o);
  if (!quiet) std::cout << presubmit::render_markdown(out) << "\n";
  std::cout << fmt::format("reports: {} {} {}\n", out.summary_md, out.junit_xml, out.json_file);
  std::cout << out.verdict_line() << "\n";
  return exit_code_for(out);
}

Registrar reg("presubmit",
              "Compile every covered case with a compiler diff's two sides, gate on static metrics, and time the "
              "changed cases worth the most per device-second within the budget; exit 1 on a regression",
              [](CLI::App* app) {
                auto o = std::make_shared<presubmit::Options>();
                auto quiet = std::make_shared<bool>(false);
                app->add_option("CONFIG", o->config_file, "presubmit YAML file (docs/presubmit.md)")->required();
                app->add_option("--base", o->base_rev, "the compiler commit before the diff (config's compiler repo)");
                app->add_option("--change", o->change_rev, "the compiler commit with the diff");
                app->add_option("--base-toolchain", o->base_toolchains,
                                "instead of --base: a toolchain (name or file); repeat in pairs with --change-toolchain");
                app->add_option("--change-toolchain", o->change_toolchains, "instead of --change: a toolchain");
                app->add_option("-o,--out", o->out_dir, "reports (summary.md, junit.xml, presubmit.json) and toolchains")
                    ->capture_default_str();
                app->add_option("--jobs", o->jobs, "compile threads (0: one per core)")->capture_default_str();
                app->add_flag("-q,--quiet", *quiet, "print only the reports' paths and the verdict line");
                return [o, quiet] { return run(*o, *quiet); };
              });

}  // namespace
}  // namespace kb::cli
