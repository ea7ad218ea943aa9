// Tier budgets in sweeps (`tiers: {l1: {budget_s: N}}`): a tier's measuring time is split over its
// runnable cases; other tiers keep their settings; bad budgets name file:line:col.
#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/sweep.h"

namespace {

const char* kSweep = R"(name: tiers
toolchains: [clang-19]
measure: {max_time_s: 3, min_time_s: 0.5, warmup_s: 0.2}
tiers: {l1: {budget_s: 1}, l2: {budget_s: 600}}
benchmarks:
  - kernel: matmul_tiled
    backend: cpu
    dtypes: [f32]
    shapes: [[64, 64, 64], [128, 64, 64]]
    tier: l1
  - kernel: matmul_tiled
    backend: cpu
    dtypes: [f32]
    shapes: [[256, 256, 256]]
    tier: l2
)";

}  // namespace

TEST(Tiers, BudgetIsSplitOverTheTiersCases) {
  kb::Sweep sw = kb::parse_sweep(kSweep, "/tmp/tiers.yaml");
  ASSERT_EQ(sw.cases.size(), 3u);
  EXPECT_DOUBLE_EQ(sw.tier_budget_s.at("l1"), 1.0);
  for (const auto& pc : sw.cases) {
    if (pc.c.tier == "l1") {
      EXPECT_DOUBLE_EQ(pc.measure.max_time_s, 0.5);  // 1 s over two cases
      EXPECT_DOUBLE_EQ(pc.measure.min_time_s, 0.5);
      EXPECT_DOUBLE_EQ(pc.measure.warmup_s, 0.125);
    } else {
      EXPECT_DOUBLE_EQ(pc.measure.max_time_s, 3.0);  // 600 s for one case: its own cap is lower
      EXPECT_DOUBLE_EQ(pc.measure.warmup_s, 0.2);
    }
  }
  // The same split whatever --tier keeps (the budget is per tier).
  kb::SweepOptions only_l1;
  only_l1.tier = "l1";
  for (const auto& pc : kb::parse_sweep(kSweep, "/tmp/tiers.yaml", only_l1).cases) EXPECT_DOUBLE_EQ(pc.measure.max_time_s, 0.5);
}

TEST(Tiers, BadBudgetsNameTheField) {
  auto expect_error = [](const std::string& tiers, const std::string& needle) {
    std::string text = kSweep;
    const std::string original = "tiers: {l1: {budget_s: 1}, l2: {budget_s: 600}}";
    text.replace(text.find(original), original.size(), tiers);
    try {
      kb::parse_sweep(text, "/tmp/tiers.yaml");
      ADD_FAILURE() << "no error for " << tiers;
    } catch (const kb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/tmp/tiers.yaml:4:"), std::string::npos) << e.what();
    }
  };
  expect_error("tiers: {l4: {budget_s: 1}}", "l4");
  expect_error("tiers: {l1: {budget_s: -1}}", "tiers.l1.budget_s");
  expect_error("tiers: {l1: {budget_s: soon}}", "tiers.l1.budget_s");
  expect_error("tiers: {l1: {budget: 1}}", "budget");
  expect_error("tiers: [l1]", "tiers");
}
