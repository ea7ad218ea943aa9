// kbisect check CONFIG --commit REV: one commit's side, for `git bisect run`:
// exit 0 good, 1 bad, 125 skip (build / compile failure, or undecided within the budget).
// Errors follow the usual codes (2 bad input, 3 environment missing).
#include <iostream>

#include <fmt/format.h>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "cli/command.h"
#include "harness/error.h"

namespace kb::cli {
namespace {

struct Args {
  std::string config, commit, workdir;
};

int run(const Args& a) {
  bisect::BisectConfig cfg = bisect::load_bisect_config(a.config);
  bisect::Log log = [](const std::string& s) { std::cerr << s << "\n"; };
  bisect::CheckResult r = bisect::check_commit(cfg, a.workdir, a.commit, log);
  std::cout << fmt::format("{}: {}\n", bisect::to_string(r.side), r.reason);
  switch (r.side) {
    case bisect::Side::good: return kExitOk;
    case bisect::Side::bad: return kExitFound;
    case bisect::Side::skip: return kExitSkip;
  }
  return kExitSkip;
}

Registrar reg("check",
              "Classify one commit for `git bisect run`: exit 0 good, 1 bad, 125 skip",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("CONFIG", a->config, "bisect config (YAML)")->required();
                app->add_option("--commit", a->commit, "the commit to classify (any ref)")->required();
                app->add_option("--workdir", a->workdir, "build cache directory (default: the bisect workdir)");
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
