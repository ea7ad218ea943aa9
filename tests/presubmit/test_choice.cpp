// The choice rule (presubmit/choice.h): the knapsack against exhaustive enumeration on seeded instances, the
// value formula, and the cost model's direction.
#include <cmath>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "presubmit/choice.h"

using namespace kb;
using namespace kb::presubmit;

namespace {

// The best subset by trying them all (n <= 14).
double brute_force(const std::vector<double>& v, const std::vector<double>& c, double cap) {
  double best = 0;
  const size_t n = v.size();
  for (uint32_t m = 0; m < (1u << n); ++m) {
    double vs = 0, cs = 0;
    for (size_t i = 0; i < n; ++i)
      if (m & (1u << i)) {
        vs += v[i];
        cs += c[i];
      }
    if (cs <= cap) best = std::max(best, vs);
  }
  return best;
}

}  // namespace

TEST(PresubmitChoice, KnapsackFitsTheBudgetAndMatchesExhaustiveSearch) {
  int exact = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    const size_t n = 4 + size_t(rng.below(11));
    std::vector<double> v(n), c(n);
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      v[i] = std::exp(2 * rng.normal());
      c[i] = 0.5 + 30 * rng.uniform();
      total += c[i];
    }
    const double cap = total * (0.1 + 0.5 * rng.uniform());
    const std::vector<bool> take = knapsack(v, c, cap);
    double vs = 0, cs = 0;
    for (size_t i = 0; i < n; ++i)
      if (take[i]) {
        vs += v[i];
        cs += c[i];
      }
    ASSERT_LE(cs, cap + 1e-9) << "seed " << seed;  // never over the budget
    const double best = brute_force(v, c, cap);
    // Costs rounded up to cap/4096 lose at most what n units of budget would buy.
    EXPECT_GE(vs, brute_force(v, c, cap - double(n) * cap / 4096) - 1e-9) << "seed " << seed;
    exact += std::abs(vs - best) < 1e-9 * std::max(1.0, best);
  }
  EXPECT_GE(exact, 190);  // and is the exact optimum almost always
}

TEST(PresubmitChoice, KnapsackIsNotASort) {
  // By value per second the 10-value case (ratio 0.91) comes first and leaves room for nothing else (11 + 10 >
  // 20); the two 6-value cases (ratio 0.6 each) are worth more together, and fit.
  const std::vector<bool> take = knapsack({10, 6, 6}, {11, 10, 10}, 20);
  EXPECT_EQ(take, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(knapsack({5}, {3}, 2), (std::vector<bool>{false}));  // what cannot fit is never chosen
  EXPECT_EQ(knapsack({5}, {3}, 0), (std::vector<bool>{false}));
}

TEST(PresubmitChoice, ValueGrowsWithWeightHistoryAndStaticChange) {
  Candidate a;
  EXPECT_DOUBLE_EQ(value_of(a), 1);
  a.weight = 3;
  a.change_points = 2;
  a.static_size = 0.5;
  EXPECT_DOUBLE_EQ(value_of(a), 3 * 3 * 1.5);
  Candidate chosen = a, other = a;
  other.weight = 1;
  chosen.cost_s = other.cost_s = 10;
  const Choice ch = choose({other, chosen}, 10);
  EXPECT_EQ(ch.chosen, (std::vector<bool>{false, true}));
  EXPECT_DOUBLE_EQ(ch.value, value_of(a));
  EXPECT_DOUBLE_EQ(ch.cost_s, 10);
}

TEST(PresubmitChoice, CostGrowsWithNoiseAndTimePerSample) {
  CostModel m;
  m.threshold = 0.01;
  const Cost quiet = cost_from_history(m, 1e-3, 0.01);
  const Cost noisy = cost_from_history(m, 1e-3, 0.10);
  const Cost slow = cost_from_history(m, 1e-2, 0.01);
  EXPECT_EQ(quiet.from, "history");
  EXPECT_LE(quiet.blocks, noisy.blocks);
  EXPECT_LT(quiet.seconds, noisy.seconds);
  EXPECT_EQ(quiet.blocks, slow.blocks);
  EXPECT_NEAR(slow.block_s, 2 * m.block_pairs * 1e-2 + m.block_overhead_s, 1e-12);
  EXPECT_NEAR(quiet.seconds, double(quiet.blocks) * quiet.block_s, 1e-12);
  // A pilot whose blocks all sit near +50% is decided at the first look; one near 0 needs more.
  const Cost big = cost_from_pilot(m, 0.5, {0.40, 0.41, 0.39, 0.42});
  const Cost small = cost_from_pilot(m, 0.5, {0.01, -0.02, 0.015, -0.01});
  EXPECT_EQ(big.blocks, m.min_blocks);
  EXPECT_GT(small.blocks, big.blocks);
  EXPECT_EQ(big.from, "pilot");
}

TEST(PresubmitChoice, TheWorkedExampleOfTheDocs) {
  // docs/presubmit.md, "The choice rule": four changed cases, a 0.5% threshold, the default measurement plan
  // (16 pairs a block, looks at 10..160 blocks), a 10 s budget.
  CostModel m;
  m.threshold = 0.005;
  struct Row {
    Candidate c;
    double t, cv, value, cost;
    int64_t blocks;
  };
  std::vector<Row> rows = {{{5, 1, 0.10, 0}, 1.8e-3, 0.008, 11.0, 6.208, 80},
                           {{2, 3, 0.02, 0}, 0.25e-3, 0.02, 8.16, 4.480, 160},
                           {{1, 0, 0.35, 0}, 0.12e-3, 0.02, 1.35, 3.814, 160},
                           {{5, 0, 0.0, 0}, 0.03e-3, 0.015, 5.0, 3.354, 160}};
  std::vector<Candidate> cands;
  for (auto& r : rows) {
    const Cost c = cost_from_history(m, r.t, r.cv);
    EXPECT_EQ(c.blocks, r.blocks);
    EXPECT_NEAR(c.seconds, r.cost, 5e-4);
    r.c.cost_s = c.seconds;
    EXPECT_NEAR(value_of(r.c), r.value, 1e-9);
    cands.push_back(r.c);
  }
  // By value per second B (1.82/s) comes first, then A (1.77/s) no longer fits: B + D, 13.16. The knapsack
  // takes A + D, 16.0, in 9.56 s.
  const Choice ch = choose(cands, 10);
  EXPECT_EQ(ch.chosen, (std::vector<bool>{true, false, false, true}));
  EXPECT_NEAR(ch.value, 16.0, 1e-9);
  EXPECT_NEAR(ch.cost_s, 9.562, 1e-3);
  EXPECT_EQ(measuring_order(cands, 10), (std::vector<size_t>{0, 3}));  // A (1.77/s) before D (1.49/s)
}
