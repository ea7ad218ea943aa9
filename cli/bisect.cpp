// kbisect bisect CONFIG [--workdir DIR] [--resume]: find the compiler commit that caused a regression.
// Progress goes to stderr; the report files go to the workdir; the last line on stdout is
// "culprit: <sha> <subject>" or "verdict: <verdict>". Exit 0 when the bisection ran to a verdict (whatever
// it is), 2 for bad input (config, refs, an endpoint that cannot be built), 3 for a missing environment.
#include <iostream>

#include <fmt/format.h>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/descend.h"
#include "bisect/report.h"
#include "cli/command.h"
#include "harness/error.h"

namespace kb::cli {
namespace {

struct Args {
  std::string config, workdir;
  bool resume = false, quiet = false;
};

int run(const Args& a) {
  bisect::BisectConfig cfg = bisect::load_bisect_config(a.config);
  bisect::Log log;
  if (!a.quiet) log = [](const std::string& s) { std::cerr << s << "\n"; };
  bisect::BisectRun r = bisect::bisect(cfg, a.workdir, a.resume, log);
  const auto& o = r.outcome;
  std::cout << fmt::format("{}\n", o.summary);
  if (!o.candidates.empty()) {
    std::cout << "candidates:\n";
    for (int i : o.candidates)
      std::cout << fmt::format("  {} {}\n", r.commits[size_t(i)].sha, r.commits[size_t(i)].subject);
  }
  std::cout << fmt::format("spent: {} builds, {} timing samples, {:.1f} s ({} steps, {} measured)\n", o.builds, o.samples,
                           o.wall_s, o.visited, o.measured_steps);
  std::cout << fmt::format("reports: {} {} {}\n", r.result_json, r.report_md, r.report_html);
  // Descent into a pin bump (bisect/descend.h): no-op without `descend:` in the config.
  const bisect::DescendResult d = bisect::descend(cfg, r, a.resume, log);
  if (d.status != "not-configured") std::cout << (d.status == "descended" ? bisect::inner_line(d) : d.line) << "\n";
  std::cout << bisect::final_line(o, r.commits) << std::endl;
  return kExitOk;
}

Registrar reg("bisect",
              "Find the compiler commit that caused a regression: reproduce, bisect with statistical decisions "
              "(code-hash shortcut, skips for failed builds), verify; journaled, resumable",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("CONFIG", a->config, "bisect config (YAML)")->required();
                app->add_option("--workdir", a->workdir,
                                "where builds, the journal and the reports go (default: kbisect-bisect-<name> next to the config)");
                app->add_flag("--resume", a->resume, "continue the journal in the workdir (no build or measurement is repeated)");
                app->add_flag("-q,--quiet", a->quiet, "no progress lines on stderr");
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
