// kbisect explain SWEEP --toolchain A --toolchain B [--filter RE]
// kbisect explain --bisect-dir WORKDIR --culprit SHA [SWEEP]
// The first LLVM pass whose output differs between two clang-based toolchains on a kernel
// (-mllvm -print-changed), with a short IR diff and the static-metric diff. Exit 0, 2 bad input, 3 env.
#include <iostream>
#include <memory>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "core/error.h"
#include "passes/explain.h"
#include "core/fsutil.h"

namespace kb::cli {
namespace {

struct Args {
  ExplainOptions o;
  bool json = false;
  std::string out;
};

int run(const Args& a) {
  Explanation e = run_explain(a.o);
  if (!a.out.empty()) {
    make_dirs(a.out);
    write_file_atomic(a.out + "/explain.json", explanation_to_json(e).dump(2) + "\n");
  }
  if (a.json) std::cout << explanation_to_json(e).dump(2) << "\n";
  else std::cout << render_explanation(e);
  return kExitOk;
}

Registrar reg("explain",
              "The first LLVM pass whose output differs between two clang-based toolchains on a kernel "
              "(-mllvm -print-changed), with a short IR diff and the static-metric diff",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("SWEEP", a->o.sweep_file, "sweep YAML file (default with --bisect-dir: the bisection's cases)");
                auto* tc = app->add_option("--toolchain", a->o.toolchains, "toolchain A, then toolchain B (names or files)");
                app->add_option("--filter", a->o.filter, "regex on case ids (the first matching case is explained)");
                auto* bd = app->add_option("--bisect-dir", a->o.bisect_dir, "a finished bisection's workdir");
                auto* cu =
                    app->add_option("--culprit", a->o.culprit, "with --bisect-dir: the culprit (sha or prefix); A = its parent");
                bd->needs(cu);
                cu->needs(bd);
                bd->excludes(tc);
                app->add_option("--max-diff-lines", a->o.max_diff_lines, "diff lines shown at most")->capture_default_str();
                app->add_option("-o,--out", a->out, "directory for explain.json");
                app->add_flag("--json", a->json, "print JSON");
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
