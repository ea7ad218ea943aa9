// Where one step lies along an ordered list of commits, from runs of a noisy metric at some of them: the
// posterior of probabilistic bisection when a sample is expensive (a training job: docs/bisect.md, "L3").
//
// Model: a run at commit i gives y = mu_lo + delta * [i >= h] + e, e ~ N(0, sigma^2), y on a log scale
// (log of the value, larger = worse). h, the first commit at the second level, is the unknown; mu_lo,
// mu_hi = mu_lo + delta and sigma are nuisances integrated out with the reference priors (flat on both
// levels, 1/sigma^2 on the variance), so the level and the noise are estimated from every run pooled under
// each h, and their uncertainty is carried into the posterior instead of plugged in:
//
//   P(h | runs) ~ prior(h) * (n_lo(h) * n_hi(h))^(-1/2) * S(h)^(-(m - 2)/2)
//
// with n_lo / n_hi the runs below / at-or-after h, m all runs and S(h) the within-level sum of squares.
// This is the marginal of a two-group normal model (a Student t in the levels): with few runs it is wide,
// with many it is the plug-in normal. The first and the last commit must have runs (they fix the two
// levels). Pure: numbers in, numbers out.
#pragma once
#include <vector>

#include "stats/stats.h"

namespace kb::stats {

struct Run {
  int commit = 0;  // 0 .. n-1
  double y = 0;    // log value (larger = worse)
};

struct StepPosterior {
  std::vector<double> p;    // p[h], h = 0 .. n-1: P(the first commit at the second level is h); p[0] = 0
  std::vector<double> cdf;  // cdf[c] = P(h <= c): commit c is at the second level
  // With a band b > 0 (the threshold, as a log-ratio), the two lines of the threshold rule (stats::classify:
  // "worse" wants an estimate of b/2, "same" an interval inside +-b): step[h] = P(h, |delta| >= b/2), a step
  // that matters at h; none = P(|delta| < b), the range's two levels within the threshold of each other
  // (the two overlap where b/2 <= |delta| < b).
  std::vector<double> step;
  double none = 0;
  int best = -1;            // the h with the largest p
  // Under h = best: the two levels' means (log), the pooled noise sd and its degrees of freedom (m - 2).
  double lo = 0, hi = 0, sigma = 0;
  int dof = 0;
  // Per h (what expected_information needs): runs below h, the two levels' means and the within-level sum
  // of squares (centred y), log of the unnormalised posterior (-inf where the prior rules h out), all runs.
  std::vector<double> n_lo, mean_lo, mean_hi, ss, logp;
  double m = 0;
};

// The posterior over h for n commits (n >= 2) from `runs`. `prior` (size n, or empty for uniform) weighs
// each h; a zero rules h out (identical code on both sides of it). `band` splits each h's mass by the size of
// its step (step, none). Throws std::invalid_argument when the
// first or last commit has no run, there are fewer than 3 runs, or the prior rules out every h.
StepPosterior step_posterior(int n, const std::vector<Run>& runs, const std::vector<double>& prior = {},
                            double band = 0);

// The expected information (bits) about h of one more run at each commit of `commits`: the entropy of the
// posterior now minus its expected entropy after the run, the run's value drawn from the posterior predictive
// (a mixture over h of each h's level, with the level and the noise as uncertain as the runs leave them).
// A run at a commit every likely h puts on one side still informs through the levels (the ends of the range
// pin them); a run whose two possible levels the posterior cannot tell apart informs little. Quadrature over
// `points` values; hypotheses below 1e-12 of the largest are left out.
std::vector<double> expected_information(const StepPosterior& post, const std::vector<int>& commits, int points = 24);

// The difference of two means of runs, mean_b - mean_a (log), with a pooled noise estimate sigma on dof
// degrees of freedom: CI from Student's t at `conf`, verdict by `classify` against `threshold` (relative).
// Method "pooled-t". n_base / n_new are na / nb.
Decision decide_means(double mean_a, int na, double mean_b, int nb, double sigma, int dof, double threshold,
                      double conf);

// The pooled noise of runs grouped by commit (each commit its own mean): sd and degrees of freedom (runs
// minus commits with runs). 0 and 0 when no commit has two runs.
struct Pooled {
  double sigma = 0;
  int dof = 0;
};
Pooled within_commit_noise(const std::vector<Run>& runs);

}  // namespace kb::stats
