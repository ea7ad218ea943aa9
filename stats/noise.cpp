#include "stats/noise.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kb {

std::vector<double> synthetic_nightly(int n, double cv, uint64_t seed, int step_at, double step, double creep) {
  stats::Rng rng(seed);
  const double sigma = std::sqrt(std::log1p(cv * cv));
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const double t = 1e-3 * std::pow(1 + creep, i) * (step_at >= 0 && i >= step_at ? 1 + step : 1.0);
    v.push_back(t * std::exp(sigma * rng.normal()));
  }
  return v;
}

NoiseGenerator::NoiseGenerator(const NoiseModel& m) : m_(m), rng_(m.seed) {
  if (m.cv < 0 || m.outlier_rate < 0 || m.outlier_rate > 1 || m.drift_sd < 0 || m.outlier_min > m.outlier_max)
    throw std::invalid_argument("NoiseModel: cv, rates and drift must be non-negative, outlier_min <= outlier_max");
  // For a lognormal, CV^2 = exp(sigma^2) - 1.
  sigma_ = std::sqrt(std::log1p(m.cv * m.cv));
}

double NoiseGenerator::one(double t) {
  double x = t * std::exp(drift_ + sigma_ * rng_.normal());
  if (m_.outlier_rate > 0 && rng_.uniform() < m_.outlier_rate)
    x *= 1 + m_.outlier_min + (m_.outlier_max - m_.outlier_min) * rng_.uniform();
  return x;
}

std::vector<double> NoiseGenerator::round(const std::vector<double>& true_times) {
  if (m_.drift_sd > 0) {
    drift_ = (1 - m_.drift_reversion) * drift_ + m_.drift_sd * rng_.normal();
    drift_ = std::clamp(drift_, -m_.drift_max, m_.drift_max);
  }
  std::vector<double> out;
  out.reserve(true_times.size());
  for (double t : true_times) out.push_back(one(t));
  return out;
}

std::pair<std::vector<double>, std::vector<double>> NoiseGenerator::pairs(double a, double b, int rounds) {
  std::pair<std::vector<double>, std::vector<double>> r;
  r.first.reserve(size_t(rounds));
  r.second.reserve(size_t(rounds));
  for (int i = 0; i < rounds; ++i) {
    auto s = round({a, b});
    r.first.push_back(s[0]);
    r.second.push_back(s[1]);
  }
  return r;
}

std::vector<double> NoiseGenerator::samples(double true_time, int n) {
  std::vector<double> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; ++i) out.push_back(round({true_time})[0]);
  return out;
}

}  // namespace kb
