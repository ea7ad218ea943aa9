// The project's one process runner: posix_spawn with an argv vector (never a shell), captured
// stdout/stderr, a timeout that kills the whole process group. Every external program goes through it.
#pragma once
#include <map>
#include <memory>
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

// A child started now and finished later: one that prepares, then waits for what it is sent next (the block
// worker, harness/block_worker.h). Its stdin is a pipe that write() feeds; stdout and stderr are collected by
// finish(). An unfinished one is ended by the destructor: its stdin closes (a waiting child reads the end of
// its input), and it is killed with its process group if it has not left within 5 s.
class StartedProcess {
 public:
  // Starts argv as run_process does (opts.stdin_data is ignored). Throws EnvError if it cannot be started.
  StartedProcess(const std::vector<std::string>& argv, const RunOptions& opts);
  ~StartedProcess();
  StartedProcess(const StartedProcess&) = delete;
  StartedProcess& operator=(const StartedProcess&) = delete;
  // Writes all of `data` to the child's stdin within timeout_s. False when the child closed its stdin (it
  // exited, e.g. crashed) or the time ran out; finish() then says what happened to it.
  bool write(const std::string& data, double timeout_s);
  // The next line the child writes to stdout (without its newline), waiting at most timeout_s; nothing when
  // it closed stdout (exited) or the time ran out. What it wrote after that line stays for finish().
  std::optional<std::string> read_line(double timeout_s);
  // Closes its stdin, collects its output until it exits and returns as run_process does, with
  // opts.timeout_s counted from this call.
  RunResult finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Full path of a program in PATH, or empty.
std::string which(const std::string& program);

// Quote argv for display in messages and logs (never for a shell).
std::string argv_to_display(const std::vector<std::string>& argv);

}  // namespace kb
