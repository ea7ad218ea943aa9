#include "stats/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "core/error.h"

namespace kb::stats {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every statistic starts here: an empty sample is a programming error; a NaN or infinite value is a
// measurement that cannot be ranked (where it sits would decide the answer), refused with its position.
void require_nonempty(const std::vector<double>& x, const char* what) {
  if (x.empty()) throw std::invalid_argument(std::string(what) + ": empty sample");
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw Error(fmt::format("{}: value {} of {} is {}: a measurement that is not a finite number cannot be ranked",
                              what, i, x.size(), x[i]));
}

// Sorted copy helper: the value at 0-based order statistic k, partially reordering v.
double order_stat(std::vector<double>& v, size_t k) {
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

// Median of v (type 7 at p = 0.5: mean of the two middle values for even sizes), reorders v.
double median_inplace(std::vector<double>& v) {
  const size_t n = v.size();
  const size_t h = (n - 1) / 2;
  double a = order_stat(v, h);
  if (n % 2 == 1) return a;
  // The next order statistic is the minimum of the upper part after nth_element.
  double b = *std::min_element(v.begin() + std::ptrdiff_t(h) + 1, v.end());
  return 0.5 * (a + b);
}

// Average ranks (1-based) of values; returns the tie correction sum of (t^3 - t) over tie groups and
// the number of tie groups (groups of size > 1).
struct Ranked {
  std::vector<double> rank;
  double tie_sum = 0;
  int64_t tie_groups = 0;
};
Ranked average_ranks(const std::vector<double>& v) {
  const size_t n = v.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t(0));
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  Ranked r;
  r.rank.assign(n, 0);
  size_t i = 0;
  while (i < n) {
    size_t j = i + 1;
    while (j < n && v[idx[j]] == v[idx[i]]) ++j;
    const double avg = 0.5 * (double(i + 1) + double(j));  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k) r.rank[idx[k]] = avg;
    const double t = double(j - i);
    if (j - i > 1) {
      r.tie_sum += t * t * t - t;
      ++r.tie_groups;
    }
    i = j;
  }
  return r;
}

// Exact frequencies of U for (n1, n2) without ties: f[u] = #{rank subsets of size n1 with U = u}.
// 0/1 knapsack over the N = n1 + n2 ranks: choosing rank k as the j-th smallest selected adds k - j
// (the number of second-sample values below it). All additions are of positive numbers (no
// cancellation), normalized by C(N, n1) at the end.
std::vector<double> mann_whitney_pmf(int64_t n1, int64_t n2) {
  const int64_t umax = n1 * n2;
  // dp[j][u]: ways to pick j of the ranks seen so far with partial U = u.
  std::vector<std::vector<double>> dp(size_t(n1 + 1), std::vector<double>(size_t(umax + 1), 0.0));
  dp[0][0] = 1;
  for (int64_t k = 1; k <= n1 + n2; ++k) {
    for (int64_t j = std::min<int64_t>(n1, k); j >= 1; --j) {
      const int64_t add = k - j;  // second-sample values below rank k when it is the j-th pick
      if (add > n2) continue;
      auto& dst = dp[size_t(j)];
      const auto& src = dp[size_t(j - 1)];
      for (int64_t u = umax - add; u >= 0; --u)
        if (src[size_t(u)] != 0) dst[size_t(u + add)] += src[size_t(u)];
    }
  }
  std::vector<double> pmf = dp[size_t(n1)];
  const double total = std::accumulate(pmf.begin(), pmf.end(), 0.0);
  for (auto& p : pmf) p /= total;
  return pmf;
}

std::vector<double> signed_rank_pmf(int64_t n) {
  const int64_t tmax = n * (n + 1) / 2;
  std::vector<double> f(size_t(tmax + 1), 0.0);
  f[0] = 1;
  for (int64_t k = 1; k <= n; ++k)
    for (int64_t s = tmax; s >= k; --s) f[size_t(s)] += f[size_t(s - k)];
  const double total = std::ldexp(1.0, int(n));
  for (auto& p : f) p /= total;
  return f;
}

// Largest k >= 0 with P(S <= k - 1) <= a for a discrete pmf on 0..max (k = 0 means even P(S <= -1) =
// 0 is the only option, i.e. no finite bound is possible at this level... returned as 0).
int64_t lower_critical(const std::vector<double>& pmf, double a) {
  double cdf = 0;
  int64_t k = 0;
  for (size_t s = 0; s < pmf.size(); ++s) {
    // k = s + 1 is admissible if P(S <= s) <= a.
    cdf += pmf[s];
    if (cdf <= a * (1 + 1e-12)) k = int64_t(s) + 1;
    else break;
  }
  return k;
}

