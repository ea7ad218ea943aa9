// stats/step_posterior.h: the posterior of one step's position from runs (the expensive-sample bisection),
// against a direct computation of its formula, limits that must hold, known Student-t values (SciPy), the
// expected information of a run against a numerical integral, and its calibration on seeded data.
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "stats/step_posterior.h"

using namespace kb::stats;

namespace {

// The formula of step_posterior.h term by term, without the prefix sums or the centring.
std::vector<double> direct(int n, const std::vector<kb::stats::Run>& runs) {
  std::vector<double> lp(size_t(n), -INFINITY);
  const double m = double(runs.size());
  for (int h = 1; h < n; ++h) {
    double nl = 0, nh = 0, sl = 0, sh = 0;
    for (const kb::stats::Run& r : runs) (r.commit < h ? (nl += 1, sl += r.y) : (nh += 1, sh += r.y));
    double S = 0;
    for (const kb::stats::Run& r : runs) {
      const double mu = r.commit < h ? sl / nl : sh / nh;
      S += (r.y - mu) * (r.y - mu);
    }
    lp[size_t(h)] = -0.5 * std::log(nl * nh) - 0.5 * (m - 2) * std::log(S);
  }
  const double top = *std::max_element(lp.begin(), lp.end());
  std::vector<double> p(size_t(n), 0);
  double z = 0;
  for (int h = 1; h < n; ++h) z += p[size_t(h)] = std::exp(lp[size_t(h)] - top);
  for (double& x : p) x /= z;
  return p;
}

std::vector<kb::stats::Run> noisy(int n, int h, double delta, double sigma, const std::vector<int>& at, uint64_t seed) {
  kb::Rng rng(seed);
  std::vector<kb::stats::Run> runs;
  for (int c : at) runs.push_back({c, 5.0 + (c >= h ? delta : 0) + sigma * rng.normal()});
  (void)n;
  return runs;
}

}  // namespace

TEST(StepPosterior, MatchesTheFormulaComputedDirectly) {
  const std::vector<kb::stats::Run> runs = noisy(12, 7, 0.01, 0.004, {0, 0, 11, 11, 6, 3, 8, 7, 6, 9, 0, 11}, 3);
  const StepPosterior p = step_posterior(12, runs);
  const std::vector<double> d = direct(12, runs);
  // Equal to 1e-6 of each: step_posterior adds a floor of 1e-12 per run to S (runs that repeat exactly).
  for (int h = 0; h < 12; ++h) EXPECT_NEAR(p.p[size_t(h)], d[size_t(h)], 1e-6 * d[size_t(h)]) << h;
  EXPECT_EQ(p.p[0], 0);
  EXPECT_NEAR(p.cdf.back(), 1, 1e-12);
  EXPECT_EQ(p.dof, 10);
  EXPECT_EQ(p.best, int(std::max_element(d.begin(), d.end()) - d.begin()));
}

TEST(StepPosterior, NoiseFreeRunsPinThePosition) {
  std::vector<kb::stats::Run> runs;
  for (int c : {0, 0, 9, 9, 4, 5}) runs.push_back({c, c >= 5 ? 1.01 : 1.0});
  const StepPosterior p = step_posterior(10, runs);
  EXPECT_EQ(p.best, 5);
  EXPECT_GT(p.p[5], 0.999);
  EXPECT_NEAR(p.hi - p.lo, 0.01, 1e-12);
}

TEST(StepPosterior, CommitsWithoutRunsShareTheirMassEvenly) {
  // Only the ends ran: every position explains the runs equally (the Occam factor is the same for all h).
  const StepPosterior p = step_posterior(6, {{0, 1.0}, {0, 1.1}, {5, 2.0}, {5, 2.1}});
  for (int h = 1; h < 6; ++h) EXPECT_NEAR(p.p[size_t(h)], 0.2, 1e-12);
}

TEST(StepPosterior, APriorOfZeroRulesAPositionOut) {
  const std::vector<kb::stats::Run> runs = noisy(8, 4, 0.01, 0.004, {0, 0, 7, 7, 3, 4}, 5);
  const StepPosterior p = step_posterior(8, runs, {1, 1, 1, 1, 0, 1, 1, 1});
  EXPECT_EQ(p.p[4], 0);
  EXPECT_NE(p.best, 4);
  EXPECT_THROW(step_posterior(8, runs, std::vector<double>(8, 0.0)), std::invalid_argument);
  EXPECT_THROW(step_posterior(8, {{0, 1}, {7, 1}}), std::invalid_argument);                  // fewer than 3 runs
  EXPECT_THROW(step_posterior(8, {{0, 1}, {0, 1.1}, {5, 2}}), std::invalid_argument);        // no run at the last
  EXPECT_THROW(step_posterior(8, {{0, 1}, {7, 1.1}, {9, 2}}), std::invalid_argument);        // out of range
}

TEST(StepPosterior, TheBandSplitsEachPositionByItsStepSize) {
  // A clear 1% step: almost all mass is a step beyond half of a 0.5% threshold.
  const StepPosterior clear = step_posterior(8, noisy(8, 4, 0.01, 0.001, {0, 0, 0, 7, 7, 7, 3, 4, 4}, 7), {}, std::log1p(0.005));
  EXPECT_LT(clear.none, 0.01);
  double step = 0;
  for (double x : clear.step) step += x;
  EXPECT_GT(step, 0.99);
  EXPECT_GT(clear.step[4], 0.9);
  // No step at all, many runs: the levels within the threshold.
  std::vector<int> at;
  for (int k = 0; k < 12; ++k)
    for (int c : {0, 2, 5, 7}) at.push_back(c);
  const StepPosterior flat = step_posterior(8, noisy(8, 100, 0.0, 0.001, at, 9), {}, std::log1p(0.005));
  EXPECT_GT(flat.none, 0.999);
}

