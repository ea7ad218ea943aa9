// The expensive-sample tables of bench/bisect_sim (docs/bisect.md, "L3"): probabilistic bisection over single
// runs (Plan::expensive) beside today's design on the same seeded histories.
//
//  - the main table: N = 32, 256, 1024 commits, steps of 0.5%, 1%, 2% at `cv` run-to-run noise (lognormal,
//    no outliers unless asked), threshold = step / 2, builds failing at 3% of commits: runs (median, mean, p90,
//    max), accuracy with its 95% interval, the ratio of the median to the clairvoyant floor, builds; today's
//    design (rounds as units, no code hashes: what an external metric gets) with its runs and accuracy;
//  - issue 49's case: 32 commits, 1% at commit 19, no build failures, over many noise seeds;
//  - A/A: no step at all (the reproduction must say so);
//  - parallel runs (P in flight), several changes, outliers, the cost of a build in runs;
//  - the kernel-timing model of the spec scenario (1% noise with outliers, code hashes), both designs.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bisect_sim.h"
#include "bisect/bisector.h"
#include "bisect/simulate.h"

namespace bisect_sim {

using kb::bisect::History;
using kb::bisect::RunOptions;
using kb::bisect::SimConfig;

struct L3Row {
  std::vector<MethodResult> r;
  std::vector<double> wall;  // simulated time to the verdict, in runs
};

// Runs `histories` histories of `c` (make(c, seed) builds each) with opts; expensive selects the design.
inline L3Row l3_runs(const SimConfig& c, int histories, int threads, uint64_t seed, bool expensive,
                     const std::function<History(const SimConfig&, uint64_t)>& make, int workers = 1) {
  L3Row row;
  row.r.resize(size_t(histories));
  row.wall.resize(size_t(histories));
  parallel_for(histories, threads, [&](int i) {
    const uint64_t s = seed * 1000003ULL + uint64_t(i);
    const History h = make(c, s);
    RunOptions o;
    o.use_hashes = false;  // an external metric: identical kernel code says nothing about the job
    o.expensive = expensive;
    o.workers = workers;
    row.r[size_t(i)] = kb::bisect::run_kbisect(c, h, s, o);
    row.wall[size_t(i)] = row.r[size_t(i)].wall;
  });
  return row;
}

inline std::vector<double> runs_of(const L3Row& row) {
  std::vector<double> v;
  for (const auto& r : row.r) v.push_back(double(r.samples));
  return v;
}

// "0.9990 [0.9942, 0.9998]": the share of correct answers with its Wilson 95% interval.
inline std::string accuracy_ci(const std::vector<MethodResult>& rs) {
  double k = 0;
  for (const auto& r : rs) k += r.correct;
  const double n = double(rs.size()), p = k / n, z = 1.959964;
  const double mid = (p + z * z / (2 * n)) / (1 + z * z / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
  return fmt::format("{:.4f} [{:.4f}, {:.4f}]", p, std::max(0.0, mid - half), std::min(1.0, mid + half));
}

inline double mean_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x / double(v.size());
  return m;
}

// The base model at n commits, one step of `step`, the given threshold, single runs (no blocks).
inline SimConfig l3_config(const SimConfig& base, int n, double step, double threshold) {
  SimConfig c = base;
  c.commits = n;
  c.step = step;
  c.threshold = threshold;
  c.block_rounds = 0;
  return c;
}

inline History any_history(const SimConfig& c, uint64_t s) { return kb::bisect::make_history(c, s); }

// Issue 49's history: the culprit at commit 19 of 32, every commit builds.
inline History issue_history(const SimConfig& c, uint64_t s) {
  History h = kb::bisect::make_history(c, s);
  h.culprit = 19;
  h.build_fails.assign(h.build_fails.size(), false);
  return h;
}

inline void l3_tables(const SimConfig& base, int histories, int today_histories, int threads, uint64_t seed) {
  std::cout << fmt::format(
      "expensive samples (L3): one run = one sample; noise CV {:.2f}% lognormal, {:.0f}% outliers; builds fail at "
      "{:.0f}% of commits; threshold = step / 2; confidence {}; {} histories per cell ({} for today's design: rounds "
      "as units, first look at {} runs, no code hashes)\n",
      100 * base.noise.cv, 100 * base.noise.outlier_rate, 100 * base.build_fail, base.confidence, histories,
      today_histories, base.min_samples);
  std::cout << fmt::format("{:>5} {:>5} | {:>5} {:>6} {:>5} {:>5} {:>26} {:>7} {:>6} | {:>6} {:>8} {:>7} | {:>6}\n", "N",
                           "step", "runs", "mean", "p90", "max", "accuracy [95% CI]", "x floor", "builds", "today",
                           "accuracy", "x floor", "floor");
  for (int n : {32, 256, 1024})
    for (double step : {0.005, 0.01, 0.02}) {
      const SimConfig c = l3_config(base, n, step, step / 2);
      const L3Row a = l3_runs(c, histories, threads, seed, true, any_history);
      const L3Row t = l3_runs(c, today_histories, threads, seed, false, any_history);
      const Summary sa = summarize(a.r), st = summarize(t.r);
      const std::vector<double> runs = runs_of(a);
      const double floor = sprt_samples_per_step(n, step, c.noise.cv) * std::ceil(std::log2(double(n)));
      std::cout << fmt::format("{:>5} {:>4.1f}% | {:>5.0f} {:>6.1f} {:>5.0f} {:>5.0f} {:>26} {:>7.2f} {:>6.0f} | {:>6.0f} {:>8.3f} {:>7.1f} | {:>6.1f}\n",
                               n, 100 * step, sa.median_samples, mean_of(runs), sa.p90_samples,
                               *std::max_element(runs.begin(), runs.end()), accuracy_ci(a.r), sa.median_samples / floor,
                               sa.median_builds, st.median_samples, st.accuracy, st.median_samples / floor, floor);
    }
  // Issue 49: 32 commits, 1% at commit 19, 0.3% noise; today's design with its defaults and with min_samples 4.
  {
    const SimConfig c = l3_config(base, 32, 0.01, 0.005);
    const L3Row a = l3_runs(c, histories, threads, seed, true, issue_history);
    const L3Row t = l3_runs(c, today_histories, threads, seed, false, issue_history);
    SimConfig c4 = c;
    c4.min_samples = 4;
    const L3Row t4 = l3_runs(c4, today_histories, threads, seed, false, issue_history);
    const std::vector<double> r = runs_of(a);
    std::cout << fmt::format(
        "issue 49's case (32 commits, 1% at commit 19, threshold 0.5%, {} noise seeds): runs median {:.0f}, p90 {:.0f}, "
        "p99 {:.0f}, max {:.0f}, accuracy {}; today's design {:.0f} runs (first look 16) / {:.0f} (first look 4), "
        "accuracy {:.3f} / {:.3f}\n",
        histories, median_of(r), kb::stats::quantile(r, 0.9), kb::stats::quantile(r, 0.99),
        *std::max_element(r.begin(), r.end()), accuracy_ci(a.r), summarize(t.r).median_samples,
        summarize(t4.r).median_samples, summarize(t.r).accuracy, summarize(t4.r).accuracy);
  }
  // A/A: no step (threshold 0.25%): the reproduction must end it.
  {
    const SimConfig c = l3_config(base, 256, 0, 0.0025);
    const L3Row a = l3_runs(c, histories, threads, seed, true, any_history);
    int not_rep = 0, named = 0;
    for (const auto& r : a.r) {
      not_rep += r.verdict == "not-reproduced";
      named += r.verdict == "culprit";
    }
    std::cout << fmt::format(
        "A/A (no step, 256 commits, threshold 0.25%): not-reproduced {:.4f}, a culprit named {} of {}, runs median {:.0f} "
        "p90 {:.0f}\n",
        double(not_rep) / a.r.size(), named, a.r.size(), summarize(a.r).median_samples, summarize(a.r).p90_samples);
  }
  // Parallel runs, outliers, the cost of a build: 1024 commits, 0.5% (outliers: 256 commits, 1%).
  {
    const SimConfig c = l3_config(base, 1024, 0.005, 0.0025);
    const int nh = std::max(1, histories / 4);
    std::string line = fmt::format("parallel (1024 commits, 0.5%, {} histories):", nh);
    for (int p : {1, 2, 4, 8}) {
      const L3Row a = l3_runs(c, nh, threads, seed, true, any_history, p);
      line += fmt::format(" P={}: runs {:.0f}, wall {:.1f} runs, builds {:.0f}, accuracy {:.3f};", p,
                          summarize(a.r).median_samples, median_of(a.wall), summarize(a.r).median_builds,
                          summarize(a.r).accuracy);
    }
    std::cout << line << "\n";
    line = fmt::format("a build's cost in runs when choosing where to run (1024 commits, 0.5%, {} histories):", nh);
    for (double b : {0.0, 1.0, 5.0}) {
      SimConfig cb = c;
      cb.build_cost = b;
      const L3Row a = l3_runs(cb, nh, threads, seed, true, any_history);
      line += fmt::format(" {:g}: runs {:.0f}, builds {:.0f}, accuracy {:.3f};", b, summarize(a.r).median_samples,
                          summarize(a.r).median_builds, summarize(a.r).accuracy);
    }
    std::cout << line << "\n";
    // Several changes: +1%, +1%, then a partial recovery of -0.5% (at least 32 commits apart), improvements asked.
    {
      std::vector<MethodResult> r(static_cast<size_t>(nh));
      parallel_for(nh, threads, [&](int i) {
        const uint64_t s = seed * 1000003ULL + uint64_t(i);
        const History h = kb::bisect::make_history_steps(c, s, {0.01, 0.01, -0.005}, 32);
        RunOptions o;
        o.use_hashes = false;
        o.expensive = true;
        o.report_improvements = true;
        r[size_t(i)] = kb::bisect::run_kbisect(c, h, s, o);
      });
      int both = 0, all = 0, spurious = 0;
      for (const auto& x : r) {
        both += x.regressions_true == 2;
        all += x.all_found;
        spurious += x.regressions_found - x.regressions_true + x.improvements_found - x.improvements_true;
      }
      std::cout << fmt::format(
          "several changes (+1%, +1%, -0.5% partial recovery; 1024 commits, threshold 0.25%, {} histories): both "
          "regressions named {:.3f}, all three {:.3f}, spurious {}; runs median {:.0f}, p90 {:.0f}\n",
          nh, double(both) / nh, double(all) / nh, spurious, summarize(r).median_samples, summarize(r).p90_samples);
    }
    SimConfig co = l3_config(base, 256, 0.01, 0.005);
    co.noise.outlier_rate = 0.02;
    const L3Row a = l3_runs(co, nh, threads, seed, true, any_history);
    const L3Row t = l3_runs(co, std::min(nh, today_histories), threads, seed, false, any_history);
    const std::vector<double> r = runs_of(a);
    std::cout << fmt::format(
        "2% outliers (+2..13%; 256 commits, 1%, {} histories): runs median {:.0f}, mean {:.1f}, p90 {:.0f}, max {:.0f}, "
        "accuracy {:.3f}; today's design {:.0f} runs, accuracy {:.3f}\n",
        nh, median_of(r), mean_of(r), kb::stats::quantile(r, 0.9), *std::max_element(r.begin(), r.end()),
        summarize(a.r).accuracy, summarize(t.r).median_samples, summarize(t.r).accuracy);
  }
}

// Kernel timing (the spec scenario's model: 1% noise, 2% outliers, 30% code-changing commits, code hashes,
// blocks of 4): today's design against single samples of fresh loads decided on the posterior, where a
// sample is cheap and a build is what costs (build_cost: a build's price in samples for the choice).
inline void kernel_table(const SimConfig& c, int histories, int threads, uint64_t seed) {
  std::string line = fmt::format("kernel timing with expensive samples ({} histories, {} commits, {:.1f}% step):",
                                 histories, c.commits, 100 * c.step);
  for (int mode = 0; mode < 3; ++mode) {
    SimConfig k = c;
    k.build_cost = mode == 2 ? 100 : 0;
    k.max_runs = 4000;
    std::vector<MethodResult> r(static_cast<size_t>(histories));
    parallel_for(histories, threads, [&](int i) {
      const uint64_t s = seed * 1000003ULL + uint64_t(i);
      const History h = kb::bisect::make_history(k, s);
      RunOptions o;
      o.expensive = mode > 0;
      r[size_t(i)] = kb::bisect::run_kbisect(k, h, s, o);
    });
    const Summary x = summarize(r);
    line += fmt::format(" {}: accuracy {:.3f}, builds {:.0f}, samples {:.0f};",
                        mode == 0 ? "today (blocks)" : mode == 1 ? "expensive" : "expensive, a build = 100 samples",
                        x.accuracy, x.median_builds, x.median_samples);
  }
  std::cout << line << "\n";
}

}  // namespace bisect_sim
