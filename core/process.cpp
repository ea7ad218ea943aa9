#include "core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/error.h"

extern char** environ;

namespace kb {

std::string tail(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t start = text.size() - max_bytes;
  size_t nl = text.find('\n', start);
  if (nl != std::string::npos && nl + 1 < text.size() && nl - start < max_bytes / 4) start = nl + 1;
  return "..." + text.substr(start);
}

std::string RunResult::status_text() const {
  if (timed_out) return fmt::format("timed out after {:.0f} s", wall_s);
  if (signal) return fmt::format("signal {} ({})", signal, strsignal(signal));
  return fmt::format("exit {}", exit_code);
}

std::string which(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= p.size()) {
    size_t end = p.find(':', pos);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(pos, end - pos);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + program;
    struct stat st;
    if (stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(cand.c_str(), X_OK) == 0) return cand;
    pos = end + 1;
  }
  return "";
}

std::string argv_to_display(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?[]{}!#~") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

namespace {

// write(2) that answers EPIPE instead of raising SIGPIPE (which would end this program) when the child has
// closed its stdin, e.g. by exiting before it read everything it was sent.
ssize_t write_no_sigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const ssize_t w = write(fd, data, n);
  const int saved = errno;
  if (w < 0 && errno == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_only, nullptr, &zero);  // the SIGPIPE this write raised, pending while blocked
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return w;
}

void append_capped(std::string& buf, const char* data, size_t n, size_t cap) {
  buf.append(data, n);
  if (buf.size() > cap + cap / 2) buf.erase(0, buf.size() - cap);
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC) != 0) throw EnvError(fmt::format("pipe failed: {}", strerror(errno)));
  }
  ~Pipe() { close_both(); }
  void close_end(int i) {
    if (fd[i] >= 0) close(fd[i]);
    fd[i] = -1;
  }
  void close_both() { close_end(0); close_end(1); }
};

// Environment: inherited, minus unset, plus set.
std::vector<std::string> child_environment(const RunOptions& opts) {
  std::set<std::string> drop(opts.env_unset.begin(), opts.env_unset.end());
  for (const auto& [k, v] : opts.env_set) drop.insert(k);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    std::string k = kv.substr(0, kv.find('='));
    if (!drop.count(k)) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : opts.env_set) env_strings.push_back(k + "=" + v);
  return env_strings;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts the child in its own process group with stdin/stdout/stderr on the pipes and default signals.
pid_t spawn_child(const std::string& exe, const std::vector<std::string>& argv, const RunOptions& opts, Pipe& in,
                  Pipe& out, Pipe& err) {
  std::vector<std::string> env_strings = child_environment(opts);
  std::vector<char*> envp = c_strings(env_strings);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp = c_strings(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (opts.stdin_data) {
    posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opts.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, def;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &def);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argvp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw EnvError(fmt::format("cannot start {}: {}", argv_to_display(argv), strerror(rc)));
  return pid;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Feeds stdin and collects stdout/stderr until both output pipes close, killing the group on timeout.
void pump_pipes(pid_t pid, const RunOptions& opts, Clock::time_point t0, Pipe& in, Pipe& out, Pipe& err,
                RunResult& res, bool& killed) {
  size_t in_off = 0;
  char buf[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    int wait_ms = 200;
    if (opts.timeout_s > 0 && !killed) {
      double left = opts.timeout_s - seconds_since(t0);
      if (left <= 0) {
        res.timed_out = true;
        killed = true;
        kill(-pid, SIGKILL);
      } else {
        wait_ms = std::min(200, int(left * 1000) + 1);
      }
    }
    pollfd fds[3];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (out.fd[0] >= 0) { idx_out = n; fds[n++] = {out.fd[0], POLLIN, 0}; }
    if (err.fd[0] >= 0) { idx_err = n; fds[n++] = {err.fd[0], POLLIN, 0}; }
    if (in.fd[1] >= 0) { idx_in = n; fds[n++] = {in.fd[1], POLLOUT, 0}; }
    int pr = poll(fds, n, wait_ms);
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    auto drain = [&](int idx, Pipe& p, std::string& dst) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t r = read(p.fd[0], buf, sizeof buf);
      if (r > 0) append_capped(dst, buf, size_t(r), opts.max_capture);
      else if (r == 0 || (errno != EINTR && errno != EAGAIN)) p.close_end(0);
    };
    drain(idx_out, out, res.out);
    drain(idx_err, err, res.err);
    if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const std::string& data = *opts.stdin_data;
      ssize_t w = write_no_sigpipe(in.fd[1], data.data() + in_off, data.size() - in_off);
      if (w > 0) in_off += size_t(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) in.close_end(1);
      if (in_off >= data.size()) in.close_end(1);
    }
  }
}

// Pipes closed: the child exited or closed them; still enforce the timeout while waiting.
int wait_child(pid_t pid, const RunOptions& opts, Clock::time_point t0, RunResult& res, bool& killed) {
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (opts.timeout_s > 0 && seconds_since(t0) > opts.timeout_s && !killed) {
      res.timed_out = true;
      killed = true;
      kill(-pid, SIGKILL);
    }
    usleep(2000);
  }
  return status;
}

}  // namespace

