// changepoint: false-positive rate and detection power/delay of the change-point scan
// (stats/changepoint: E-Divisive on log medians + permutation test) on simulated nightly series.
//
//   changepoint [--series N] [--nights N] [--cv F] [--alpha F] [--permutations N] [--min-segment N] [--seed S]
//
// A nightly series is the per-case median of each night: true time x lognormal night-to-night noise of
// CV --cv (default 0.5%; a row at 1% is printed too). Scenarios, each on --series seeded series:
//   flat               no change: any change point is a false positive
//   step X% at night 20 of 30 (10 nights after it): detected = a change point within +-2 nights of it,
//                      going up; delay = nights after the step until a streaming scan (prefixes of a
//                      40-night series) first reports it, on the first --series/5 series
//   creep 0.2%/night and 0.1%/night over 30 nights: detected = any change point going up
// Last line: changepoint: fp_rate=<x> step_0.5pct_power=<y> creep_power=<z> (at the default CV).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "stats/changepoint.h"
#include "stats/noise.h"
#include "stats/stats.h"

using namespace kb;

namespace {

struct Args {
  int series = 1000, nights = 30, min_segment = 3, permutations = 999;
  double cv = 0.005, alpha = 0.01;
  uint64_t seed = 1;
};

bool found_step(const std::vector<ChangePoint>& cps, int at) {
  for (const auto& cp : cps)
    if (std::abs(cp.index - at) <= 2 && cp.rel_change > 0) return true;
  return false;
}

bool found_up(const std::vector<ChangePoint>& cps) {
  for (const auto& cp : cps)
    if (cp.rel_change > 0) return true;
  return false;
}

struct Row {
  std::string scenario;
  double rate = 0;
  std::string delay;
};

struct Figures {
  double fp = 0, step05 = 0, creep = 0;
};

Figures run_level(const Args& a, double cv, std::vector<Row>& rows) {
  ChangePointConfig cfg;
  cfg.alpha = a.alpha;
  cfg.permutations = a.permutations;
  cfg.min_segment = a.min_segment;
  cfg.seed = a.seed;
  Figures f;
  const uint64_t base = a.seed * 1000003;
  int fp = 0;
  for (int s = 0; s < a.series; ++s)
    fp += !detect_change_points(synthetic_nightly(a.nights, cv, base + uint64_t(s), -1, 0, 0), cfg).empty();
  f.fp = double(fp) / a.series;
  rows.push_back({"flat (false positives)", f.fp, ""});

  const int at = 20, after_max = 20;
  for (double step : {0.005, 0.01, 0.02}) {
    int hit = 0;
    for (int s = 0; s < a.series; ++s)
      hit += found_step(detect_change_points(synthetic_nightly(at + 10, cv, base + 7919 + uint64_t(s), at, step, 0), cfg), at);
    // Streaming delay on a subset.
    std::vector<double> delays;
    int streams = std::max(1, a.series / 5);
    for (int s = 0; s < streams; ++s) {
      auto v = synthetic_nightly(at + after_max, cv, base + 104729 + uint64_t(s), at, step, 0);
      for (int k = 1; k <= after_max; ++k) {
        std::vector<double> prefix(v.begin(), v.begin() + at + k);
        if (found_step(detect_change_points(prefix, cfg), at)) {
          delays.push_back(k);
          break;
        }
      }
    }
    double rate = double(hit) / a.series;
    if (step == 0.005) f.step05 = rate;
    std::string delay =
        delays.empty() ? fmt::format("not seen within {} nights ({} streams)", after_max, streams)
                       : fmt::format("median {:.0f} nights after the step ({} of {} streams seen within {})",
                                     stats::median(delays), delays.size(), streams, after_max);
    rows.push_back({fmt::format("step +{:.1f}% at night {} of {}", step * 100, at + 1, at + 10), rate, delay});
  }
  for (double creep : {0.002, 0.001}) {
    int hit = 0;
    for (int s = 0; s < a.series; ++s)
      hit += found_up(detect_change_points(synthetic_nightly(a.nights, cv, base + 15485863 + uint64_t(s), -1, 0, creep), cfg));
    double rate = double(hit) / a.series;
    if (creep == 0.002) f.creep = rate;
    rows.push_back({fmt::format("creep +{:.1f}%/night over {} nights", creep * 100, a.nights), rate, ""});
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "changepoint: " << k << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--series") a.series = std::atoi(val().c_str());
    else if (k == "--nights") a.nights = std::atoi(val().c_str());
    else if (k == "--cv") a.cv = std::atof(val().c_str());
    else if (k == "--alpha") a.alpha = std::atof(val().c_str());
    else if (k == "--permutations") a.permutations = std::atoi(val().c_str());
    else if (k == "--min-segment") a.min_segment = std::atoi(val().c_str());
    else if (k == "--seed") a.seed = std::strtoull(val().c_str(), nullptr, 10);
    else {
      std::cerr << "changepoint: unknown option " << k << "\n";
      return 2;
    }
  }
  if (a.series < 1 || a.nights < 2 * a.min_segment) {
    std::cerr << "changepoint: need --series >= 1 and --nights >= 2 * --min-segment\n";
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::cout << fmt::format(
      "E-Divisive (exponent 1) on log nightly medians, permutation test: alpha={} permutations={} min_segment={} "
      "seed={}; {} series per scenario\n",
      a.alpha, a.permutations, a.min_segment, a.seed, a.series);
  Figures main_fig;
  for (double cv : {a.cv, 0.01}) {
    std::vector<Row> rows;
    Figures f = run_level(a, cv, rows);
    if (cv == a.cv) main_fig = f;
    std::cout << fmt::format("\nnight-to-night noise CV {:.2f}%\n", cv * 100);
    std::cout << fmt::format("  {:<40} {:>9}  {}\n", "scenario", "alerts", "detection delay (streaming)");
    for (const auto& r : rows) std::cout << fmt::format("  {:<40} {:>8.1f}%  {}\n", r.scenario, r.rate * 100, r.delay);
    if (a.cv == 0.01) break;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("\n{:.1f} s\n", secs);
  std::cout << fmt::format("changepoint: fp_rate={:.4f} step_0.5pct_power={:.4f} creep_power={:.4f}\n", main_fig.fp,
                           main_fig.step05, main_fig.creep);
  return 0;
}
