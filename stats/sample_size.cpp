#include "stats/sample_size.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace kb::stats {

double hl_half_width(double sd, int64_t n, double alpha_per_look) {
  if (!(sd >= 0) || n < 1 || !(alpha_per_look > 0 && alpha_per_look < 1))
    throw std::invalid_argument("hl_half_width: need sd >= 0, n >= 1, alpha in (0, 1)");
  const double z = normal_quantile(1 - alpha_per_look / 2);
  return z * sd / std::sqrt(double(n) * 3 / std::numbers::pi);
}

namespace {
// The signed-rank CI of n log-ratios (exact below 50) is finite only when its most extreme outcome, all n on
// one side, is rarer than the look's error rate: 2 / 2^n <= alpha_per_look. Below that a look cannot decide.
bool can_decide(int64_t n, double alpha_per_look) { return n >= 50 || std::ldexp(2.0, -int(n)) <= alpha_per_look; }
}  // namespace

int64_t samples_to_decide(double sd, const DecisionConfig& cfg, bool* reached, double effect) {
  if (!(cfg.threshold > 0)) throw std::invalid_argument("samples_to_decide: threshold must be positive");
  const double half_band = std::max(std::log1p(cfg.threshold), std::abs(effect)) / 2;
  const double a = cfg.alpha_per_look();
  if (reached) *reached = true;
  for (int64_t n = cfg.min_n; n < cfg.max_n; n *= 2)
    if (can_decide(n, a) && hl_half_width(sd, n, a) <= half_band) return n;
  if (reached) *reached = can_decide(cfg.max_n, a) && hl_half_width(sd, cfg.max_n, a) <= half_band;
  return cfg.max_n;
}

}  // namespace kb::stats
