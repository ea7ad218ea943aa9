// The sample-size formula (stats/sample_size.h) against the decision it prices: at the look it names, seeded
// simulated block effects of the given spread are decided (`same` with no change, `worse` at the threshold)
// in nearly every trial, and at the look before it clearly less often. Deterministic seeds.
#include <cmath>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "stats/sample_size.h"
#include "stats/stats.h"

using namespace kb;
using namespace kb::stats;

namespace {

DecisionConfig plan(double threshold) {
  DecisionConfig d;
  d.threshold = threshold;
  d.alpha = 0.05;
  d.min_n = 8;
  d.max_n = 1024;
  return d;
}

// Share of trials that one look at n normal log-ratios (mean `effect`, sd `sd`) decides as `want`.
double decided(double effect, double sd, int64_t n, const DecisionConfig& cfg, Verdict want, uint64_t seed) {
  int hits = 0;
  const int trials = 300;
  for (int t = 0; t < trials; ++t) {
    Rng rng(seed + uint64_t(t));
    std::vector<double> d(static_cast<size_t>(n));
    for (auto& x : d) x = effect + sd * rng.normal();
    hits += decide_log_ratios(d, cfg, 1, false).verdict == want;
  }
  return double(hits) / trials;
}

}  // namespace

TEST(SampleSize, HalfWidthFollowsTheHodgesLehmannScale) {
  // z(0.975) = 1.95996; sqrt(100 * 3/pi) = 9.7721.
  EXPECT_NEAR(hl_half_width(0.01, 100, 0.05), 1.95996 * 0.01 / 9.7721, 1e-6);
  EXPECT_NEAR(hl_half_width(0.02, 400, 0.05), hl_half_width(0.01, 100, 0.05), 1e-12);
  EXPECT_THROW(hl_half_width(-1, 10, 0.05), std::invalid_argument);
}

TEST(SampleSize, ItsLookDecidesBothNoChangeAndAChangeOfTheThreshold) {
  const DecisionConfig cfg = plan(0.01);
  for (double sd : {0.01, 0.02, 0.04}) {
    bool reached = false;
    const int64_t n = samples_to_decide(sd, cfg, &reached);
    ASSERT_TRUE(reached) << sd;
    const double b = std::log1p(cfg.threshold);
    const double same = decided(0, sd, n, cfg, Verdict::same, 1000);
    const double worse = decided(b, sd, n, cfg, Verdict::worse, 2000);
    EXPECT_GE(same, 0.9) << "sd " << sd << " n " << n;
    EXPECT_GE(worse, 0.9) << "sd " << sd << " n " << n;
    if (n > cfg.min_n) {  // the look before would not do: the formula asks for no more than it needs
      EXPECT_LT(decided(0, sd, n / 2, cfg, Verdict::same, 3000), same);
      EXPECT_LT(decided(b, sd, n / 2, cfg, Verdict::worse, 4000), worse);
    }
  }
}

TEST(SampleSize, GrowsWithTheSpreadAndStopsAtTheLastLook) {
  const DecisionConfig cfg = plan(0.005);
  // 8 looks at alpha 0.05: 0.00625 each; 8 log-ratios all on one side have p = 2/256 = 0.0078, so the first
  // look (8) can never decide and the least the formula names is the second (16).
  EXPECT_EQ(samples_to_decide(0.0001, cfg), 2 * cfg.min_n);
  std::vector<double> eight;
  for (int i = 0; i < 8; ++i) eight.push_back(0.5 + 0.01 * i);
  EXPECT_EQ(decide_log_ratios(eight, cfg, 1, false).verdict, Verdict::unsure);
  EXPECT_LE(samples_to_decide(0.005, cfg), samples_to_decide(0.01, cfg));
  EXPECT_LE(samples_to_decide(0.01, cfg), samples_to_decide(0.02, cfg));
  bool reached = true;
  EXPECT_EQ(samples_to_decide(1.0, cfg, &reached), cfg.max_n);
  EXPECT_FALSE(reached);
}

TEST(SampleSize, ALargeExpectedEffectIsDecidedSooner) {
  const DecisionConfig cfg = plan(0.005);
  const int64_t at_threshold = samples_to_decide(0.05, cfg);
  const int64_t big = samples_to_decide(0.05, cfg, nullptr, std::log(1.5));
  EXPECT_LT(big, at_threshold);
  // And it is decided there: +50% with that spread at that look is `worse` in nearly every trial.
  EXPECT_GE(decided(std::log(1.5), 0.05, big, cfg, Verdict::worse, 5000), 0.95);
  // An effect inside the band prices as the threshold does.
  EXPECT_EQ(samples_to_decide(0.05, cfg, nullptr, 0.001), at_threshold);
}
