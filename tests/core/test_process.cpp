#include <gtest/gtest.h>

#include "core/error.h"
#include "core/process.h"

using namespace kb;

TEST(Process, CapturesOutputAndExitCode) {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status_text(), "exit 3");
}

TEST(Process, ArgvIsNeverInterpretedByAShell) {
  auto r = run_process({"printf", "%s|", "$(touch /tmp/kbisect-pwned)", "a;b", "'q'"});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "$(touch /tmp/kbisect-pwned)|a;b|'q'|");
}

TEST(Process, TimeoutKillsTheProcessGroup) {
  RunOptions o;
  o.timeout_s = 0.5;
  auto r = run_process({"sh", "-c", "sleep 30 & sleep 30"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_s, 20);  // generous: only checks that we did not wait for the sleeps
  EXPECT_NE(r.status_text().find("timed out"), std::string::npos);
}

TEST(Process, SignalIsReported) {
  auto r = run_process({"sh", "-c", "kill -SEGV $$"});
  EXPECT_EQ(r.signal, 11);
  EXPECT_NE(r.status_text().find("signal 11"), std::string::npos);
}

TEST(Process, EnvironmentAndStdin) {
  RunOptions o;
  o.env_set["KB_TEST_VALUE"] = "x y$z";
  o.stdin_data = std::string("hello\n");
  auto r = run_process({"sh", "-c", "printf '%s' \"$KB_TEST_VALUE\"; cat"}, o);
  EXPECT_EQ(r.out, "x y$zhello\n");
}

TEST(Process, MissingProgramIsEnvError) {
  EXPECT_THROW(run_process({"/nonexistent/kbisect-compiler"}), EnvError);
  EXPECT_THROW(run_process({"kbisect-no-such-program-xyz"}), EnvError);
}
