// Helpers of bench/bisect_sim shared by its tables (bench/bisect_sim_l3.h): summaries of many histories'
// results, a thread pool over histories, and the clairvoyant floor.
#pragma once
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "bisect/simulate.h"
#include "stats/stats.h"

namespace bisect_sim {

using kb::bisect::MethodResult;

struct Summary {
  double accuracy = 0, exact = 0, median_builds = 0, median_samples = 0, measured_fraction = 0;
  double p90_samples = 0;
};

inline Summary summarize(const std::vector<MethodResult>& rs) {
  Summary s;
  if (rs.empty()) return s;
  std::vector<double> b, smp;
  int64_t measured = 0, visited = 0;
  for (const auto& r : rs) {
    s.accuracy += r.correct;
    s.exact += r.exact;
    b.push_back(r.builds);
    smp.push_back(double(r.samples));
    measured += r.measured;
    visited += r.visited;
  }
  s.accuracy /= double(rs.size());
  s.exact /= double(rs.size());
  s.median_builds = kb::stats::median(b);
  s.median_samples = kb::stats::median(smp);
  s.p90_samples = kb::stats::quantile(smp, 0.9);
  s.measured_fraction = visited ? double(measured) / double(visited) : 0;
  return s;
}

// Runs fn(history index, history seed) over n histories on `threads` threads.
template <class Fn>
void parallel_for(int n, int threads, Fn fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < n;) fn(i);
    });
  for (auto& th : pool) th.join();
}

// A floor on the samples of ANY method that is right in >= 99% of histories, for c <= d/3: a clairvoyant
// sequential probability ratio test that knows both levels exactly, sees no drift and no outliers, and
// measures only the commit (no reference executable). Each measured step must tell "level good" from
// "level good + step" in lognormal noise of sd ~cv; with per-step error eps = 0.01 / steps (steps =
// log2 N, so the bisection errs in at most 1%), Wald's approximation of the expected sample size under
// either hypothesis is (1 - 2 eps) ln((1 - eps) / eps) * 2 sigma^2 / delta^2.
inline double sprt_samples_per_step(int commits, double step, double cv) {
  const double steps = std::ceil(std::log2(double(commits)));
  const double eps = 0.01 / steps, delta = std::log1p(step), sigma = cv;
  return (1 - 2 * eps) * std::log((1 - eps) / eps) * 2 * sigma * sigma / (delta * delta);
}

inline double median_of(std::vector<double> v) { return v.empty() ? 0 : kb::stats::median(v); }


}  // namespace bisect_sim
