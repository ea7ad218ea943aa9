// Errors with context. Library code throws; only cli/ maps errors to exit codes (DESIGN rule 8).
#pragma once
#include <stdexcept>
#include <string>

namespace kb {

// Exit codes shared by every subcommand.
enum ExitCode : int {
  kExitOk = 0,
  kExitFound = 1,      // regression found (compare), "bad" (check)
  kExitBadInput = 2,   // bad input: file, field or value
  kExitEnvMissing = 3, // environment missing: no device, no toolchain
  kExitSkip = 125,     // check mode: skip this commit (git bisect run)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitBadInput)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad input: a file, field or value the user gave. Message names it.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, kExitBadInput) {}
};

// Something the environment lacks: a compiler, a driver, a device.
class EnvError : public Error {
 public:
  explicit EnvError(const std::string& what) : Error(what, kExitEnvMissing) {}
};

// A compile failed (compiler error, crash or timeout). Carries the log tail.
class CompileError : public Error {
 public:
  CompileError(const std::string& what, std::string log)
      : Error(what, kExitBadInput), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

// Last `max_bytes` of a text, starting at a line boundary when possible.
std::string tail(const std::string& text, size_t max_bytes = 2000);

}  // namespace kb
