// A noise model for timing samples, for tests of the decision rules and for the bisector's
// simulations: multiplicative lognormal noise with a given coefficient of variation, occasional
// outliers (slow samples: interrupts, frequency dips), and slow drift shared by everything measured in
// the same round (as when executables are interleaved in one process). Fully determined by its seed.
#pragma once
#include <cstdint>
#include <vector>

#include "stats/stats.h"

namespace kb {

struct NoiseModel {
  double cv = 0.01;              // coefficient of variation of the per-sample lognormal noise
  double outlier_rate = 0.0;     // probability that a sample is an outlier
  double outlier_max = 0.13;     // an outlier is slower by a factor 1 + U(outlier_min, outlier_max)
  double outlier_min = 0.02;
  double drift_sd = 0.0;         // per-round step of a mean-reverting log drift (AR(1)), shared per round
  double drift_reversion = 0.01; // AR(1) pull back to 0 per round (0 = random walk)
  double drift_max = 0.05;       // |log drift| is clamped here
  uint64_t seed = 1;
};

class NoiseGenerator {
 public:
  explicit NoiseGenerator(const NoiseModel& m);
  // One round: every true time gets the same drift factor, its own lognormal noise and possibly an
  // outlier. The median of each sample's distribution (without drift/outliers) is its true time.
  std::vector<double> round(const std::vector<double>& true_times);
  // Convenience: `rounds` rounds of two executables -> (a samples, b samples), round i paired.
  std::pair<std::vector<double>, std::vector<double>> pairs(double a, double b, int rounds);
  // Independent samples of one executable (own drift path), e.g. a separate process run.
  std::vector<double> samples(double true_time, int n);
  double drift() const { return drift_; }

 private:
  double one(double t);
  NoiseModel m_;
  stats::Rng rng_;
  double sigma_;  // lognormal sigma for the CV
  double drift_ = 0;
};

// A synthetic nightly series (tests and bench/changepoint): n nights of 1 ms x (1 + creep)^night, times
// (1 + step) from night step_at on (step_at < 0: no step), each with lognormal jitter of CV cv.
std::vector<double> synthetic_nightly(int n, double cv, uint64_t seed, int step_at = -1, double step = 0,
                                      double creep = 0);

}  // namespace kb
