#include "stats/step_posterior.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <boost/math/distributions/students_t.hpp>

namespace kb::stats {

StepPosterior step_posterior(int n, const std::vector<Run>& runs, const std::vector<double>& prior, double band) {
  if (n < 2) throw std::invalid_argument("step_posterior: need at least two commits");
  if (!prior.empty() && int(prior.size()) != n) throw std::invalid_argument("step_posterior: one prior weight per commit");
  if (runs.size() < 3) throw std::invalid_argument("step_posterior: need at least 3 runs");
  // Per commit: count, sum and sum of squares of y centred on the overall mean (no cancellation when the
  // levels are large and the differences small).
  double centre = 0;
  for (const Run& r : runs) centre += r.y;
  centre /= double(runs.size());
  std::vector<double> cnt(size_t(n), 0), sum(size_t(n), 0);
  double sq = 0;
  for (const Run& r : runs) {
    if (r.commit < 0 || r.commit >= n) throw std::invalid_argument("step_posterior: run at a commit out of range");
    const double y = r.y - centre;
    cnt[size_t(r.commit)] += 1;
    sum[size_t(r.commit)] += y;
    sq += y * y;
  }
  if (cnt[0] == 0 || cnt[size_t(n - 1)] == 0)
    throw std::invalid_argument("step_posterior: the first and the last commit need runs");
  const double m = double(runs.size()), total = [&] {
    double t = 0;
    for (double s : sum) t += s;
    return t;
  }();
  // A floor under S for runs that repeat exactly (a value printed with few digits): sigma ~ 1e-6.
  const double s0 = 1e-12 * m;
  StepPosterior out;
  out.p.assign(size_t(n), 0);
  out.n_lo.assign(size_t(n), 0);
  out.mean_lo.assign(size_t(n), 0);
  out.mean_hi.assign(size_t(n), 0);
  out.ss.assign(size_t(n), 0);
  out.logp.assign(size_t(n), -std::numeric_limits<double>::infinity());
  out.m = m;
  std::vector<double>& logp = out.logp;
  double n_lo = 0, s_lo = 0, best = -std::numeric_limits<double>::infinity();
  for (int h = 1; h < n; ++h) {
    n_lo += cnt[size_t(h - 1)];
    s_lo += sum[size_t(h - 1)];
    const double n_hi = m - n_lo, s_hi = total - s_lo;
    const double S = std::max(0.0, sq - s_lo * s_lo / n_lo - s_hi * s_hi / n_hi) + s0;
    out.n_lo[size_t(h)] = n_lo;
    out.mean_lo[size_t(h)] = s_lo / n_lo;
    out.mean_hi[size_t(h)] = s_hi / n_hi;
    out.ss[size_t(h)] = S;
    const double w = prior.empty() ? 1.0 : prior[size_t(h)];
    if (!(w > 0)) continue;
    logp[size_t(h)] = std::log(w) - 0.5 * std::log(n_lo * n_hi) - 0.5 * (m - 2) * std::log(S);
    if (logp[size_t(h)] > best) {
      best = logp[size_t(h)];
      out.best = h;
      out.lo = s_lo / n_lo + centre;
      out.hi = s_hi / n_hi + centre;
      out.sigma = std::sqrt(S / (m - 2));
    }
  }
  if (out.best < 0) throw std::invalid_argument("step_posterior: the prior rules out every position");
  double z = 0;
  for (int h = 1; h < n; ++h) z += out.p[size_t(h)] = std::exp(logp[size_t(h)] - best);
  out.cdf.assign(size_t(n), 0);
  double acc = 0;
  for (int h = 0; h < n; ++h) {
    out.p[size_t(h)] /= z;
    acc += out.p[size_t(h)];
    out.cdf[size_t(h)] = std::min(1.0, acc);
  }
  out.dof = int(m) - 2;
  // The step's size given h: delta ~ (mean_hi - mean_lo) + scale * t_{m-2}, scale^2 = S/(m-2) (1/n_lo + 1/n_hi).
  // Beyond half the band it is a step that matters, inside the band no change; consecutive h with the same
  // statistics share both.
  out.step.assign(size_t(n), 0);
  out.none = 0;
  const boost::math::students_t t(std::max(1.0, m - 2));
  double small = 0, inside = 0;
  for (int h = 1; h < n; ++h) {
    const bool same = h > 1 && out.n_lo[size_t(h)] == out.n_lo[size_t(h - 1)] && out.ss[size_t(h)] == out.ss[size_t(h - 1)] &&
                      out.mean_lo[size_t(h)] == out.mean_lo[size_t(h - 1)];
    if (!same) {
      small = inside = 0;
      if (band > 0) {
        const double nl = out.n_lo[size_t(h)], nh = m - nl;
        const double d = out.mean_hi[size_t(h)] - out.mean_lo[size_t(h)];
        const double sc = std::sqrt(out.ss[size_t(h)] / (m - 2) * (1 / nl + 1 / nh));
        auto mass = [&](double b) {  // P(|delta| < b)
          return sc > 0 ? boost::math::cdf(t, (b - d) / sc) - boost::math::cdf(t, (-b - d) / sc) : (std::abs(d) < b ? 1.0 : 0.0);
        };
        small = mass(band / 2);
        inside = mass(band);
      }
    }
    out.step[size_t(h)] = out.p[size_t(h)] * (1 - small);
    out.none += out.p[size_t(h)] * inside;
  }
  return out;
}

std::vector<double> expected_information(const StepPosterior& post, const std::vector<int>& commits, int points) {
  const int n = int(post.p.size());
  // Hypotheses between two commits with runs share every statistic (no run tells them apart): they move
  // together, so the work is per group of them, split where a candidate commit lies inside one. Prefix sums of
  // p and p log2 p give any sub-range's mass and the entropy within it.
  std::vector<double> cum_p(size_t(n) + 1, 0), cum_plp(size_t(n) + 1, 0);
  for (int h = 0; h < n; ++h) {
    const double q = post.p[size_t(h)];
    cum_p[size_t(h) + 1] = cum_p[size_t(h)] + q;
    cum_plp[size_t(h) + 1] = cum_plp[size_t(h)] + (q > 0 ? q * std::log2(q) : 0);
  }
  struct Group {
    int h1, h2;  // h in h1..h2
  };
  std::vector<Group> groups;
  for (int h = 1; h < n; ++h) {
    const bool same = !groups.empty() && post.n_lo[size_t(h)] == post.n_lo[size_t(h - 1)] &&
                      post.ss[size_t(h)] == post.ss[size_t(h - 1)] && post.mean_lo[size_t(h)] == post.mean_lo[size_t(h - 1)];
    if (same) groups.back().h2 = h;
    else groups.push_back({h, h});
  }
  auto mass = [&](int h1, int h2) { return cum_p[size_t(h2) + 1] - cum_p[size_t(h1)]; };
  // Entropy within h1..h2 (bits), given its mass.
  auto within = [&](int h1, int h2, double a) {
    return a > 0 ? std::log2(a) - (cum_plp[size_t(h2) + 1] - cum_plp[size_t(h1)]) / a : 0.0;
  };
  double pmax = 0;
  for (const Group& g : groups) pmax = std::max(pmax, mass(g.h1, g.h2));
  // The values a run can take: the span of every level, widened by 5 noise sds.
  double ylo = std::numeric_limits<double>::infinity(), yhi = -ylo;
  for (const Group& g : groups) {
    if (mass(g.h1, g.h2) <= 1e-12 * pmax) continue;
    ylo = std::min({ylo, post.mean_lo[size_t(g.h1)], post.mean_hi[size_t(g.h1)]});
    yhi = std::max({yhi, post.mean_lo[size_t(g.h1)], post.mean_hi[size_t(g.h1)]});
  }
  const double sd = std::max(post.sigma, 1e-9);
  ylo -= 5 * sd;
  yhi += 5 * sd;
  const double m = post.m;
  std::vector<double> out;
  struct Part {
    double logmass, within;
    double ng, mu, S;  // the run's group under these h: runs, mean; the within-level sum of squares
  };
  std::vector<Part> parts;
  for (int c : commits) {
    parts.clear();
    auto add = [&](int h1, int h2, const Group& g) {
      const double a = mass(h1, h2);
      if (!(a > 1e-12 * pmax)) return;
      const bool hi = c >= h1;  // h1..h2 all on one side of c
      const double ng = hi ? m - post.n_lo[size_t(g.h1)] : post.n_lo[size_t(g.h1)];
      parts.push_back({std::log(a), within(h1, h2, a), ng, hi ? post.mean_hi[size_t(g.h1)] : post.mean_lo[size_t(g.h1)],
                       post.ss[size_t(g.h1)]});
    };
    for (const Group& g : groups) {
      if (g.h1 <= c && c < g.h2) {  // c inside: h <= c put it at the second level, h > c at the first
        add(g.h1, c, g);
        add(c + 1, g.h2, g);
      } else {
        add(g.h1, g.h2, g);
      }
    }
    auto entropy = [&](const std::vector<double>& lw) {
      double mx = -std::numeric_limits<double>::infinity();
      for (double x : lw) mx = std::max(mx, x);
      double z = 0;
      for (double x : lw) z += std::exp(x - mx);
      double e = 0;
      for (size_t j = 0; j < lw.size(); ++j) {
        const double q = std::exp(lw[j] - mx) / z;
        if (q > 0) e += q * (parts[j].within - std::log2(q));
      }
      return e;
    };
    std::vector<double> lw(parts.size());
    for (size_t j = 0; j < parts.size(); ++j) lw[j] = parts[j].logmass;
    const double h0 = entropy(lw);
    std::vector<double> lwy(static_cast<size_t>(points)), hy(static_cast<size_t>(points));
    for (int k = 0; k < points; ++k) {
      const double y = ylo + (yhi - ylo) * (k + 0.5) / points;
      // log of the posterior after a run y at c, unnormalised: the marginal's ratio with and without it.
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < parts.size(); ++j) {
        const Part& q = parts[j];
        const double S1 = q.S + q.ng / (q.ng + 1) * (y - q.mu) * (y - q.mu);
        lw[j] = q.logmass - 0.5 * std::log((q.ng + 1) / q.ng) - 0.5 * (m - 1) * std::log(S1) + 0.5 * (m - 2) * std::log(q.S);
        mx = std::max(mx, lw[j]);
      }
      // The predictive density of y (up to a constant shared by every y) is the sum of those weights.
      double w = 0;
      for (double x : lw) w += std::exp(x - mx);
      lwy[size_t(k)] = std::log(w) + mx;
      hy[size_t(k)] = entropy(lw);
    }
    const double top = *std::max_element(lwy.begin(), lwy.end());
    double wsum = 0, hsum = 0;
    for (int k = 0; k < points; ++k) {
      const double w = std::exp(lwy[size_t(k)] - top);
      wsum += w;
      hsum += w * hy[size_t(k)];
    }
    out.push_back(wsum > 0 ? std::max(0.0, h0 - hsum / wsum) : 0.0);
  }
  return out;
}

