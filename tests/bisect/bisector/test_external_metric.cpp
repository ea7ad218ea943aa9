// Bisecting on an external (tier l3) metric: the user's command runs with each commit's toolchain in
// KBISECT_TOOLCHAIN_* and prints a throughput; the bisector decides on the parsed values. Here the
// "training job" is a small script whose throughput halves when the toolchain's flags say -O1 (a stand-in
// for a job that builds with the compiler and runs), with a little run-to-run variation.
#include <gtest/gtest.h>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "tests/common/bisect_fixture.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

using namespace kb;
using namespace kb::bisect;

namespace {

const char* kJob = R"SH(#!/bin/sh
# throughput of a pretend training job built with the toolchain under test
case " $KBISECT_TOOLCHAIN_FLAGS " in
  *" -O1 "*) base=50 ;;
  *) base=100 ;;
esac
echo "step 100 loss 2.31"
awk -v b="$base" -v i="$KBISECT_RUN_INDEX" 'BEGIN { printf "throughput: %.3f samples/s\n", b * (1 + 0.002 * (i % 5)) }'
echo "step 200 loss 2.07"
)SH";

std::string external_config(const kbtest::GitRepo& r, const std::string& good, const std::string& bad,
                            const std::string& metric) {
  return fmt::format(
      "name: ext\nrepo: {}\ngood: {}\nbad: {}\nprovider: {{in_tree: tc.yaml}}\n{}metric: {}\nthreshold: 5%\n{}",
      r.path(), good, bad, kbtest::kSmallCase, metric, kbtest::budget_lines({20, 8, 60}));
}

}  // namespace

TEST(ExternalMetric, BisectsOnAUserCommandsThroughput) {
  if (which("clang++-19").empty()) GTEST_SKIP() << "needs clang++-19";
  kbtest::GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", kbtest::cpu_toolchain("-O3")}}, "good"));
  s.push_back(r.commit({{"README", "docs\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", kbtest::cpu_toolchain("-O1")}}, "lower the optimization level"));
  s.push_back(r.commit({{"NOTES", "x\n"}}, "notes"));
  s.push_back(r.commit({{"NOTES2", "y\n"}}, "bad"));
  const std::string job = r.tmp() + "/job.sh";
  write_file_atomic(job, kJob);
  ASSERT_TRUE(run_process({"chmod", "+x", job}, {}).ok());

  const std::string metric = fmt::format(
      "{{external: {{command: [{}], parse: 'throughput: ([0-9.]+)', better: higher}}}}", job);
  BisectConfig cfg = parse_bisect_config(external_config(r, s.front(), s.back(), metric), r.tmp() + "/ext.yaml");
  ASSERT_EQ(cfg.metric, Metric::external);
  BisectRun run = kb::bisect::bisect(cfg, r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[2]);
  // Identical kernel code says nothing about the job: every decided commit was measured.
  for (const auto& st : run.outcome.steps) EXPECT_NE(st.how, "same-code") << st.sha;
  // Throughput halved: the effect in time units (inverted) is about +100%.
  ASSERT_TRUE(run.outcome.verify.has_value());
  EXPECT_GT(run.outcome.verify->decision.effect, 0.5);
}

TEST(ExternalMetric, ConfigErrorsNameTheField) {
  kbtest::GitRepo r;
  const std::string a = r.commit({{"tc.yaml", kbtest::cpu_toolchain("-O3")}}, "a");
  auto expect_error = [&](const std::string& metric, const std::string& needle) {
    try {
      parse_bisect_config(external_config(r, a, a, metric), "cfg.yaml");
      ADD_FAILURE() << "no error for " << metric;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{external: {command: [./x], parse: 'no group'}}", "capture group");
  expect_error("{external: {parse: 'v: ([0-9]+)'}}", "command");
  expect_error("{other: 1}", "external");
}
