#include <gtest/gtest.h>
#include <signal.h>

#include <optional>

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

TEST(Process, AChildThatLeavesWithoutReadingItsInputIsReportedNotFatal) {
  // More input than a pipe holds, to a child that reads none of it: the writes meet a closed pipe. Before,
  // that raised SIGPIPE and ended this program; now the child's own status is reported.
  RunOptions o;
  o.stdin_data = std::string(4 << 20, 'x');
  auto r = run_process({"sh", "-c", "exit 4"}, o);
  EXPECT_EQ(r.exit_code, 4);
}

TEST(StartedProcess, WritesReadsALineAndFinishesWithTheRest) {
  StartedProcess p({"sh", "-c", "read a; echo \"got $a\"; read b; echo \"then $b\"; echo err >&2; exit 2"}, {});
  ASSERT_TRUE(p.write("one\n", 10));
  EXPECT_EQ(p.read_line(10), std::optional<std::string>("got one"));
  ASSERT_TRUE(p.write("two\n", 10));
  const RunResult r = p.finish();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "then two\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_THROW(p.finish(), Error);
}

TEST(StartedProcess, OneThatIsGoneRefusesInputAndSaysWhyWhenFinished) {
  StartedProcess p({"sh", "-c", "echo bye >&2; kill -SEGV $$"}, {});
  EXPECT_FALSE(p.read_line(10).has_value()) << "it wrote no line before it ended";
  EXPECT_FALSE(p.write(std::string(1 << 20, 'x'), 10)) << "its stdin is closed";
  const RunResult r = p.finish();
  EXPECT_EQ(r.signal, 11);
  EXPECT_EQ(r.err, "bye\n");
}

TEST(StartedProcess, AnUnfinishedOneIsEndedByItsDestructor) {
  pid_t pid = 0;
  {
    // Waits for its input's end, as a parked block worker does; the destructor closes its stdin.
    StartedProcess p({"sh", "-c", "echo $$; cat > /dev/null"}, {});
    const auto line = p.read_line(10);
    ASSERT_TRUE(line.has_value());
    pid = std::stoi(*line);
  }
  EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " is still there";
  {
    // One that ignores the end of its input is killed after the grace time.
    StartedProcess p({"sh", "-c", "echo $$; exec sleep 60"}, {});
    const auto line = p.read_line(10);
    ASSERT_TRUE(line.has_value());
    pid = std::stoi(*line);
  }
  EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " is still there";
}
