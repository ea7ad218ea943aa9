// Stats functions against hand-checked / textbook values. Sources are named next to each number:
//  [HW]  Hollander & Wolfe, "Nonparametric Statistical Methods" examples, as reproduced in R's
//        ?wilcox.test documentation (statistic and p-value printed there).
//  [ENUM] exact enumeration of every rank assignment / sign pattern in a 20-line python3 script
//        (itertools, fractions), written independently of this code.
//  [HAND] worked out by hand in the comment.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/error.h"
#include "stats/stats.h"

using namespace kb::stats;

TEST(Descriptive, QuantileType7) {
  std::vector<double> x = {7, 1, 10, 4, 2, 9, 3, 8, 6, 5};  // 1..10 shuffled
  // [HAND] type 7: h = (n-1) p. p=0.25: h=2.25 -> x(3) + 0.25 (x(4)-x(3)) = 3 + 0.25 = 3.25.
  EXPECT_DOUBLE_EQ(quantile(x, 0.25), 3.25);
  // [HAND] p=0.5: h=4.5 -> 5.5; p=0.9: h=8.1 -> 9 + 0.1 = 9.1; p=0 -> 1; p=1 -> 10.
  EXPECT_DOUBLE_EQ(median(x), 5.5);
  EXPECT_DOUBLE_EQ(quantile(x, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(quantile(x, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(x, 1.0), 10);
  auto q = quantiles(x, {0.25, 0.5, 0.9});
  EXPECT_DOUBLE_EQ(q[0], 3.25);
  EXPECT_DOUBLE_EQ(q[1], 5.5);
  EXPECT_DOUBLE_EQ(q[2], 9.1);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_THROW(median({}), std::invalid_argument);
  EXPECT_THROW(quantile(x, 1.5), std::invalid_argument);
}

TEST(Descriptive, MadKeepsOutliersButIgnoresTheirSize) {
  // [HAND] median 2; |x - 2| = 1,1,0,0,2,4,7 -> sorted 0,0,1,1,2,4,7 -> MAD 1.
  EXPECT_DOUBLE_EQ(mad({1, 1, 2, 2, 4, 6, 9}), 1);
  // An outlier of any size changes neither the median nor the MAD here.
  EXPECT_DOUBLE_EQ(mad({1, 1, 2, 2, 4, 6, 9000}), 1);
  EXPECT_DOUBLE_EQ(median({1, 1, 2, 2, 4, 6, 9000}), 2);
}

TEST(Distributions, NormalAndT) {
  // Standard table values: Phi^-1(0.975) = 1.959964, t_{0.975, 10} = 2.228139.
  EXPECT_NEAR(normal_quantile(0.975), 1.959964, 1e-6);
  EXPECT_NEAR(normal_cdf(1.959964), 0.975, 1e-6);
  EXPECT_NEAR(t_quantile(0.975, 10), 2.228139, 1e-6);
}

TEST(Rng, ReproducibleAndBounded) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  Rng r(7);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    EXPECT_LT(r.below(10), 10u);
    double z = r.normal();
    s += z;
    s2 += z * z;
  }
  // Sample mean of 200000 N(0,1) has sd 0.0022; variance has sd 0.0032.
  EXPECT_NEAR(s / n, 0, 0.015);
  EXPECT_NEAR(s2 / n, 1, 0.02);
}

TEST(Bootstrap, SeededAndSensible) {
  std::vector<double> x;
  Rng r(1);
  for (int i = 0; i < 200; ++i) x.push_back(10 + r.normal());
  auto stat = [](const std::vector<double>& v) { return median(v); };
  auto a = bootstrap_ci(x, stat, 0.95, 2000, 99);
  auto b = bootstrap_ci(x, stat, 0.95, 2000, 99);
  EXPECT_EQ(a.lo, b.lo);  // same seed -> same interval, bit for bit
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_LT(a.lo, median(x));
  EXPECT_GT(a.hi, median(x));
  // The median of 200 N(10,1) has sd ~ 1.2533/sqrt(200) = 0.089: a 95% CI is ~0.35 wide.
  EXPECT_GT(a.width(), 0.15);
  EXPECT_LT(a.width(), 0.7);
}

// [HW] R ?wilcox.test: x = c(0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46),
// y = c(1.15, 0.88, 0.90, 0.74, 1.21); wilcox.test(x, y, alternative = "g") prints W = 35, p-value = 0.1272.
const std::vector<double> kHwX = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
const std::vector<double> kHwY = {1.15, 0.88, 0.90, 0.74, 1.21};

TEST(MannWhitney, TextbookExampleExact) {
  auto r = mann_whitney(kHwX, kHwY);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 35);
  EXPECT_NEAR(r.p_greater, 0.1272061272, 1e-9);  // [HW] 0.1272, [ENUM] 0.127206127206...
  EXPECT_NEAR(r.p_less, 0.8967698968, 1e-9);     // [ENUM]
  EXPECT_NEAR(r.p_two_sided, 0.2544122544, 1e-9);  // [ENUM] 2 * min
  // Symmetry: swapping the samples gives U' = n1 n2 - U.
  auto s = mann_whitney(kHwY, kHwX);
  EXPECT_DOUBLE_EQ(s.u, 50 - 35);
  EXPECT_NEAR(s.p_two_sided, r.p_two_sided, 1e-12);
}

