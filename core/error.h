// Errors with context. Library code throws them with a kind; only cli/ maps a kind to an exit code
// (cli/exit_codes.h).
#pragma once
#include <stdexcept>
#include <string>

namespace kb {

enum class ErrorKind {
  input,        // bad input: a file, field or value the user gave
  environment,  // something the environment lacks or refuses: a compiler, a driver, a device, a scheduler
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::input) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Bad input: a file, field or value the user gave. Message names it.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, ErrorKind::input) {}
};

// Something the environment lacks: a compiler, a driver, a device.
class EnvError : public Error {
 public:
  explicit EnvError(const std::string& what) : Error(what, ErrorKind::environment) {}
};

// A compile failed (compiler error, crash or timeout). Carries the log tail.
class CompileError : public Error {
 public:
  CompileError(const std::string& what, std::string log) : Error(what, ErrorKind::input), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

// A compile that cannot happen for a reason that is no one's error: the compiler release or the target
// lacks what the kernel needs (a Triton too old for warp specialization). The case is `skipped`.
class CompileSkipped : public Error {
 public:
  explicit CompileSkipped(const std::string& what) : Error(what, ErrorKind::input) {}
};

// Last `max_bytes` of a text, starting at a line boundary when possible.
std::string tail(const std::string& text, size_t max_bytes = 2000);

}  // namespace kb
