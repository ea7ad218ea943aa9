// kbisect check CONFIG --commit REV: one commit's side, for `git bisect run`:
// exit 0 good, 1 bad, 125 skip (build / compile failure, or undecided within the budget).
// Anything that is not a verdict on the commit (a bad config or ref, a missing compiler, an endpoint that
// cannot be built, an internal error) exits 128 + the usual code (130 bad input, 131 environment missing,
// 198 internal), which `git bisect run` treats as "abort the bisection" — never as "bad". (Usage errors
// are caught by the argument parser before this runs; cli/main.cpp maps them to 130 for `check`.)
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "bisect/bisector.h"
#include "bisect/config.h"
#include "cli/command.h"
#include "core/error.h"

namespace kb::cli {
namespace {

struct Args {
  std::string config, commit, workdir;
};

constexpr int kAbortBase = 128;  // git bisect run aborts on exit codes >= 128

int classify(const Args& a);

int run(const Args& a) {
  try {
    return classify(a);
  } catch (const CompileError& e) {
    std::cerr << "kbisect: error: " << e.what() << "\n" << tail(e.log(), 2000) << "\n";
    return kAbortBase + exit_code_for(e);
  } catch (const Error& e) {
    std::cerr << "kbisect: error: " << e.what() << "\n";
    return kAbortBase + exit_code_for(e);
  } catch (const std::exception& e) {
    std::cerr << "kbisect: internal error: " << e.what() << "\n";
    return kAbortBase + 70;
  }
}

int classify(const Args& a) {
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
              "Classify one commit for `git bisect run`: exit 0 good, 1 bad, 125 skip; errors exit 128+ (git bisect run aborts)",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("CONFIG", a->config, "bisect config (YAML)")->required();
                app->add_option("--commit", a->commit, "the commit to classify (any ref)")->required();
                app->add_option("--workdir", a->workdir, "build cache directory (default: the bisect workdir)");
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