double pmf_cdf(const std::vector<double>& pmf, int64_t t) {
  if (t < 0) return 0;
  if (t >= int64_t(pmf.size()) - 1) return 1;
  double c = 0;
  for (int64_t s = 0; s <= t; ++s) c += pmf[size_t(s)];
  return std::min(1.0, c);
}

// P(S >= t), summed from the top end: a small upper tail keeps its digits (1 - P(S <= t - 1) would leave
// only the rounding error of a sum close to 1).
double pmf_upper(const std::vector<double>& pmf, int64_t t) {
  if (t <= 0) return 1;
  double c = 0;
  for (int64_t s = int64_t(pmf.size()) - 1; s >= t; --s) c += pmf[size_t(s)];
  return std::min(1.0, c);
}

double sgn(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

// Two-sided z quantile for confidence conf.
double z_two_sided(double conf) { return normal_quantile(1 - (1 - conf) / 2); }

void check_conf(double conf) {
  if (!(conf > 0 && conf < 1)) throw std::invalid_argument("confidence must be in (0, 1)");
}

}  // namespace

// ---- descriptive --------------------------------------------------------------------------------

double mean(const std::vector<double>& x) {
  require_nonempty(x, "mean");
  double s = 0;
  for (double v : x) s += v;
  return s / double(x.size());
}

double stddev(const std::vector<double>& x) {
  require_nonempty(x, "stddev");
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / double(x.size() - 1));
}

double quantile(std::vector<double> x, double p) {
  require_nonempty(x, "quantile");
  if (!(p >= 0 && p <= 1)) throw std::invalid_argument("quantile: p must be in [0, 1]");
  // Hyndman & Fan type 7: h = (n - 1) p; Q = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).
  const double h = double(x.size() - 1) * p;
  const size_t lo = size_t(std::floor(h));
  const double frac = h - double(lo);
  const double a = order_stat(x, lo);
  if (frac == 0 || lo + 1 >= x.size()) return a;
  const double b = *std::min_element(x.begin() + std::ptrdiff_t(lo) + 1, x.end());
  return a + frac * (b - a);
}

double median(std::vector<double> x) {
  require_nonempty(x, "median");
  return median_inplace(x);
}

std::vector<double> quantiles(std::vector<double> x, const std::vector<double>& ps) {
  require_nonempty(x, "quantiles");
  std::sort(x.begin(), x.end());
  std::vector<double> out;
  for (double p : ps) {
    if (!(p >= 0 && p <= 1)) throw std::invalid_argument("quantile: p must be in [0, 1]");
    const double h = double(x.size() - 1) * p;
    const size_t lo = size_t(std::floor(h));
    const double frac = h - double(lo);
    out.push_back(lo + 1 < x.size() ? x[lo] + frac * (x[lo + 1] - x[lo]) : x[lo]);
  }
  return out;
}

double mad(const std::vector<double>& x) {
  require_nonempty(x, "mad");
  const double m = median(x);
  std::vector<double> dev;
  dev.reserve(x.size());
  for (double v : x) dev.push_back(std::fabs(v - m));
  return median_inplace(dev);
}

std::vector<double> log_ratios(const std::vector<double>& base, const std::vector<double>& next) {
  const size_t n = std::min(base.size(), next.size());
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    if (!(base[i] > 0) || !(next[i] > 0)) throw std::invalid_argument("log_ratios: values must be positive");
    d[i] = std::log(next[i] / base[i]);
  }
  return d;
}

// ---- distributions ----------------------------------------------------------------------------

double normal_quantile(double p) { return boost::math::quantile(boost::math::normal_distribution<double>(), p); }
// Both tails through erfc, so neither is ever 1 minus a number close to 1 (P(Z > 9) = 1.1e-19, not 0).
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }
double t_quantile(double p, double dof) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(dof), p);
}

// ---- bootstrap ----------------------------------------------------------------------------------

Interval bootstrap_ci(const std::vector<double>& x, const Statistic& stat, double conf, int resamples, uint64_t seed) {
  require_nonempty(x, "bootstrap_ci");
  check_conf(conf);
  if (resamples < 10) throw std::invalid_argument("bootstrap_ci: need at least 10 resamples");
  Rng rng(seed);
  std::vector<double> stats_v;
  stats_v.reserve(size_t(resamples));
  std::vector<double> buf(x.size());
  for (int r = 0; r < resamples; ++r) {
    for (auto& b : buf) b = x[size_t(rng.below(x.size()))];
    stats_v.push_back(stat(buf));
  }
  const double a = (1 - conf) / 2;
  auto q = quantiles(std::move(stats_v), {a, 1 - a});
  return {q[0], q[1]};
}

