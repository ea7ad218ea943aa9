// The main() of every test executable (instead of GoogleTest's): the tests leave nothing in /tmp.
// It makes one directory for this process, kb-tests-XXXXXX directly under $TMPDIR (or /tmp, which keeps
// the UNIX socket paths that tests put there, the Slurm fixture's munge socket, under their 108 bytes),
// sets TMPDIR to it for the tests and every program they start, and runs the tests in a child process.
// When the child ends, however it ends (a failed assertion, an exception, a crash, a signal), the
// directory is removed; with KBISECT_KEEP_TEST_TMP=1 it stays when a test failed, and its path is printed.
// The exit status is the child's (a child killed by a signal is reported by the same signal).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/fsutil.h"
#include "tests/common/test_tmp.h"

namespace {

volatile sig_atomic_t g_child = 0;

// The parent only waits: a signal meant for the tests (CTest's timeout, ^C) is passed on to them.
void forward(int sig) {
  if (g_child > 0) kill(pid_t(g_child), sig);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  try {
    dir = kb::temp_dir("kb-tests-");
  } catch (const std::exception& e) {
    fprintf(stderr, "tests: %s\n", e.what());
    return 1;
  }
  // Others may pass through (not list) it, as through /tmp: the Slurm fixture's munged runs as the munge
  // user and reaches its socket in a directory below this one.
  chmod(dir.c_str(), 0711);
  setenv("TMPDIR", dir.c_str(), 1);
  fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "tests: fork failed: %s\n", strerror(errno));
    kb::remove_tree(dir);
    return 1;
  }
  if (pid == 0) {
    // The tests do not outlive this process (CTest kills it, not the child, on a timeout).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
  }
  g_child = pid;
  struct sigaction sa{};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "tests: waitpid failed: %s\n", strerror(errno));
      status = 1 << 8;
      break;
    }
  }
  const bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!passed && kbtest::keep_tmp_requested())
    fprintf(stderr, "tests: kept %s (KBISECT_KEEP_TEST_TMP)\n", dir.c_str());
  else
    kb::remove_tree(dir);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    fprintf(stderr, "tests: the test process died of signal %d (%s)\n", sig, strsignal(sig));
    fflush(nullptr);
    struct rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // the child's crash, not this process's
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
