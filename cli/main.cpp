#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "core/error.h"

namespace kb::cli {

namespace {
struct Entry {
  std::string name, help;
  Setup setup;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

Registrar::Registrar(const char* name, const char* help, Setup setup) {
  registry().push_back({name, help, std::move(setup)});
}

bool progress_enabled() {
  if (const char* p = getenv("KBISECT_PROGRESS")) return std::string(p) == "1";
  return isatty(2);
}

}  // namespace kb::cli

int main(int argc, char** argv) {
  using namespace kb::cli;
  CLI::App app{"kbisect: find GPU-kernel performance regressions and the compiler commit that caused them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kbisect ") + KBISECT_CONFIGURE_SHA);
  std::vector<std::pair<CLI::App*, std::function<int()>>> runs;
  auto entries = registry();
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& e : entries) {
    CLI::App* sub = app.add_subcommand(e.name, e.help);
    runs.emplace_back(sub, e.setup(sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    if (rc == 0) return 0;
    // Under `git bisect run` an exit code 1..127 other than 125 means "bad": a usage error of `check`
    // must abort the bisection instead, like check's own errors (128 + the usual code, cli/check.cpp).
    if (argc > 1 && std::string(argv[1]) == "check") return 128 + kb::kExitBadInput;
    return kb::kExitBadInput;
  }
  try {
    for (auto& [sub, run] : runs)
      if (sub->parsed()) return run();
  } catch (const kb::CompileError& e) {
    std::cerr << "kbisect: error: " << e.what() << "\n" << kb::tail(e.log(), 2000) << "\n";
    return kb::exit_code_for(e);
  } catch (const kb::Error& e) {
    std::cerr << "kbisect: error: " << e.what() << "\n";
    return kb::exit_code_for(e);
  } catch (const std::exception& e) {
    std::cerr << "kbisect: internal error: " << e.what() << "\n";
    return 70;
  }
  return 0;
}