// ---- Mann-Whitney -------------------------------------------------------------------------------

double mann_whitney_cdf(int64_t n1, int64_t n2, int64_t u) {
  if (n1 <= 0 || n2 <= 0) throw std::invalid_argument("mann_whitney_cdf: sample sizes must be positive");
  return pmf_cdf(mann_whitney_pmf(n1, n2), u);
}

MannWhitney mann_whitney(const std::vector<double>& x, const std::vector<double>& y) {
  require_nonempty(x, "mann_whitney x");
  require_nonempty(y, "mann_whitney y");
  MannWhitney r;
  r.n1 = int64_t(x.size());
  r.n2 = int64_t(y.size());
  std::vector<double> all(x);
  all.insert(all.end(), y.begin(), y.end());
  auto rk = average_ranks(all);
  double r1 = 0;
  for (size_t i = 0; i < x.size(); ++i) r1 += rk.rank[i];
  const double n1 = double(r.n1), n2 = double(r.n2), n = n1 + n2;
  r.u = r1 - n1 * (n1 + 1) / 2;
  r.tie_groups = rk.tie_groups;
  if (rk.tie_groups == 0 && r.n1 < 50 && r.n2 < 50) {
    r.exact = true;
    auto pmf = mann_whitney_pmf(r.n1, r.n2);
    const int64_t u = int64_t(std::llround(r.u));
    r.p_less = pmf_cdf(pmf, u);
    r.p_greater = pmf_upper(pmf, u);
    r.p_two_sided = std::min(1.0, 2 * std::min(r.p_less, r.p_greater));
    return r;
  }
  const double mu = n1 * n2 / 2;
  const double var = n1 * n2 / 12 * ((n + 1) - rk.tie_sum / (n * (n - 1)));
  if (!(var > 0)) {  // every value equal: no evidence either way
    r.z = 0;
    r.p_two_sided = r.p_less = r.p_greater = 1;
    return r;
  }
  const double sd = std::sqrt(var);
  const double diff = r.u - mu;
  r.z = (diff - 0.5 * sgn(diff)) / sd;
  r.p_two_sided = std::min(1.0, 2 * normal_cdf(-std::fabs(r.z)));
  r.p_less = normal_cdf((diff + 0.5) / sd);
  r.p_greater = normal_sf((diff - 0.5) / sd);
  return r;
}

// ---- Hodges-Lehmann ---------------------------------------------------------------------------

ShiftEstimate hodges_lehmann_shift(const std::vector<double>& x, const std::vector<double>& y, double conf) {
  require_nonempty(x, "hodges_lehmann_shift x");
  require_nonempty(y, "hodges_lehmann_shift y");
  check_conf(conf);
  const int64_t n1 = int64_t(x.size()), n2 = int64_t(y.size()), N = n1 * n2;
  std::vector<double> d;
  d.reserve(size_t(N));
  for (double yj : y)
    for (double xi : x) d.push_back(yj - xi);
  ShiftEstimate s;
  s.n = N;
  s.estimate = median_inplace(d);
  const double a = (1 - conf) / 2;

  // Ties among the pooled values make the exact distribution inapplicable: use the normal one.
  std::vector<double> all(x);
  all.insert(all.end(), y.begin(), y.end());
  auto rk = average_ranks(all);
  int64_t k;
  if (rk.tie_groups == 0 && n1 < 50 && n2 < 50) {
    s.exact = true;
    auto pmf = mann_whitney_pmf(n1, n2);
    k = lower_critical(pmf, a);
    s.conf = k >= 1 ? 1 - 2 * pmf_cdf(pmf, k - 1) : 0;
  } else {
    const double nn = double(n1 + n2);
    const double var = double(n1) * double(n2) / 12 * ((nn + 1) - rk.tie_sum / (nn * (nn - 1)));
    const double mu = double(N) / 2;
    k = int64_t(std::floor(mu - z_two_sided(conf) * std::sqrt(std::max(var, 0.0)) + 0.5));
    s.conf = conf;
  }
  if (k < 1) {  // too few samples for a finite CI at this confidence
    s.ci = {-kInf, kInf};
    s.conf = 1;
    return s;
  }
  // 1-based order statistics D_(k) and D_(N-k+1).
  s.ci.lo = order_stat(d, size_t(k - 1));
  s.ci.hi = order_stat(d, size_t(N - k));
  return s;
}

// ---- Wilcoxon signed-rank ---------------------------------------------------------------------

