// Change points (E-Divisive + permutation test) on nightly series: steps found where they are, flat
// noisy series left alone (seeded), a slow creep caught where pairwise compare between consecutive
// nightlies never says "worse", determinism, bad input.
#include <gtest/gtest.h>

#include "tests/common/case_fixture.h"

#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "stats/changepoint.h"
#include "harness/compare.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "nightly/history.h"
#include "stats/noise.h"
#include "stats/stats.h"

using namespace kb;

TEST(ChangePoint, FindsAStepWhereItIs) {
  auto v = synthetic_nightly(30, 0.005, 11, 20, 0.03);
  auto cps = detect_change_points(v, {});
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_NEAR(cps[0].index, 20, 1);
  EXPECT_NEAR(cps[0].rel_change, 0.03, 0.006);
  EXPECT_LE(cps[0].p_value, 0.01);
  EXPECT_NEAR(cps[0].before, 1e-3, 1e-5);
}

TEST(ChangePoint, FindsTwoSteps) {
  auto v = synthetic_nightly(40, 0.003, 5, 12, 0.02);
  for (int i = 28; i < 40; ++i) v[size_t(i)] *= 0.97;  // a later fix
  auto cps = detect_change_points(v, {});
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_NEAR(cps[0].index, 12, 1);
  EXPECT_NEAR(cps[1].index, 28, 1);
  EXPECT_GT(cps[0].rel_change, 0.01);
  EXPECT_LT(cps[1].rel_change, -0.01);
}

// A flat series with 1% night-to-night noise: no alert, for this seed and at most ~alpha of 200 seeds.
TEST(ChangePoint, FlatNoisySeriesRaisesNoAlert) {
  EXPECT_TRUE(detect_change_points(synthetic_nightly(30, 0.01, 42), {}).empty());
  int alerts = 0;
  for (uint64_t s = 1; s <= 200; ++s) alerts += !detect_change_points(synthetic_nightly(30, 0.01, 1000 + s), {}).empty();
  // alpha = 0.01 per test: expected ~2 of 200; 6 allows for the binomial spread (P(X>6) ~ 0.5%).
  EXPECT_LE(alerts, 6);
}

TEST(ChangePoint, DeterministicForASeedAndHonoursMinRelChange) {
  auto v = synthetic_nightly(30, 0.01, 3, 15, 0.02);
  ChangePointConfig c;
  auto a = detect_change_points(v, c), b = detect_change_points(v, c);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].p_value, b[i].p_value);
  }
  ASSERT_FALSE(a.empty());
  c.min_rel_change = 0.05;  // bigger than the step
  EXPECT_TRUE(detect_change_points(v, c).empty());
}

TEST(ChangePoint, EdgeCasesAndBadInput) {
  EXPECT_TRUE(detect_change_points({}, {}).empty());
  EXPECT_TRUE(detect_change_points({1, 2, 3, 4, 5}, {}).empty());  // shorter than 2 * min_segment
  EXPECT_TRUE(detect_change_points(std::vector<double>(20, 1e-3), {}).empty());  // constant
  EXPECT_THROW(detect_change_points({1, 2, -1, 3, 4, 5, 6}, {}), InputError);
  EXPECT_THROW(detect_change_points({1, 2, NAN, 3, 4, 5, 6}, {}), InputError);
  ChangePointConfig bad;
  bad.min_segment = 1;
  EXPECT_THROW(detect_change_points({1, 2}, bad), InputError);
  bad = {};
  bad.alpha = 0;
  EXPECT_THROW(detect_change_points({1, 2}, bad), InputError);
  // A huge step right at the minimum segment length from the end is found.
  std::vector<double> v(12, 1.0);
  for (int i = 9; i < 12; ++i) v[size_t(i)] = 1.2;
  auto cps = detect_change_points(v, {});
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0].index, 9);
}

// The scenario: +0.2% per night over 30 nights. Each nightly measures 1000 samples with 1% CV
// per sample (this machine's measured per-sample noise) around the night's true time, plus a 0.05%
// night-to-night jitter (a runner with locked clocks). Pairwise compare of consecutive nightlies
// (threshold 0.5%) never says "worse" (each step is 0.2% < 0.5%); the change-point scan of the history
// (recorded in SQLite, read back as a series) flags a slowdown.
TEST(ChangePoint, SlowCreepCaughtWherePairwiseCompareStaysSame) {
  const int kNights = 30, kSamples = 1000;
  std::string dir = temp_dir("kbisect-creep-test");
  History h(dir + "/h.sqlite");
  stats::Rng jitter(99);
  std::vector<SampleSet> sets;
  for (int night = 0; night < kNights; ++night) {
    double t = 1e-3 * std::pow(1.002, night) * std::exp(0.0005 * jitter.normal());
    NoiseModel nm;
    nm.cv = 0.01;
    nm.seed = 500 + uint64_t(night);
    NoiseGenerator gen(nm);
    RunResults r;
    r.name = "creep";
    r.started = fmt::format("2026-11-{:02d}T01:00:00Z", night + 1);
    CaseResult c = kbtest::ok_case("matmul_tiled", {512, 512, 512}, "clang-nightly", gen.samples(t, kSamples));
    r.cases.push_back(c);
    h.record(r, {});
    sets.push_back(sample_set_from_results(r, r.started));
  }
  int worse = 0, same = 0;
  for (int night = 1; night < kNights; ++night) {
    auto cmp = compare_sets(sets[size_t(night - 1)], sets[size_t(night)], CompareOptions{});
    ASSERT_EQ(cmp.cases.size(), 1u);
    ASSERT_TRUE(cmp.cases[0].compared) << cmp.cases[0].reason;
    worse += cmp.cases[0].decision.verdict == stats::Verdict::worse;
    same += cmp.cases[0].decision.verdict == stats::Verdict::same;
  }
  std::cout << fmt::format("creep: consecutive compares: {} same, {} worse, {} of {} other\n", same, worse,
                           kNights - 1 - same - worse, kNights - 1);
  EXPECT_EQ(worse, 0) << "pairwise compare flagged the creep on some night";
  EXPECT_EQ(same, kNights - 1) << "every consecutive pair is 'same'";

  auto series = h.series(".*");
  ASSERT_EQ(series.size(), size_t(kNights));
  auto cps = detect_in_series(series, {});
  ASSERT_FALSE(cps.empty()) << "the creep was not caught";
  for (const auto& cp : cps) {
    std::cout << fmt::format("creep: change point at night {} ({:+.2f}%, p={:.3g})\n", cp.index + 1,
                             cp.rel_change * 100, cp.p_value);
    EXPECT_EQ(cp.case_id, series[0].case_id);
    EXPECT_GT(cp.rel_change, 0.01) << "a creep only goes up";
    EXPECT_EQ(cp.run_id, series[size_t(cp.index)].run_id);
  }
  remove_tree(dir);
}