namespace {

// After the pipes closed: waits for the exit (the timeout still counting from t0), ends what is left of the
// child's process group and fills the status.
RunResult finish_child(pid_t pid, const RunOptions& opts, Clock::time_point t0, RunResult& res, bool& killed) {
  const int status = wait_child(pid, opts, t0, res, killed);
  // Grandchildren left in the group (e.g. a build's daemons) are ended too.
  kill(-pid, SIGKILL);
  res.wall_s = seconds_since(t0);
  if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    res.signal = WTERMSIG(status);
    if (res.timed_out && res.signal == SIGKILL) res.signal = 0;
  }
  return res;
}

std::string program_path(const std::vector<std::string>& argv) {
  if (argv.empty()) throw InputError("run_process: empty argv");
  std::string exe = which(argv[0]);
  if (exe.empty()) throw EnvError(fmt::format("program not found: {}", argv[0]));
  return exe;
}

}  // namespace

RunResult run_process(const std::vector<std::string>& argv, const RunOptions& opts) {
  const std::string exe = program_path(argv);
  Pipe out, err, in;
  const auto t0 = Clock::now();
  const pid_t pid = spawn_child(exe, argv, opts, in, out, err);
  out.close_end(1);
  err.close_end(1);
  in.close_end(0);
  if (!opts.stdin_data) in.close_end(1);
  else fcntl(in.fd[1], F_SETFL, O_NONBLOCK);

  RunResult res;
  bool killed = false;
  pump_pipes(pid, opts, t0, in, out, err, res, killed);
  return finish_child(pid, opts, t0, res, killed);
}

struct StartedProcess::Impl {
  Pipe in, out, err;
  pid_t pid = -1;
  RunOptions opts;
  bool finished = false;
  std::string out_read;  // stdout read by read_line past the line it returned
};

StartedProcess::StartedProcess(const std::vector<std::string>& argv, const RunOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  const std::string exe = program_path(argv);
  Impl& p = *impl_;
  p.opts = opts;
  p.opts.stdin_data = std::string();  // stdin is the pipe write() feeds
  p.pid = spawn_child(exe, argv, p.opts, p.in, p.out, p.err);
  p.out.close_end(1);
  p.err.close_end(1);
  p.in.close_end(0);
  fcntl(p.in.fd[1], F_SETFL, O_NONBLOCK);
}

StartedProcess::~StartedProcess() {
  Impl& p = *impl_;
  if (p.finished || p.pid < 0) return;
  // Not finished: its stdin closes, which a waiting child reads as the end; one that does not leave within
  // a few seconds is killed.
  p.in.close_end(1);
  p.out.close_both();
  p.err.close_both();
  RunOptions grace;
  grace.timeout_s = 5;
  RunResult res;
  bool killed = false;
  wait_child(p.pid, grace, Clock::now(), res, killed);
  kill(-p.pid, SIGKILL);
}

bool StartedProcess::write(const std::string& data, double timeout_s) {
  Impl& p = *impl_;
  if (p.in.fd[1] < 0) return false;
  const auto t0 = Clock::now();
  size_t off = 0;
  while (off < data.size()) {
    const double left = timeout_s - seconds_since(t0);
    if (left <= 0) return false;
    pollfd fd{p.in.fd[1], POLLOUT, 0};
    const int pr = poll(&fd, 1, std::min(200, int(left * 1000) + 1));
    if (pr < 0 && errno != EINTR) return false;
    if (pr <= 0) continue;
    const ssize_t w = write_no_sigpipe(p.in.fd[1], data.data() + off, data.size() - off);
    if (w > 0) off += size_t(w);
    else if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return true;
}

std::optional<std::string> StartedProcess::read_line(double timeout_s) {
  Impl& p = *impl_;
  const auto t0 = Clock::now();
  char buf[4096];
  for (;;) {
    if (const auto nl = p.out_read.find('\n'); nl != std::string::npos) {
      std::string line = p.out_read.substr(0, nl);
      p.out_read.erase(0, nl + 1);
      return line;
    }
    const double left = timeout_s - seconds_since(t0);
    if (p.out.fd[0] < 0 || left <= 0) return std::nullopt;
    pollfd fd{p.out.fd[0], POLLIN, 0};
    const int pr = poll(&fd, 1, std::min(200, int(left * 1000) + 1));
    if (pr < 0 && errno != EINTR) return std::nullopt;
    if (pr <= 0) continue;
    const ssize_t r = read(p.out.fd[0], buf, sizeof buf);
    if (r > 0) p.out_read.append(buf, size_t(r));
    else if (r == 0 || (errno != EINTR && errno != EAGAIN)) return std::nullopt;
  }
}

RunResult StartedProcess::finish() {
  Impl& p = *impl_;
  if (p.finished) throw Error("internal: StartedProcess::finish called twice");
  p.finished = true;
  p.in.close_end(1);
  p.opts.stdin_data.reset();
  const auto t0 = Clock::now();
  RunResult res;
  res.out = std::move(p.out_read);
  bool killed = false;
  pump_pipes(p.pid, p.opts, t0, p.in, p.out, p.err, res, killed);
  return finish_child(p.pid, p.opts, t0, res, killed);
}

}  // namespace kb
