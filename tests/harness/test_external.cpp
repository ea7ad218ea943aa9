// The external (l3) metric runner: a tiny shell script stands in for a training job; argv only, the
// toolchain in KBISECT_TOOLCHAIN_*, the last regex match counts, failures name the command and output.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "backends/toolchain.h"
#include "core/error.h"
#include "harness/external.h"
#include "core/fsutil.h"

namespace {

struct Dir {
  std::string path = kb::temp_dir("kb-external-test");
  ~Dir() { kb::remove_tree(path); }
};

std::string script(const Dir& d, const std::string& name, const std::string& body) {
  const std::string p = d.path + "/" + name;
  kb::write_file_atomic(p, "#!/bin/sh\n" + body);
  chmod(p.c_str(), 0755);
  return p;
}

}  // namespace

TEST(External, ParsesTheLastMatchPerRunWithTheToolchainInTheEnvironment) {
  Dir d;
  // Prints a value that depends on the run index and the toolchain flags (so the test sees both).
  script(d, "train.sh",
         "echo \"step 1 throughput: 1.0\"\n"
         "echo \"compiler=$KBISECT_TOOLCHAIN_COMPILER flags=$KBISECT_TOOLCHAIN_FLAGS arg=$1\" >&2\n"
         "case \"$KBISECT_TOOLCHAIN_FLAGS\" in *-O0*) base=50;; *) base=100;; esac\n"
         "echo \"final throughput: $((base + KBISECT_RUN_INDEX)).5 items/s\"\n");
  const std::string yaml = "external:\n  command: [./train.sh, \"$(touch pwned)\"]\n  parse: 'throughput: ([0-9.]+)'\n"
                           "  repeat: 3\n  timeout_s: 20\n  better: higher\n";
  kb::ExternalMetric m = kb::parse_external_metric(yaml, d.path + "/metric.yaml");
  EXPECT_EQ(m.repeat, 3);
  EXPECT_TRUE(m.higher_is_better);
  kb::Toolchain tc;
  tc.name = "kc";
  tc.backend = "cpu";
  tc.kind = "clang";
  tc.compiler = "clang++-19";
  tc.flags = {"-O3", "-march=native"};
  EXPECT_EQ(kb::run_external(m, &tc), (std::vector<double>{100.5, 101.5, 102.5}));
  tc.flags = {"-O0"};
  auto one = kb::run_external_once(m, &tc, 0);
  EXPECT_DOUBLE_EQ(one.value, 50.5);
  EXPECT_NE(one.output_tail.find("compiler=clang++-19 flags=-O0 arg=$(touch pwned)"), std::string::npos) << one.output_tail;
  EXPECT_FALSE(kb::file_exists(d.path + "/pwned"));  // argv, no shell
}

TEST(External, FailuresNameTheCommandAndTheOutput) {
  Dir d;
  script(d, "nomatch.sh", "echo 'loss: nan-ish'\n");
  script(d, "fails.sh", "echo 'CUDA error: out of memory' >&2\nexit 3\n");
  script(d, "slow.sh", "sleep 5\n");
  auto metric = [&](const std::string& prog, const std::string& extra = "") {
    return kb::parse_external_metric("command: [./" + prog + "]\nparse: 'loss: ([0-9.]+)'\n" + extra, d.path + "/m.yaml");
  };
  try {
    kb::run_external_once(metric("nomatch.sh"));
    ADD_FAILURE() << "no error";
  } catch (const kb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nomatch.sh"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nan-ish"), std::string::npos) << e.what();
  }
  try {
    kb::run_external_once(metric("fails.sh"));
    ADD_FAILURE() << "no error";
  } catch (const kb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exit 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kb::run_external_once(metric("slow.sh", "timeout_s: 0.5\n")), kb::Error);
}

TEST(External, ConfigErrorsNameTheField) {
  auto expect_error = [](const std::string& yaml, const std::string& needle) {
    try {
      kb::parse_external_metric(yaml, "/tmp/m.yaml");
      ADD_FAILURE() << "no error for " << yaml;
    } catch (const kb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/tmp/m.yaml:"), std::string::npos) << e.what();
    }
  };
  expect_error("command: [x]\nparse: 'no group'\n", "exactly one capture group");
  expect_error("command: [x]\nparse: '(a)(b)'\n", "exactly one capture group");
  expect_error("command: 'sh -c x'\nparse: '(a)'\n", "command");
  expect_error("command: [x]\nparse: '(a'\n", "not a valid regex");
  expect_error("command: [x]\nparse: '(a)\\99999999999'\n", "is not a valid regex: back-reference '99999999...' is above 1000");
  expect_error("command: [x]\nparse: '(a)'\nrepeat: 0\n", "repeat");
  expect_error("command: [x]\nparse: '(a)'\nbetter: faster\n", "better");
  expect_error("command: [x]\nparse: '(a)'\nshell: true\n", "shell");
}