TEST(MannWhitney, ExactCdf) {
  EXPECT_NEAR(mann_whitney_cdf(4, 5, 3), 1.0 / 18, 1e-12);    // [ENUM] 7 of 126 subsets
  EXPECT_NEAR(mann_whitney_cdf(6, 7, 10), 59.0 / 858, 1e-12); // [ENUM]
  // [HAND] n1 = n2 = 1: U is 0 or 1 with probability 1/2 each.
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(1, 1, 0), 0.5);
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(3, 4, 12), 1.0);
  // Large n stays accurate in the tails (no cancellation): P(U <= 0) = 1 / C(98, 49).
  EXPECT_NEAR(mann_whitney_cdf(49, 49, 0) * 2.54776122589808569e28, 1.0, 1e-6);
}

TEST(MannWhitney, TiesUseNormalWithContinuityAndTieCorrection) {
  // [ENUM]/[HAND] x = 1,2,2,3,3,3,4,5; y = 3,4,4,5,5,6,7,7,8: U = 7.5, tie-corrected var = 105.352941,
  // z = (7.5 - 36 + 0.5) / sqrt(var) = -2.727939, p = 0.0063731.
  auto r = mann_whitney({1, 2, 2, 3, 3, 3, 4, 5}, {3, 4, 4, 5, 5, 6, 7, 7, 8});
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 7.5);
  EXPECT_EQ(r.tie_groups, 5);
  EXPECT_NEAR(r.z, -2.727939278646863, 1e-9);
  EXPECT_NEAR(r.p_two_sided, 0.006373133838085877, 1e-9);
  // All values equal: no evidence at all.
  auto e = mann_whitney({1, 1, 1}, {1, 1});
  EXPECT_DOUBLE_EQ(e.p_two_sided, 1);
}

TEST(HodgesLehmann, TwoSampleMosesCI) {
  // [ENUM] 50 differences y_j - x_i; median (-0.31 + -0.30)/2 = -0.305. Exact critical value k = 9
  // (P(U <= 8) <= 0.025 < P(U <= 9)), CI = [D(9), D(42)] = [-0.76, 0.15], achieved confidence
  // 1 - 2 P(U <= 8) = 0.96004.
  auto h = hodges_lehmann_shift(kHwX, kHwY, 0.95);
  EXPECT_TRUE(h.exact);
  EXPECT_NEAR(h.estimate, -0.305, 1e-12);
  EXPECT_NEAR(h.ci.lo, -0.76, 1e-12);
  EXPECT_NEAR(h.ci.hi, 0.15, 1e-12);
  EXPECT_NEAR(h.conf, 0.9600399600, 1e-9);
  // A pure shift of y by +c shifts estimate and CI by exactly c.
  std::vector<double> y2 = kHwY;
  for (auto& v : y2) v += 1.0;
  auto g = hodges_lehmann_shift(kHwX, y2, 0.95);
  EXPECT_NEAR(g.estimate, -0.305 + 1, 1e-12);
  EXPECT_NEAR(g.ci.lo, -0.76 + 1, 1e-12);
  // Too few samples for a 95% interval (n1 = n2 = 2: P(U <= 0) = 1/6 > 0.025): infinite CI.
  auto t = hodges_lehmann_shift({1, 2}, {3, 4}, 0.95);
  EXPECT_TRUE(std::isinf(t.ci.lo) && std::isinf(t.ci.hi));
}

