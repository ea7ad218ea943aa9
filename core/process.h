// The project's one process runner: posix_spawn with an argv vector (never a shell), captured
// stdout/stderr, a timeout that kills the whole process group. Every external program goes through it.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb {

struct RunOptions {
  double timeout_s = 600;                       // <= 0: no timeout
  std::string cwd;                              // empty: inherit
  std::map<std::string, std::string> env_set;   // added to / overriding the inherited environment
  std::vector<std::string> env_unset;
  std::optional<std::string> stdin_data;        // empty: stdin is /dev/null
  size_t max_capture = 16 << 20;                // bytes kept per stream (the tail is kept)
};

struct RunResult {
  int exit_code = -1;       // valid when exited normally
  int signal = 0;           // terminating signal, 0 if none
  bool timed_out = false;
  double wall_s = 0;
  std::string out, err;

  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exit 1", "signal 11 (Segmentation fault)", "timed out after 5 s"
  std::string status_text() const;
};

// Runs argv[0] (looked up in PATH when it has no '/'). Throws EnvError if it cannot be started.
RunResult run_process(const std::vector<std::string>& argv, const RunOptions& opts = {});

// Full path of a program in PATH, or empty.
std::string which(const std::string& program);

// Quote argv for display in messages and logs (never for a shell).
std::string argv_to_display(const std::vector<std::string>& argv);

}  // namespace kb
