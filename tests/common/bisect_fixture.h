// Temporary git repositories of toolchain specs for the bisector tests, made through the project's process
// runner with fixed author/committer dates and identity.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/test_tmp.h"

namespace kbtest {

// The kbisect binary of this build.
inline const std::string kKbisect = KBISECT_BINARY_DIR "/kbisect";

class GitRepo {
 public:
  GitRepo() : dir_(kb::temp_dir("kb-bisect-test")) {
    home_ = dir_ + "/home";
    root_ = dir_ + "/repo";
    kb::make_dirs(home_);
    kb::make_dirs(root_);
    git({"init", "-q", "-b", "main"});
  }
  ~GitRepo() {
    kbtest::remove_test_dir(dir_);
  }
  GitRepo(const GitRepo&) = delete;
  GitRepo& operator=(const GitRepo&) = delete;

  const std::string& path() const { return root_; }
  const std::string& tmp() const { return dir_; }

  std::string git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "-C", root_, "-c", "user.name=Test Author", "-c",
                                     "user.email=author@example.com", "-c", "commit.gpgsign=false"};
    argv.insert(argv.end(), args.begin(), args.end());
    kb::RunOptions o;
    o.timeout_s = 60;
    const std::string d = fmt::format("@{} +0000", 1704067200 + 3600 * ncommits_);
    o.env_set = {{"HOME", home_},           {"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"},
                 {"LC_ALL", "C"},           {"GIT_AUTHOR_DATE", d},       {"GIT_COMMITTER_DATE", d}};
    o.env_unset = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"};
    kb::RunResult r = kb::run_process(argv, o);
    if (!r.ok()) throw std::runtime_error(kb::argv_to_display(argv) + " failed: " + r.err);
    return r.out;
  }

  // Writes the files (path -> content; empty content removes the file) and commits them; returns the sha.
  std::string commit(const std::map<std::string, std::string>& files, const std::string& subject) {
    for (const auto& [p, content] : files) {
      const std::string full = root_ + "/" + p;
      if (content.empty()) {
        if (kb::file_exists(full)) git({"rm", "-q", p});
        continue;
      }
      kb::write_file_atomic(full, content);
      git({"add", p});
    }
    ++ncommits_;
    git({"commit", "-q", "--allow-empty", "-m", subject});
    std::string sha = git({"rev-parse", "HEAD"});
    while (!sha.empty() && (sha.back() == '\n' || sha.back() == '\r')) sha.pop_back();
    return sha;
  }

 private:
  std::string dir_, home_, root_;
  int ncommits_ = 0;
};

// A CPU toolchain spec with the given flags, as an in-tree YAML file.
inline std::string cpu_toolchain(const std::string& flags, const std::string& compiler = "clang++-19") {
  std::string f;
  for (size_t i = 0, j; i < flags.size(); i = j + 1) {
    j = flags.find(' ', i);
    if (j == std::string::npos) j = flags.size();
    if (j > i) f += (f.empty() ? "" : ", ") + ("\"" + flags.substr(i, j - i) + "\"");
  }
  return fmt::format("name: kc\nbackend: cpu\nkind: clang\ncompiler: {}\nflags: [{}]\n", compiler, f);
}

// A small matmul case (fast to compile and run at any -O level): a config's benchmarks: block.
inline constexpr const char* kSmallCase = R"(benchmarks:
  - kernel: matmul_tiled
    backend: cpu
    params: {BM: 32, BN: 64, BK: 64, MR: 4, NR: 16}
    dtypes: [f32]
    shapes: [[64, 64, 64]]
)";

// Small budgets for test bisections: the budgets: and measure: lines.
struct TestBudgets {
  int max_builds = 20;
  int min_samples = 8;
  int max_step_s = 20;
};
inline std::string budget_lines(const TestBudgets& b = {}) {
  return fmt::format(
      "budgets: {{max_builds: {}, max_samples_per_step: 64}}\n"
      "measure: {{min_samples: {}, max_step_s: {}, warmup_s: 0.01}}\n",
      b.max_builds, b.min_samples, b.max_step_s);
}

// A bisection config of the small case over r's commits good..bad; extra lines go last.
inline std::string bisect_config(const GitRepo& r, const std::string& good, const std::string& bad,
                                 const std::string& provider, const std::string& metric, const std::string& threshold,
                                 const std::string& extra = "", const TestBudgets& b = {}) {
  return fmt::format("name: t\nrepo: {}\ngood: {}\nbad: {}\nprovider: {}\n{}metric: {}\nthreshold: {}\n{}{}", r.path(),
                     good, bad, provider, kSmallCase, metric, threshold, budget_lines(b), extra);
}

// A descent fixture's outer "build": a compiler wrapper with the flags of the inner commit named in pin.txt
// (the inner repository at `inner` holds flags.txt at each commit).
inline std::string pin_build_script(const std::string& inner) {
  return fmt::format(R"SH(#!/bin/sh
set -e
pin=$(cut -d' ' -f1 pin.txt)
flags=$(git -C '{}' show "$pin:flags.txt")
printf '#!/bin/sh\nexec clang++-19 %s "$@"\n' "$flags" > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
)SH",
                     inner);
}

// A descent fixture's inner commit: its in-tree CPU toolchain and the flags the outer build reads.
inline std::map<std::string, std::string> pin_inner_files(const std::string& flags) {
  return {{"tc.yaml", cpu_toolchain(flags)}, {"flags.txt", flags + "\n"}};
}

// Runs `kbisect bisect CONFIG --workdir WORKDIR` (stdout and stderr to `log`, `env` added), polls `ready` every
// 50 ms (for at most 2 minutes; it may throw, e.g. reading a journal being written: that counts as not ready)
// and kills kbisect with SIGKILL once it says so. True when kbisect died of that kill (not finished before).
inline bool kill_bisect_when(const std::string& config, const std::string& workdir, const std::string& log,
                             const std::map<std::string, std::string>& env, const std::function<bool()>& ready) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execl(kKbisect.c_str(), kKbisect.c_str(), "bisect", config.c_str(), "--workdir", workdir.c_str(), (char*)nullptr);
    _exit(127);
  }
  bool killed = false;
  for (int i = 0; i < 2400 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bool now = false;
    try {
      now = ready();
    } catch (...) {
    }
    if (now) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  if (!killed) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return killed && WIFSIGNALED(status);
}

// Writes text into r's temporary directory as name; returns the path.
// How many times each non-empty line occurs in `text` (a log of completed builds, one sha a line).
inline std::map<std::string, int> count_lines(const std::string& text) {
  std::map<std::string, int> m;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    if (j > i) ++m[text.substr(i, j - i)];
    i = j + 1;
  }
  return m;
}

inline std::string write_tmp(const GitRepo& r, const std::string& text, const std::string& name = "bisect.yaml") {
  const std::string p = r.tmp() + "/" + name;
  kb::write_file_atomic(p, text);
  return p;
}

}  // namespace kbtest