TEST(StepPosterior, DecideMeansMatchesStudentT) {
  // t.ppf(0.975, 6) = 2.446912 (SciPy); se = sqrt(1/4 + 1/4); the two-sided p of t = sqrt(2) on 6 degrees of
  // freedom is I_{6/8}(3, 1/2) = 0.20703125 (the regularized incomplete beta function, exact here).
  const Decision d = decide_means(0, 4, 1, 4, 1, 6, 0.005, 0.95);
  EXPECT_NEAR(d.ci.lo, 1 - 2.446912 * std::sqrt(0.5), 1e-5);
  EXPECT_NEAR(d.ci.hi, 1 + 2.446912 * std::sqrt(0.5), 1e-5);
  EXPECT_NEAR(d.p_value, 0.20703125, 1e-9);
  EXPECT_EQ(d.verdict, Verdict::unsure);
  EXPECT_EQ(decide_means(0, 20, 0.02, 20, 0.003, 38, 0.005, 0.95).verdict, Verdict::worse);
  EXPECT_EQ(decide_means(0, 20, 0.0001, 20, 0.001, 38, 0.005, 0.95).verdict, Verdict::same);
  EXPECT_EQ(decide_means(0, 1, 1, 1, 1, 0, 0.005, 0.95).verdict, Verdict::unsure);  // no degrees of freedom
}

TEST(StepPosterior, WithinCommitNoisePoolsReplicates) {
  const Pooled p = within_commit_noise({{0, 1}, {0, 3}, {2, 5}, {4, 10}, {4, 12}, {4, 14}});
  // Sums of squares 2 + 0 + 8 over 1 + 2 degrees of freedom.
  EXPECT_EQ(p.dof, 3);
  EXPECT_NEAR(p.sigma, std::sqrt(10.0 / 3), 1e-12);
  EXPECT_EQ(within_commit_noise({{0, 1}, {1, 2}}).dof, 0);
}

TEST(StepPosterior, ExpectedInformationOfAFairSplitIsTheChannelsCapacity) {
  // Many runs at both ends pin the levels (d = 2 sigma apart) and the noise; the posterior is split evenly
  // between h = 1 and h = 2. A run at commit 1 then tells the two apart through a Gaussian channel whose
  // mutual information is H(mixture of N(0,1), N(d,1)) - H(N(0,1)), integrated here numerically.
  std::vector<kb::stats::Run> runs;
  kb::Rng rng(11);
  for (int k = 0; k < 400; ++k) runs.push_back({0, rng.normal()});
  for (int k = 0; k < 400; ++k) runs.push_back({2, 2 + rng.normal()});
  const StepPosterior p = step_posterior(3, runs);
  ASSERT_NEAR(p.p[1], 0.5, 0.01);
  const double d = p.hi - p.lo, s = p.sigma;
  double h = 0;
  for (double y = -12; y <= 14; y += 0.001) {
    const double f = 0.5 * (std::exp(-0.5 * y * y) + std::exp(-0.5 * (y - d / s) * (y - d / s))) / std::sqrt(2 * M_PI);
    if (f > 0) h -= f * std::log2(f) * 0.001;
  }
  const double capacity = h - 0.5 * std::log2(2 * M_PI * M_E);
  const std::vector<double> info = expected_information(p, {1, 0, 2}, 64);
  EXPECT_NEAR(info[0], capacity, 0.02);
  // A run at an end says nothing about which of the two it is.
  EXPECT_LT(info[1], 0.01);
  EXPECT_LT(info[2], 0.01);
}

TEST(StepPosterior, ARunAtAnEndInformsWhenItsLevelIsUnsure) {
  // Good ran twice, bad twenty times, the middle commits often: what the lower level is decides where the
  // step is, and a run at good is worth more than another at bad.
  std::vector<kb::stats::Run> runs = {{0, 0.0}, {0, 0.012}};
  kb::Rng rng(4);
  for (int k = 0; k < 20; ++k) runs.push_back({9, 0.01 + 0.003 * rng.normal()});
  for (int c : {2, 2, 3, 3, 4, 4}) runs.push_back({c, 0.006 + 0.003 * rng.normal()});
  const StepPosterior p = step_posterior(10, runs);
  const std::vector<double> info = expected_information(p, {0, 9});
  EXPECT_GT(info[0], info[1]);
}

TEST(StepPosterior, PositionsAtNinetyPercentAreRightNinetyPercentOfTheTime) {
  // Calibration on seeded data: a uniform position, a step of 2 sigma, runs at every commit twice and at the
  // ends four times; among the posteriors whose best position holds >= 0.9, the share that is right.
  int confident = 0, right = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    kb::Rng rng(seed * 7919);
    const int n = 16, h = 1 + int(rng.below(n - 1));
    std::vector<int> at = {0, 0, 0, 0, n - 1, n - 1, n - 1, n - 1};
    for (int c = 1; c < n - 1; ++c) at.insert(at.end(), {c, c});
    const StepPosterior p = step_posterior(n, noisy(n, h, 2.0, 1.0, at, seed));
    if (p.p[size_t(p.best)] < 0.9) continue;
    ++confident;
    right += p.best == h;
  }
  ASSERT_GT(confident, 50);
  EXPECT_GE(double(right) / confident, 0.88) << right << " of " << confident;
}
