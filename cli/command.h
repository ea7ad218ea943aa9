// Subcommand registry: each cli/<name>.cpp registers itself once; main.cpp builds the CLI11 app.
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace kb::cli {

// setup adds options to the subcommand and returns the function that runs it (returns an exit code).
using Setup = std::function<std::function<int()>(CLI::App*)>;

struct Registrar {
  Registrar(const char* name, const char* help, Setup setup);
};

// Progress lines go to stderr only when it is a terminal (or KBISECT_PROGRESS=1).
bool progress_enabled();

}  // namespace kb::cli