Decision decide_means(double mean_a, int na, double mean_b, int nb, double sigma, int dof, double threshold,
                      double conf) {
  Decision d;
  d.method = "pooled-t";
  d.n_base = na;
  d.n_new = nb;
  d.conf = conf;
  d.effect = mean_b - mean_a;
  if (na < 1 || nb < 1 || dof < 1 || !(sigma >= 0)) return d;  // unsure
  const double se = sigma * std::sqrt(1.0 / na + 1.0 / nb);
  const double half = t_quantile(1 - (1 - conf) / 2, dof) * se;
  d.ci = {d.effect - half, d.effect + half};
  if (se > 0) {
    const boost::math::students_t t(dof);
    d.p_value = 2 * boost::math::cdf(boost::math::complement(t, std::abs(d.effect) / se));
  } else {
    d.p_value = d.effect == 0 ? 1.0 : 0.0;
  }
  d.verdict = classify(d.ci, threshold, d.effect);
  return d;
}

Pooled within_commit_noise(const std::vector<Run>& runs) {
  std::map<int, std::vector<double>> by;
  for (const Run& r : runs) by[r.commit].push_back(r.y);
  double ss = 0;
  int dof = 0;
  for (const auto& [c, v] : by) {
    if (v.size() < 2) continue;
    double mu = 0;
    for (double y : v) mu += y;
    mu /= double(v.size());
    for (double y : v) ss += (y - mu) * (y - mu);
    dof += int(v.size()) - 1;
  }
  Pooled p;
  if (dof > 0) p = {std::sqrt(ss / dof), dof};
  return p;
}

}  // namespace kb::stats
