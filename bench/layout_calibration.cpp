// Do `kbisect ab`'s confidence intervals tell the truth across processes?
//
// Within one process the placement of code and data is one draw; the block design re-draws it per block
// (docs/statistics.md, "Placement per block"), so each process's CI should cover what other processes
// measure. This program checks that on the machine at hand: for each pair of builds it runs `kbisect ab`
// in P separate processes (default 10) on matmul_tiled (CPU backend, MR=6 NR=16, fp32, 256^3) and
// compares the processes with each other:
//   (a) same:  clang-19 -O3 on both sides (two loads of one build);
//   (b) align: one source built with -falign-functions=16 against -falign-functions=64;
//   (c) O3-O2: clang-19 -O3 against -O2;
//   (d) clang: clang-19 against clang-16 (-O3).
// All with -march=x86-64-v3, so the figures mean the same on any x86-64 machine that runs them.
// For each pair it prints every process's estimate and CI, then
//   sd_ratio = between-process standard deviation of the estimates / (mean CI half-width / 1.96)
//   coverage = share of processes whose CI contains the median of all the estimates.
// Honest CIs give sd_ratio near 1 (targets: <= 1.3) and coverage near the CI's confidence (>= 0.9).
// The last line is `layout_calibration: worst_coverage=<x> worst_sd_ratio=<y>`.
//
// Usage: layout_calibration [--processes P] [--budget-s S] [--pairs a,b,c,d] [--min-blocks N]
//                           [--placement process|loads] [--kbisect PATH] [--keep DIR]
// (--min-blocks and --placement go to every `kbisect ab`; by default ab's own: its first look, and a
// process per block, harness/block_worker.h)
// Needs clang++-19 and clang++-16 (scripts/install-deps). It takes about P x 4 x (S + 2) seconds; run it
// on a quiet machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/ab_processes.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "stats/stats.h"

using namespace kb;
using namespace kb::bench;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  int processes = 10;
  double budget_s = 6;
  std::string pairs_arg = "a,b,c,d", kbisect, keep;
  std::vector<std::string> ab_extra;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "layout_calibration: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--processes") processes = std::stoi(next());
    else if (a == "--budget-s") budget_s = std::stod(next());
    else if (a == "--pairs") pairs_arg = next();
    else if (a == "--kbisect") kbisect = next();
    else if (a == "--keep") keep = next();
    else if (a == "--min-blocks" || a == "--placement") {
      ab_extra.push_back(a);
      ab_extra.push_back(next());
    }
    else {
      std::cerr << "layout_calibration: unknown argument '" << a << "' (see the comment at the top of "
                << "bench/layout_calibration.cpp)\n";
      return 2;
    }
  }
  if (processes < 3) {
    std::cerr << "layout_calibration: --processes " << processes << " must be at least 3\n";
    return 2;
  }
  if (kbisect.empty()) kbisect = (fs::path(executable_path()).parent_path().parent_path() / "kbisect").string();
  if (!fs::exists(kbisect)) {
    std::cerr << "layout_calibration: no kbisect at " << kbisect << " (build it, or pass --kbisect)\n";
    return 3;
  }
  const std::string root = keep.empty() ? temp_dir("kb-layout-calibration") : keep;
  make_dirs(root);
  std::string extra;
  for (const auto& x : ab_extra) extra += " " + x;
  std::cout << fmt::format("machine: {}, {} processes per pair, ab budget {} s per process{}\n", cpu_model(),
                           processes, budget_s, extra.empty() ? "" : ", ab" + extra);
  double worst_cov = 1, worst_ratio = 0;
  for (const auto& p : all_pairs()) {
    if (pairs_arg.find(p.id) == std::string::npos) continue;
    const std::string dir = root + "/" + p.id;
    write_pair(dir, p);
    std::vector<Estimate> es;
    for (int k = 0; k < processes; ++k) {
      try {
        es.push_back(run_ab(kbisect, dir, fmt::format("{}/run{}", dir, k), budget_s, ab_extra));
      } catch (const Error& e) {
        std::cerr << "layout_calibration: pair " << p.id << ", process " << k << ": " << e.what() << "\n";
        return 1;
      }
      const auto& e = es.back();
      std::cerr << fmt::format("  ({}) process {}: {:+.2f}% [{:+.2f}%, {:+.2f}%] {}\n", p.id, k + 1, e.effect, e.lo,
                               e.hi, e.verdict);
    }
    std::vector<double> eff, half;
    for (const auto& e : es) {
      eff.push_back(e.effect);
      half.push_back((e.hi - e.lo) / 2);
    }
    const double med = stats::median(eff), sd = stats::stddev(eff);
    double mean_half = 0;
    for (double h : half) mean_half += h / double(half.size());
    const double implied_se = mean_half / 1.96;
    const double ratio = implied_se > 0 ? sd / implied_se : INFINITY;
    int covered = 0;
    for (const auto& e : es) covered += e.lo <= med && med <= e.hi;
    const double cov = double(covered) / double(es.size());
    std::cout << fmt::format("({}) {}:\n", p.id, p.what);
    std::string line = "    estimates:";
    for (const auto& e : es) line += fmt::format(" {:+.2f}% [{:+.2f}, {:+.2f}]", e.effect, e.lo, e.hi);
    std::cout << line << "\n";
    std::cout << fmt::format(
        "    median {:+.3f}%, between-process sd {:.3f}%, mean CI half-width {:.3f}% (/1.96 = {:.3f}%): "
        "sd_ratio {:.2f}; coverage {:.2f} ({} of {})\n",
        med, sd, mean_half, implied_se, ratio, cov, covered, es.size());
    worst_cov = std::min(worst_cov, cov);
    worst_ratio = std::max(worst_ratio, ratio);
  }
  if (keep.empty()) remove_tree(root);
  std::cout << fmt::format("layout_calibration: worst_coverage={:.2f} worst_sd_ratio={:.2f}\n", worst_cov,
                           worst_ratio);
  return 0;
}
