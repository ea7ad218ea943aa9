// Far tails of the rank tests: each tail keeps its digits whichever sample is the larger one. Values:
//  [COMB] fully separated samples: the only extreme rank assignment, 1 / C(n1 + n2, n1) (or 2^-n for
//         the signed-rank test with every difference positive), from python3's math.comb; SciPy 1.10's
//         mannwhitneyu(method='exact') prints the two-sided 2 / C(60, 30) = 1.7e-17 for n = 30 and
//         2 / C(98, 49) = 7.9e-29 for n = 49.
//  [ERFC] the normal approximation's z worked out by hand, its tail erfc(z / sqrt 2) / 2 from python3's
//         math.erfc (SciPy's norm.sf(9) is 1.1285884059538e-19).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "stats/stats.h"

using namespace kb::stats;

namespace {

// n consecutive values from `from` (two runs far apart are fully separated samples).
std::vector<double> run_of(int n, double from) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

void expect_rel(double got, double want, double rel) { EXPECT_NEAR(got / want, 1.0, rel) << got << " vs " << want; }

}  // namespace

TEST(Tails, ExactMannWhitneyKeepsTheUpperTail) {
  // [COMB] C(60, 30) = 118264581564861424.
  auto hi = mann_whitney(run_of(30, 1001), run_of(30, 1));  // first sample the larger one
  ASSERT_TRUE(hi.exact);
  EXPECT_DOUBLE_EQ(hi.u, 900);
  expect_rel(hi.p_greater, 1 / 118264581564861424.0, 1e-9);
  expect_rel(hi.p_two_sided, 1.6911233892144735e-17, 1e-9);
  EXPECT_DOUBLE_EQ(hi.p_less, 1);
  auto lo = mann_whitney(run_of(30, 1), run_of(30, 1001));
  expect_rel(lo.p_less, 1 / 118264581564861424.0, 1e-9);
  expect_rel(lo.p_two_sided, hi.p_two_sided, 1e-12);
  // [COMB] C(98, 49) = 25477612258980856902730428600.
  auto big = mann_whitney(run_of(49, 1001), run_of(49, 1));
  ASSERT_TRUE(big.exact);
  expect_rel(big.p_two_sided, 7.850029192963324e-29, 1e-9);
  expect_rel(big.p_greater, 7.850029192963324e-29 / 2, 1e-9);
}

TEST(Tails, ExactSignedRankKeepsTheUpperTail) {
  // [COMB] 49 positive differences without ties: P(W+ = max) = 2^-49, two-sided 2^-48.
  auto r = wilcoxon_signed_rank(run_of(49, 1));
  ASSERT_TRUE(r.exact);
  expect_rel(r.p_two_sided, 3.552713678800501e-15, 1e-9);
  auto s = wilcoxon_signed_rank(run_of(49, -1000));
  expect_rel(s.p_two_sided, r.p_two_sided, 1e-12);
}

TEST(Tails, NormalTailsThroughErfcAreNeverZero) {
  // [ERFC]
  expect_rel(normal_sf(9), 1.1285884059538422e-19, 1e-12);
  expect_rel(normal_sf(8.6), 3.985804962848192e-18, 1e-12);
  expect_rel(normal_cdf(-9), 1.1285884059538422e-19, 1e-12);
  EXPECT_GT(normal_sf(30), 0);
  EXPECT_NEAR(normal_sf(0) + normal_cdf(0), 1.0, 1e-15);
  // [ERFC] n1 = n2 = 60 separated (normal path, no ties): mu = 1800, var = 60*60/12*121 = 36300,
  // z = (3600 - 1800 - 0.5) / sqrt(36300) = 9.444925540061197.
  auto hi = mann_whitney(run_of(60, 1001), run_of(60, 1));
  ASSERT_FALSE(hi.exact);
  expect_rel(hi.p_greater, 1.7782854874923884e-21, 1e-9);
  expect_rel(hi.p_two_sided, 3.556570974984777e-21, 1e-9);
  auto lo = mann_whitney(run_of(60, 1), run_of(60, 1001));
  expect_rel(lo.p_less, 1.7782854874923884e-21, 1e-9);
  // [ERFC] 60 positive paired differences: z = (1830 - 915 - 0.5) / sqrt(60*61*121/24) = 6.732185944987443.
  auto w = wilcoxon_signed_rank(run_of(60, 1));
  ASSERT_FALSE(w.exact);
  expect_rel(w.p_two_sided, 1.671328569652656e-11, 1e-9);
}
