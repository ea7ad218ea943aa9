// kbisect bisect CONFIG [--workdir DIR] [--resume]: find the compiler commit that caused a regression.
// Progress goes to stderr; the report files go to the workdir; the last line on stdout is
// "culprit: <sha> <subject>" (one such line per verified regression, the largest last) or
// "verdict: <verdict>". Exit status by verdict (cli/exit_codes.h): 0 culprit (named and verified),
// 1 the regression reproduces but no verified commit was named (ambiguous, budget-exhausted, unverified),
// 4 nothing to bisect (not-reproduced, inconclusive); 2 bad input (config, refs, an endpoint that cannot be
// built), 3 a missing environment.
#include <iostream>

#include <fmt/format.h>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/descend.h"
#include "bisect/report.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "core/error.h"

namespace kb::cli {
namespace {

struct Args {
  std::string config, workdir;
  bool resume = false, quiet = false;
  bool report_improvements = false;
  int parallel = 0;
  std::string scheduler;
  int builders = 0;
};

int run(const Args& a) {
  bisect::BisectConfig cfg = bisect::load_bisect_config(a.config);
  if (!a.scheduler.empty()) bisect::set_scheduler(cfg, a.scheduler, "--scheduler", true);
  if (a.builders > 0) bisect::set_builders(cfg, a.builders, "--builders");
  bisect::Log log;
  if (!a.quiet) log = [](const std::string& s) { std::cerr << s << "\n"; };
  // The bisection and, with `descend:`, the descent into the culprit's pin bump (bisect/descend.h).
  const bisect::BisectAndDescent full = bisect::bisect_and_descend(cfg, a.workdir, a.resume, log, a.report_improvements, a.parallel);
  // A pin that cannot be read or resolved is bad input (exit 2), after the outer reports recorded it.
  if (full.descent.status == "error") throw InputError(full.descent.line);
  const bisect::BisectRun& r = full.run;
  const auto& o = r.outcome;
  std::cout << fmt::format("{}\n", o.summary);
  for (const auto& c : o.culprits) {
    const auto& v = c.verify;
    std::cout << fmt::format("  {} {} {}: {} ({})\n", c.improvement ? "improvement" : "regression",
                             c.verified ? "verified" : "NOT verified", git::short_sha(r.commits[size_t(c.index)].sha),
                             r.commits[size_t(c.index)].subject, v.reason);
  }
  if (!o.candidates.empty()) {
    std::cout << "candidates:\n";
    for (int i : o.candidates)
      std::cout << fmt::format("  {} {}\n", r.commits[size_t(i)].sha, r.commits[size_t(i)].subject);
  }
  std::cout << fmt::format("spent: {} builds, {} {}, {:.1f} s ({} steps in {} rounds, {} measured)\n",
                           o.builds, o.samples, bisect::samples_label(cfg), o.wall_s, o.visited, o.rounds, o.measured_steps);
  if (o.builds_started != o.builds || o.builds_cancelled > 0)
    std::cout << fmt::format("builds: {} started, {} cancelled, {} built ahead and used\n", o.builds_started,
                             o.builds_cancelled, o.builds_ahead_used);
  if (const std::string rs = bisect::runs_summary(cfg, o); !rs.empty()) std::cout << rs << "\n";
  std::cout << fmt::format("reports: {} {} {}\n", r.result_json, r.report_md, r.report_html);
  if (const std::string d = full.descent_line(); !d.empty()) std::cout << d << "\n";
  std::cout << bisect::final_line(o, r.commits) << std::endl;
  return exit_code_for(o);
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
                app->add_flag("--report-improvements", a->report_improvements,
                              "also find and report commits inside the range that make the metric better");
                app->add_option("--parallel", a->parallel,
                                "commits probed concurrently and measured together per round (default: the config's parallel, 1)")
                    ->check(CLI::Range(1, 64));
                app->add_option("--scheduler", a->scheduler,
                                "where builds run: local (this node) or slurm (each build a job; default: the config's scheduler)")
                    ->check(CLI::IsMember({"local", "slurm"}));
                app->add_option("--builders", a->builders,
                                "with slurm: builds in flight, building ahead and cancelling what a decision makes useless "
                                "(default: the config's builders, 1)")
                    ->check(CLI::Range(1, 64));
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
