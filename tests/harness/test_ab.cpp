// `ab` end to end on real toolchains: g++ 12 vs clang-19 at -O3 -march=native on the bf16 matmul_tiled
// small config differ ~10x here (clang-14 vs clang-19 on the fp32 best config differed by only ~0.3-2.6%
// in runs on this VM, too little for a robust test) and must be called different; one toolchain against
// itself must not be called worse. The verdicts are statistical decisions, not timing thresholds.
#include <cstdio>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "backends/toolchain.h"
#include "harness/ab.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

using namespace kb;
using stats::Verdict;

namespace {

const std::string kSweep = std::string(KBISECT_SOURCE_DIR) + "/tests/data/compare/ab_matmul.yaml";

bool have(const char* prog) { return !which(prog).empty(); }

void print(const AbRun& r) { std::printf("%s", render_table(r.comparison).c_str()); }

}  // namespace

TEST(Ab, GccVsClang19IsDifferent) {
  if (!have("g++") || !have("clang++-19")) GTEST_SKIP() << "needs g++ and clang++-19";
  AbOptions o;
  o.sweep_file = kSweep;
  o.toolchain_a = "g++";
  o.toolchain_b = "clang-19";
  o.filter = "bf16/256x256x256";
  o.budget_s = 20;
  const std::string dir = temp_dir("kb-ab-test");
  o.out_dir = dir;
  auto r = run_ab(o);
  print(r);
  ASSERT_EQ(r.comparison.cases.size(), 1u);
  const auto& c = r.comparison.cases[0];
  ASSERT_TRUE(c.compared) << c.reason;
  EXPECT_TRUE(c.decision.verdict == Verdict::worse || c.decision.verdict == Verdict::better)
      << stats::to_string(c.decision.verdict);
  // The result file: kind ab, both cases with raw samples, the pairs and the verdict in extra.
  auto j = nlohmann::json::parse(read_file(r.results_path));
  EXPECT_EQ(j["kind"], "ab");
  ASSERT_EQ(j["cases"].size(), 2u);
  EXPECT_EQ(j["cases"][0]["samples_s"].size(), j["cases"][1]["samples_s"].size());
  EXPECT_GE(j["cases"][0]["samples_s"].size(), 16u);
  const auto& p = j["extra"]["pairs"][0];
  EXPECT_EQ(p["pairs_s"].size(), j["cases"][0]["samples_s"].size());
  EXPECT_EQ(p["decision"]["verdict"], stats::to_string(c.decision.verdict));
  EXPECT_TRUE(j["cases"][0]["conditions"]["interleaved"].get<bool>());
  remove_tree(dir);
}

TEST(Ab, SameToolchainIsNotWorse) {
  if (!have("clang++-19")) GTEST_SKIP() << "needs clang++-19";
  // Identical code is called worse at a rate of about alpha / 2 by design (bench/sensitivity measures that
  // rate); at the default alpha 0.05 this test failed about once in 40 runs. At 0.01 it checks the same
  // thing, that nothing systematic separates two loads of one build, and fails about once in 200.
  AbOptions o;  // default threshold 0.5%
  o.alpha = 0.01;
  o.sweep_file = kSweep;
  o.toolchain_a = "clang-19";
  o.toolchain_b = "clang-19";
  o.filter = "384x384x384";
  o.budget_s = 25;
  auto r = run_ab(o);
  print(r);
  ASSERT_EQ(r.comparison.cases.size(), 1u);
  const auto& c = r.comparison.cases[0];
  ASSERT_TRUE(c.compared) << c.reason;
  EXPECT_NE(c.decision.verdict, Verdict::worse);
  EXPECT_EQ(exit_code_for(r.comparison), 0);
}

TEST(AbCli, ExitCodeFollowsDirection) {
  if (!have("g++") || !have("clang++-19")) GTEST_SKIP() << "needs g++ and clang++-19";
  const std::string bin = std::string(KBISECT_BINARY_DIR) + "/kbisect";
  RunOptions ro;
  ro.timeout_s = 300;
  // B = g++ is the slower one on bf16 (~10x here): exit 1 (slower beyond the threshold). (clang-14 vs
  // clang-19 on fp32 differ by 0-2.6% on this VM: not a robust "slower".)
  auto slow = run_process({bin, "ab", kSweep, "--toolchain", "clang-19", "--toolchain", "g++", "--filter",
                           "bf16/256x256x256", "--budget-s", "15"}, ro);
  EXPECT_EQ(slow.exit_code, 1) << slow.out << slow.err;
  EXPECT_NE(slow.out.find("worse"), std::string::npos) << slow.out;
  // Bad input: one toolchain only -> 2.
  auto bad = run_process({bin, "ab", kSweep, "--toolchain", "clang-19"}, ro);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  auto missing = run_process({bin, "ab", "/nonexistent/sweep.yaml", "--toolchain", "clang-19", "--toolchain", "clang-14"}, ro);
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  // A first look after the last one -> 2, the values named.
  auto looks = run_process({bin, "ab", kSweep, "--toolchain", "clang-19", "--toolchain", "g++", "--min-blocks", "200"}, ro);
  EXPECT_EQ(looks.exit_code, 2) << looks.err;
  EXPECT_NE(looks.err.find("min (200) <= max (160)"), std::string::npos) << looks.err;
}