TEST(SignedRank, TextbookPairedExample) {
  // [HW] R ?wilcox.test: x = c(1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30),
  // y = c(0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29); paired, alternative "greater":
  // V = 40, p-value = 0.01953 (= 10/512 [ENUM]); two-sided 0.0390625 [ENUM].
  std::vector<double> x = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
  std::vector<double> y = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};
  std::vector<double> d;
  for (size_t i = 0; i < x.size(); ++i) d.push_back(x[i] - y[i]);
  auto r = wilcoxon_signed_rank(d);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.w_plus, 40);
  EXPECT_NEAR(r.p_two_sided, 0.0390625, 1e-12);
}

TEST(SignedRank, ExactCdfAndZeros) {
  EXPECT_NEAR(signed_rank_cdf(10, 8), 25.0 / 1024, 1e-12);   // [ENUM]
  EXPECT_NEAR(signed_rank_cdf(12, 13), 87.0 / 4096, 1e-12);  // [ENUM]
  // [ENUM] d = 1.5,-0.3,2.2,0.7,-1.1,3.0,0.4,1.9: W+ = 31, exact two-sided p = 0.078125.
  auto r = wilcoxon_signed_rank({1.5, -0.3, 2.2, 0.7, -1.1, 3.0, 0.4, 1.9});
  EXPECT_DOUBLE_EQ(r.w_plus, 31);
  EXPECT_NEAR(r.p_two_sided, 0.078125, 1e-12);
  // Zeros are counted, not silently lost, and switch to the normal approximation.
  auto z = wilcoxon_signed_rank({0, 0, 1.5, -0.3, 2.2, 0.7, -1.1, 3.0, 0.4, 1.9});
  EXPECT_EQ(z.zeros, 2);
  EXPECT_EQ(z.n, 8);
  EXPECT_FALSE(z.exact);
  EXPECT_DOUBLE_EQ(z.w_plus, 31);
  // [HAND] normal: mu = 18, var = 8*9*17/24 = 51, z = (31 - 18 - 0.5)/sqrt(51) = 1.750350, p = 0.0800579.
  EXPECT_NEAR(z.z, 12.5 / std::sqrt(51.0), 1e-12);
  EXPECT_NEAR(z.p_two_sided, 0.08005792, 1e-7);
}

TEST(HodgesLehmann, OneSampleWalshCI) {
  // [ENUM] Walsh averages of d = 1.5,-0.3,2.2,0.7,-1.1,3.0,0.4,1.9 (36 values): median 1.025;
  // exact k = 4 (P(T+ <= 3) = 5/256 <= 0.025), CI = [W(4), W(33)] = [-0.3, 2.25], confidence 0.9609375.
  auto h = hodges_lehmann_one_sample({1.5, -0.3, 2.2, 0.7, -1.1, 3.0, 0.4, 1.9}, 0.95);
  EXPECT_TRUE(h.exact);
  EXPECT_NEAR(h.estimate, 1.025, 1e-12);
  EXPECT_NEAR(h.ci.lo, -0.3, 1e-12);
  EXPECT_NEAR(h.ci.hi, 2.25, 1e-12);
  EXPECT_NEAR(h.conf, 0.9609375, 1e-12);
  // An outlier moves the estimate by at most one rank step, not by its size.
  auto o = hodges_lehmann_one_sample({1.5, -0.3, 2.2, 0.7, -1.1, 3.0, 0.4, 1000}, 0.95);
  EXPECT_LE(std::fabs(o.estimate - h.estimate), 0.3 + 1e-12);
}

TEST(Decision, ClassifyRule) {
  const double b = std::log1p(0.005);
  EXPECT_EQ(classify({0.001, 0.009}, 0.005), Verdict::worse);
  EXPECT_EQ(classify({-0.009, -0.001}, 0.005), Verdict::better);
  EXPECT_EQ(classify({-0.002, 0.003}, 0.005), Verdict::same);
  // Significant but provably smaller than the threshold: same (a gate must not fail on it).
  EXPECT_EQ(classify({0.001, 0.003}, 0.005), Verdict::same);
  EXPECT_EQ(classify({-0.002, 0.008}, 0.005), Verdict::unsure);
  EXPECT_EQ(classify({-b, 0.001}, 0.005), Verdict::unsure);  // touching the band edge is not inside
  // With the estimate: a wide CI above 0 for a small change against a large threshold is not "worse" yet.
  const double b50 = std::log1p(0.5);
  EXPECT_EQ(classify({0.001, 0.6}, 0.5), Verdict::worse);
  EXPECT_EQ(classify({0.001, 0.6}, 0.5, 0.02), Verdict::unsure);
  EXPECT_EQ(classify({0.001, 0.6}, 0.5, b50 / 2), Verdict::worse);
  EXPECT_EQ(classify({-0.6, -0.001}, 0.5, -0.02), Verdict::unsure);
  EXPECT_EQ(classify({-0.6, -0.001}, 0.5, -0.3), Verdict::better);
  EXPECT_EQ(classify({0.001, 0.009}, 0.005, 0.005), Verdict::worse);  // at the threshold: unchanged
  EXPECT_EQ(to_string(Verdict::unsure), "unsure");
  EXPECT_EQ(parse_verdict("worse"), Verdict::worse);
  DecisionConfig c;
  EXPECT_EQ(c.looks(), 8);  // 16, 32, ..., 2048
  c.max_n = 3000;
  EXPECT_EQ(c.looks(), 9);  // ... 2048, 3000
}

