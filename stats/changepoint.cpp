#include "stats/changepoint.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "stats/stats.h"

namespace kb {

namespace {

struct Split {
  double q = -1;  // energy statistic of the best split (-1: no admissible split)
  int tau = -1;   // first index of the right part, relative to the segment start
};

// Best split of v[0, L) by the E-Divisive energy statistic with exponent 1 (Matteson & James 2014):
//   Q(tau) = m k / (m + k) * ( 2/(m k) sum|x_i - y_j| - 1/C(m,2) sum_{i<i'}|x_i - x_i'|
//                               - 1/C(k,2) sum_{j<j'}|y_j - y_j'| )
// for left x = v[0, tau) (m = tau) and right y = v[tau, L) (k = L - tau), both at least min_seg long.
// The three sums are updated in O(L) per tau, so the whole scan is O(L^2).
Split best_split(const double* v, int L, int min_seg) {
  Split best;
  if (L < 2 * min_seg) return best;
  int tau = min_seg;
  double wl = 0, wr = 0, b = 0;
  for (int i = 0; i < L; ++i)
    for (int j = i + 1; j < L; ++j) {
      double d = std::fabs(v[i] - v[j]);
      if (j < tau) wl += d;
      else if (i >= tau) wr += d;
      else b += d;
    }
  for (;; ++tau) {
    double m = tau, k = L - tau;
    double q = m * k / (m + k) * (2.0 * b / (m * k) - wl / (m * (m - 1) / 2) - wr / (k * (k - 1) / 2));
    if (q > best.q) best = {q, tau};
    if (tau + 1 > L - min_seg) break;
    // Move v[tau] from the right part to the left part.
    double a = 0, r = 0;
    for (int i = 0; i < tau; ++i) a += std::fabs(v[tau] - v[i]);
    for (int j = tau + 1; j < L; ++j) r += std::fabs(v[tau] - v[j]);
    wl += a;
    wr -= r;
    b += r - a;
  }
  return best;
}

struct Candidate {
  double q = -1;
  size_t segment = 0;
  int at = -1;  // absolute index
};

// Best split over all segments (bounds: sorted cut points including 0 and n).
Candidate best_over_segments(const std::vector<double>& z, const std::vector<int>& cuts, int min_seg) {
  Candidate c;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    Split sp = best_split(z.data() + cuts[s], cuts[s + 1] - cuts[s], min_seg);
    if (sp.tau >= 0 && sp.q > c.q) c = {sp.q, s, cuts[s] + sp.tau};
  }
  return c;
}

double median_of(const std::vector<double>& x, int lo, int hi) {
  std::vector<double> v(x.begin() + lo, x.begin() + hi);
  return stats::median(v);
}

}  // namespace

std::vector<ChangePoint> detect_change_points(const std::vector<double>& series, const ChangePointConfig& cfg) {
  if (cfg.min_segment < 2)
    throw InputError(fmt::format("change points: min_segment {} must be at least 2", cfg.min_segment));
  if (!(cfg.alpha > 0 && cfg.alpha < 1))
    throw InputError(fmt::format("change points: alpha {} must be in (0, 1)", cfg.alpha));
  if (cfg.permutations < 1)
    throw InputError(fmt::format("change points: permutations {} must be at least 1", cfg.permutations));
  const int n = int(series.size());
  std::vector<double> z(series.size());
  for (int i = 0; i < n; ++i) {
    if (!(series[size_t(i)] > 0) || !std::isfinite(series[size_t(i)]))
      throw InputError(fmt::format("change points: value #{} = {} is not a positive finite number", i + 1,
                                   series[size_t(i)]));
    z[size_t(i)] = std::log(series[size_t(i)]);
  }
  std::vector<int> cuts{0, n};
  std::vector<double> p_at(size_t(n) + 1, 1.0);
  stats::Rng rng(cfg.seed);
  std::vector<double> perm(z.size());
  // Permutations needed to exceed alpha: once more than this many permuted statistics reach the
  // observed one, p > alpha whatever the rest give, so the test stops early (same decision).
  const int max_exceed = int(std::floor(cfg.alpha * (cfg.permutations + 1))) - 1;
  for (int found = 0; found < cfg.max_change_points; ++found) {
    Candidate obs = best_over_segments(z, cuts, cfg.min_segment);
    if (obs.at < 0 || !(obs.q > 0)) break;
    int exceed = 0, done = 0;
    perm = z;
    for (; done < cfg.permutations; ++done) {
      // Shuffle within every current segment (the null: no further change inside any segment).
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        int lo = cuts[s], len = cuts[s + 1] - cuts[s];
        for (int i = len - 1; i > 0; --i) std::swap(perm[size_t(lo + i)], perm[size_t(lo) + rng.below(uint64_t(i) + 1)]);
      }
      Candidate c = best_over_segments(perm, cuts, cfg.min_segment);
      if (c.q >= obs.q * (1 - 1e-12)) ++exceed;
      if (exceed > max_exceed) {
        ++done;
        break;
      }
    }
    double p = double(exceed + 1) / double(done + 1);
    if (exceed > max_exceed || p > cfg.alpha) break;
    p_at[size_t(obs.at)] = p;
    cuts.insert(std::upper_bound(cuts.begin(), cuts.end(), obs.at), obs.at);
  }
  std::vector<ChangePoint> out;
  for (size_t s = 1; s + 1 < cuts.size(); ++s) {
    ChangePoint cp;
    cp.index = cuts[s];
    cp.before = median_of(series, cuts[s - 1], cuts[s]);
    cp.after = median_of(series, cuts[s], cuts[s + 1]);
    cp.rel_change = cp.after / cp.before - 1;
    cp.p_value = p_at[size_t(cuts[s])];
    if (std::fabs(cp.rel_change) < cfg.min_rel_change) continue;
    out.push_back(cp);
  }
  return out;
}


}  // namespace kb