double signed_rank_cdf(int64_t n, int64_t t) {
  if (n <= 0) throw std::invalid_argument("signed_rank_cdf: n must be positive");
  return pmf_cdf(signed_rank_pmf(n), t);
}

SignedRank wilcoxon_signed_rank(const std::vector<double>& d) {
  require_nonempty(d, "wilcoxon_signed_rank");
  SignedRank r;
  std::vector<double> absd;
  std::vector<bool> pos;
  for (double v : d) {
    if (v == 0) {
      ++r.zeros;
      continue;
    }
    absd.push_back(std::fabs(v));
    pos.push_back(v > 0);
  }
  r.n = int64_t(absd.size());
  if (r.n == 0) return r;  // all zero: no evidence
  auto rk = average_ranks(absd);
  for (size_t i = 0; i < absd.size(); ++i)
    if (pos[i]) r.w_plus += rk.rank[i];
  const double n = double(r.n);
  if (rk.tie_groups == 0 && r.zeros == 0 && r.n < 50) {
    r.exact = true;
    auto pmf = signed_rank_pmf(r.n);
    const int64_t w = int64_t(std::llround(r.w_plus));
    const double lo = pmf_cdf(pmf, w), hi = pmf_upper(pmf, w);
    r.p_two_sided = std::min(1.0, 2 * std::min(lo, hi));
    return r;
  }
  const double mu = n * (n + 1) / 4;
  const double var = n * (n + 1) * (2 * n + 1) / 24 - rk.tie_sum / 48;
  if (!(var > 0)) return r;
  const double diff = r.w_plus - mu;
  r.z = (diff - 0.5 * sgn(diff)) / std::sqrt(var);
  r.p_two_sided = std::min(1.0, 2 * normal_cdf(-std::fabs(r.z)));
  return r;
}

ShiftEstimate hodges_lehmann_one_sample(const std::vector<double>& d, double conf) {
  require_nonempty(d, "hodges_lehmann_one_sample");
  check_conf(conf);
  const int64_t n = int64_t(d.size()), M = n * (n + 1) / 2;
  std::vector<double> w;
  w.reserve(size_t(M));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) w.push_back(0.5 * (d[size_t(i)] + d[size_t(j)]));
  ShiftEstimate s;
  s.n = n;
  s.estimate = median_inplace(w);
  const double a = (1 - conf) / 2;
  std::vector<double> absd;
  for (double v : d) absd.push_back(std::fabs(v));
  auto rk = average_ranks(absd);
  int64_t k;
  if (rk.tie_groups == 0 && n < 50) {
    s.exact = true;
    auto pmf = signed_rank_pmf(n);
    k = lower_critical(pmf, a);
    s.conf = k >= 1 ? 1 - 2 * pmf_cdf(pmf, k - 1) : 0;
  } else {
    const double nn = double(n);
    const double var = nn * (nn + 1) * (2 * nn + 1) / 24 - rk.tie_sum / 48;
    k = int64_t(std::floor(nn * (nn + 1) / 4 - z_two_sided(conf) * std::sqrt(std::max(var, 0.0)) + 0.5));
    s.conf = conf;
  }
  if (k < 1) {
    s.ci = {-kInf, kInf};
    s.conf = 1;
    return s;
  }
  s.ci.lo = order_stat(w, size_t(k - 1));
  s.ci.hi = order_stat(w, size_t(M - k));
  return s;
}

// ---- several decisions -------------------------------------------------------------------------

GeoMean geometric_mean(const std::vector<Decision>& decisions, double conf) {
  check_conf(conf);
  GeoMean g;
  g.cases = int64_t(decisions.size());
  if (decisions.empty()) return g;
  g.conf = conf;
  if (decisions.size() == 1) {  // the geomean of one case is that case: its effect and its (Moses) CI
    g.effect = decisions[0].effect;
    g.ci = decisions[0].ci;
    g.conf = decisions[0].conf;
    return g;
  }
  double sum = 0, var = 0;
  bool finite = true;
  for (const auto& d : decisions) {
    sum += d.effect;
    if (!std::isfinite(d.ci.lo) || !std::isfinite(d.ci.hi) || !(d.conf > 0 && d.conf < 1)) {
      finite = false;
      continue;
    }
    const double se = (d.ci.hi - d.ci.lo) / (2 * z_two_sided(d.conf));
    var += se * se;
  }
  const double m = double(decisions.size());
  g.effect = sum / m;
  if (!finite) {
    g.ci = {-kInf, kInf};
    return g;
  }
  const double half = z_two_sided(conf) * std::sqrt(var) / m;
  g.ci = {g.effect - half, g.effect + half};
  return g;
}

}  // namespace kb::stats