TEST(Decision, GeometricMean) {
  Decision a, b;
  a.effect = std::log(1.10);
  b.effect = std::log(1.0 / 1.10);
  a.conf = b.conf = 0.95;
  a.ci = {a.effect - 0.01, a.effect + 0.01};
  b.ci = {b.effect - 0.01, b.effect + 0.01};
  auto g = geometric_mean({a, b}, 0.95);
  EXPECT_NEAR(g.effect, 0, 1e-12);  // [HAND] sqrt(1.1 / 1.1) = 1
  // [HAND] se_i = 0.01 / 1.96; se = sqrt(2) se_i / 2; half = 1.96 se = 0.0070711.
  EXPECT_NEAR(g.ci.hi, 0.01 * std::sqrt(2.0) / 2, 1e-9);
}

// The geomean of one case is the case: `kbisect ab` printed "unsure" +1.10% [-0.16%, +2.39%] for a case
// and "worse" +1.10% [+0.13%, +2.08%] for its geomean row (a normal CI at a lower confidence).
TEST(Decision, GeometricMeanOfOneCaseIsTheCase) {
  Decision d;
  d.effect = std::log1p(0.011);
  d.conf = 0.99;  // a sequential / adjusted decision's own confidence
  d.ci = {std::log1p(-0.0016), std::log1p(0.0239)};  // asymmetric, as Moses CIs are
  const auto g = geometric_mean({d}, 0.95);
  EXPECT_EQ(g.effect, d.effect);
  EXPECT_EQ(g.ci.lo, d.ci.lo);
  EXPECT_EQ(g.ci.hi, d.ci.hi);
  EXPECT_EQ(g.conf, 0.99);
  // Several cases: se_i from each case's CI at its own confidence, the row's CI at the one asked for.
  Decision e = d;
  e.effect = -d.effect;
  e.ci = {-d.ci.hi, -d.ci.lo};
  const auto g2 = geometric_mean({d, e}, 0.95);
  EXPECT_EQ(g2.conf, 0.95);
  const double se = (d.ci.hi - d.ci.lo) / (2 * normal_quantile(0.995));
  EXPECT_NEAR(g2.ci.hi - g2.ci.lo, 2 * normal_quantile(0.975) * std::sqrt(2.0) * se / 2, 1e-12);
}

// A NaN or infinite measurement is refused wherever it sits: ranking it would make the answer depend on
// its position (one NaN moved through a sample of 4 gave U = 2, 2, 1, 0 and p down to 0.029).
TEST(Stats, NonFiniteMeasurementsAreRefusedNotRanked) {
  const std::vector<double> y = {1.0, 1.1, 1.2, 1.3};
  for (double bad : {std::nan(""), double(INFINITY), -double(INFINITY)})
    for (size_t at = 0; at < 4; ++at) {
      std::vector<double> x = {1.05, 1.15, 1.25, 1.35};
      x[at] = bad;
      EXPECT_THROW(kb::stats::mann_whitney(x, y), kb::Error) << at;
      EXPECT_THROW(kb::stats::hodges_lehmann_shift(x, y, 0.95), kb::Error) << at;
      EXPECT_THROW(kb::stats::wilcoxon_signed_rank(x), kb::Error) << at;
      EXPECT_THROW(kb::stats::median(x), kb::Error) << at;
      try {
        kb::stats::mann_whitney(x, y);
      } catch (const kb::Error& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("value {} of 4", at)), std::string::npos) << e.what();
      }
    }
}
