// bisect_sim: seeded synthetic histories driving the real bisection loop, strategy and decisions
// (bisect/simulate), compared with plain bisect and a Pinpoint emulation on the same histories.
//
//   bisect_sim [--histories N] [--commits N] [--step F] [--cv F] [--outliers F] [--build-fail F]
//              [--code-change F] [--threshold F] [--max-samples N] [--threads N] [--seed S]
//
// Last line: bisect_sim: accuracy=<a> median_builds=<b> median_samples=<c> pinpoint_samples=<d> measured_fraction=<e>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bisect/simulate.h"
#include "harness/stats.h"

using namespace kb::bisect;

namespace {

struct Summary {
  double accuracy = 0, exact = 0, median_builds = 0, median_samples = 0, measured_fraction = 0;
  double p90_samples = 0;
};

Summary summarize(const std::vector<MethodResult>& rs) {
  Summary s;
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

}  // namespace

int main(int argc, char** argv) {
  SimConfig c;
  int histories = 200, threads = int(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) {
      if (std::strcmp(argv[i], name) != 0 || i + 1 >= argc) return (const char*)nullptr;
      return (const char*)argv[++i];
    };
    if (auto v = arg("--histories")) histories = std::atoi(v);
    else if (auto v = arg("--commits")) c.commits = std::atoi(v);
    else if (auto v = arg("--step")) c.step = std::atof(v);
    else if (auto v = arg("--cv")) c.noise.cv = std::atof(v);
    else if (auto v = arg("--outliers")) c.noise.outlier_rate = std::atof(v);
    else if (auto v = arg("--build-fail")) c.build_fail = std::atof(v);
    else if (auto v = arg("--code-change")) c.code_change = std::atof(v);
    else if (auto v = arg("--threshold")) c.threshold = std::atof(v);
    else if (auto v = arg("--max-samples")) c.max_samples_per_step = std::atoi(v);
    else if (auto v = arg("--threads")) threads = std::max(1, std::atoi(v));
    else if (auto v = arg("--seed")) seed = std::strtoull(v, nullptr, 10);
    else {
      std::cerr << "usage: bisect_sim [--histories N] [--commits N] [--step F] [--cv F] [--outliers F] "
                   "[--build-fail F] [--code-change F] [--threshold F] [--max-samples N] [--threads N] [--seed S]\n";
      return 2;
    }
  }
  std::cout << fmt::format(
      "bisect_sim: {} histories of {} commits; one {:.2f}% step at a random commit; noise CV {:.1f}% lognormal, "
      "{:.0f}% outliers (+2..13%); builds fail at {:.0f}% of commits; {:.0f}% of commits leave the kernel's code "
      "unchanged\n",
      histories, c.commits, 100 * c.step, 100 * c.noise.cv, 100 * c.noise.outlier_rate, 100 * c.build_fail,
      100 * (1 - c.code_change));
  std::cout << fmt::format(
      "kbisect: threshold {:.2f}%, alpha {}, looks at {}..{} rounds; plain: {} samples/side, MWU alpha {}; "
      "pinpoint: {}..{} samples/side, different p<={}, same p>{}\n\n",
      100 * c.threshold, c.alpha, c.min_samples, c.max_samples_per_step, c.plain_samples, c.plain_alpha,
      c.pinpoint_start, c.pinpoint_max, c.pinpoint_p_diff, c.pinpoint_p_same);

  const size_t nh = static_cast<size_t>(histories);
  std::vector<MethodResult> kbs(nh), plain(nh), pin(nh);
  std::atomic<int> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < histories;) {
        const uint64_t s = seed * 1000003ULL + uint64_t(i);
        History h = make_history(c, s);
        kbs[size_t(i)] = run_kbisect(c, h, s);
        plain[size_t(i)] = run_plain_bisect(c, h, s);
        pin[size_t(i)] = run_pinpoint(c, h, s);
      }
    });
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Summary a = summarize(kbs), p = summarize(plain), q = summarize(pin);
  std::cout << fmt::format("{:<10} {:>9} {:>7} {:>14} {:>15} {:>12} {:>18}\n", "method", "accuracy", "exact",
                           "median builds", "median samples", "p90 samples", "measured/visited");
  for (auto [name, s] : {std::pair<const char*, Summary>{"kbisect", a}, {"plain", p}, {"pinpoint", q}})
    std::cout << fmt::format("{:<10} {:>9.3f} {:>7.3f} {:>14.1f} {:>15.0f} {:>12.0f} {:>18.3f}\n", name, s.accuracy,
                             s.exact, s.median_builds, s.median_samples, s.p90_samples, s.measured_fraction);
  int verdicts_unverified = 0, verdicts_other = 0;
  for (const auto& r : kbs) {
    if (r.verdict == "unverified") ++verdicts_unverified;
    else if (r.verdict != "culprit" && r.verdict != "ambiguous") ++verdicts_other;
  }
  std::cout << fmt::format(
      "\naccuracy: the culprit named, or an ambiguous answer whose candidates hold it and are, but for the last, "
      "unbuildable (what git bisect also answers); exact: the culprit named.\nkbisect verdicts other than culprit/ambiguous: {} unverified, {} other. "
      "{:.1f} s on {} threads.\n",
      verdicts_unverified, verdicts_other, secs, threads);
  std::cout << fmt::format(
      "bisect_sim: accuracy={:.3f} median_builds={:.0f} median_samples={:.0f} pinpoint_samples={:.0f} "
      "measured_fraction={:.3f}\n",
      a.accuracy, a.median_builds, a.median_samples, q.median_samples, a.measured_fraction);
  return 0;
}
