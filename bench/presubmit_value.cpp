// presubmit_value: how much of the regressions' value a presubmit catches per share of the GPU time that
// timing a whole tier takes, against timing the tier in order and in a random order (issue 47, item 6).
//
//   presubmit_value [--cases N] [--diffs D] [--seed S] [--threshold F]
//
// The model (docs/presubmit.md, "The benchmark", says why each part is there):
// - a tier of N cases, each with a weight (15% production shapes weigh 5, 25% weigh 2, the rest 1), a time per
//   execution (lognormal, median 1 ms), a per-sample noise (lognormal, median 2%) and a hidden sensitivity to
//   compiler changes (lognormal, mean 1: some kernels sit near a register or occupancy cliff);
// - a history: 60 nights before the diffs, each changing a random 10% of the cases, and every diff after them;
//   a changed case regresses (or improves) with probability 5% × sensitivity × (1 + 4 × static change size);
//   the nightly's change-point scan sees a step of 2% or more 99.9% of the time and a smaller one 85.5%
//   (docs/nightly.md, CV 0.5%); those counts are what presubmit reads;
// - a diff changes the code of a share of the cases (typical: 2-20%, drawn per diff; an LLVM bump: all), each
//   with a static change size (exponential, mean 0.05; 0.1 for the bump); a regression's effect is 1-4x the
//   threshold;
// - every method measures a case the same way: the real sequential decision (stats::SequentialPaired) on
//   simulated block medians whose spread is the cost model's, off by a lognormal factor (sd 0.3, the model
//   is never exact), up to twice its predicted blocks and within what is left of the budget; a `worse` is
//   measured again and stands unless that says same or better (presubmit/measure.h);
// - presubmit knows which cases changed code (the code hash), their static change sizes, weights and change
//   points, and prices them from their history (time and noise, each estimated with 10-20% error); it picks
//   with the knapsack (presubmit::choose) and measures in order of value per second. Tier order and random
//   measure every case (what timing a tier per diff does today), and, as a second pair of columns, only the
//   changed ones (given the code-hash filter, to isolate the choice rule).
// The budget is a share (5%, 10%, 20%) of the time timing the whole tier takes: every case measured to its
// decision by the same procedure, on a diff that changes nothing. Printed: the value-weighted share of the
// regressions caught, summed over all diffs of a scenario.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "presubmit/choice.h"
#include "stats/stats.h"

using namespace kb;
using namespace kb::presubmit;

namespace {

struct Args {
  int cases = 200, diffs = 100;
  uint64_t seed = 1;
  double threshold = 0.01;
};

struct Case {
  double weight = 1, t = 1e-3, cv = 0.02, sensitivity = 1;
  int change_points = 0;
  Cost predicted;           // from its history, as presubmit prices it
  double true_sd = 0;       // the real spread of its block medians
};

struct Diff {
  std::vector<bool> changed;
  std::vector<double> size, effect;  // static change size; log-ratio of a regression (0: none)
};

double lognormal(Rng& r, double median, double sigma) { return median * std::exp(sigma * r.normal()); }

std::vector<Case> make_tier(const Args& a, const CostModel& m, Rng& r) {
  std::vector<Case> t(size_t(a.cases));
  for (auto& c : t) {
    const double u = r.uniform();
    c.weight = u < 0.15 ? 5 : u < 0.40 ? 2 : 1;
    c.t = std::clamp(lognormal(r, 1e-3, 1.0), 2e-5, 5e-2);
    c.cv = std::clamp(lognormal(r, 0.02, 0.5), 0.003, 0.2);
    c.sensitivity = lognormal(r, std::exp(-0.5), 1.0);  // mean 1
    c.predicted = cost_from_history(m, c.t * std::exp(0.1 * r.normal()), c.cv * std::exp(0.2 * r.normal()));
    const Cost exact = cost_from_history(m, c.t, c.cv);
    c.true_sd = exact.block_sd * std::exp(0.3 * r.normal());
    c.predicted.block_s = exact.block_s;  // a block takes what it takes; the prediction's error is in the spread
    c.predicted.seconds = double(c.predicted.blocks) * c.predicted.block_s;
  }
  return t;
}

// One diff (or night): which cases change code, by how much statically, and which of them regress.
Diff make_diff(const std::vector<Case>& tier, double share, double mean_size, double threshold, Rng& r) {
  Diff d;
  const size_t n = tier.size();
  d.changed.assign(n, false);
  d.size.assign(n, 0);
  d.effect.assign(n, 0);
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  r.shuffle(idx);
  const size_t k = share > 0 ? std::max<size_t>(1, size_t(std::lround(share * double(n)))) : 0;
  for (size_t j = 0; j < std::min(k, n); ++j) {
    const size_t i = idx[j];
    d.changed[i] = true;
    d.size[i] = -mean_size * std::log(1 - r.uniform());
    const double p = std::min(0.9, 0.05 * tier[i].sensitivity * (1 + 4 * d.size[i]));
    if (r.uniform() < p) d.effect[i] = std::log1p(threshold * (1 + 3 * r.uniform()));
  }
  return d;
}

// What the nightly's change-point scan records of a diff once it is on trunk: regressions and as many
// improvements (drawn alike), each seen with the scan's power for its size.
void record_in_history(std::vector<Case>& tier, const Diff& d, double threshold, Rng& r) {
  for (size_t i = 0; i < tier.size(); ++i) {
    if (!d.changed[i]) continue;
    double steps[2] = {d.effect[i], 0};
    const double p = std::min(0.9, 0.05 * tier[i].sensitivity * (1 + 4 * d.size[i]));
    if (r.uniform() < p) steps[1] = std::log1p(threshold * (1 + 3 * r.uniform()));  // an improvement
    for (double s : steps)
      if (s > 0 && r.uniform() < (s >= std::log(1.02) ? 0.999 : 0.855)) ++tier[i].change_points;
  }
}

// The sequential decision on simulated block medians: at most `allowed` blocks; the verdict and blocks used.
std::pair<stats::Verdict, int64_t> simulate_ab(const CostModel& m, double effect, double sd, int64_t allowed, Rng& r) {
  stats::DecisionConfig d;
  d.threshold = m.threshold;
  d.alpha = m.alpha;
  d.min_n = m.min_blocks;
  d.max_n = m.max_blocks;
  stats::SequentialPaired seq(d);
  std::vector<double> blocks;
  stats::Decision last;
  for (int64_t b = 1; b <= std::min<int64_t>(allowed, m.max_blocks); ++b) {
    blocks.push_back(effect + sd * r.normal());
    const bool end = b == std::min<int64_t>(allowed, m.max_blocks);
    if (seq.is_look(b) || end) {
      last = seq.look_log_ratios(blocks, end);
      if (last.verdict != stats::Verdict::unsure) return {last.verdict, b};
    }
  }
  return {stats::Verdict::unsure, int64_t(blocks.size())};
}

// Measures one case as presubmit/measure.cpp does, within `left` seconds (reduced by what it spends): the
// A/B up to twice its predicted blocks, and a `worse` once more; the weight it catches.
double measure_case(const Case& c, const Diff& d, size_t i, double& left, const CostModel& m, Rng& r) {
  const double block_s = c.predicted.block_s;
  const int64_t allowed = std::min<int64_t>(2 * c.predicted.blocks, int64_t(left / block_s));
  if (allowed < 2) return 0;
  const double effect = d.changed[i] ? d.effect[i] : 0;
  auto [v, used] = simulate_ab(m, effect, c.true_sd, allowed, r);
  left -= double(used) * block_s;
  if (v != stats::Verdict::worse) return 0;
  const int64_t again = std::min<int64_t>(2 * used, int64_t(left / block_s));
  bool stands = true;  // no time to confirm: it stands, unconfirmed
  if (again >= 2) {
    auto [v2, used2] = simulate_ab(m, effect, c.true_sd, again, r);
    left -= double(used2) * block_s;
    stands = v2 != stats::Verdict::same && v2 != stats::Verdict::better;
  }
  return stands && effect > 0 ? c.weight : 0;
}

// Tier order and random: the cases in `order`, each while the budget lasts (one that no longer fits is passed
// over for a cheaper one).
double run_order(const std::vector<Case>& tier, const Diff& d, const std::vector<size_t>& order, double budget,
                 const CostModel& m, Rng& r) {
  double left = budget, caught = 0;
  for (size_t i : order) caught += measure_case(tier[i], d, i, left, m, r);
  return caught;
}

// Presubmit: rounds of measuring_order (the knapsack) over the changed cases not yet measured, as
// presubmit/presubmit.cpp does.
double run_presubmit(const std::vector<Case>& tier, const Diff& d, double budget, const CostModel& m, Rng& r) {
  std::vector<size_t> pending;
  for (size_t i = 0; i < tier.size(); ++i)
    if (d.changed[i]) pending.push_back(i);
  double left = budget, caught = 0;
  while (!pending.empty()) {
    std::vector<Candidate> cands;
    for (size_t i : pending) cands.push_back({tier[i].weight, tier[i].change_points, d.size[i], tier[i].predicted.seconds});
    const std::vector<size_t> order = measuring_order(cands, left);
    if (order.empty()) break;
    std::vector<bool> chosen(pending.size(), false);
    for (size_t j : order) {
      chosen[j] = true;
      caught += measure_case(tier[pending[j]], d, pending[j], left, m, r);
    }
    std::vector<size_t> next;
    for (size_t j = 0; j < pending.size(); ++j)
      if (!chosen[j]) next.push_back(pending[j]);
    pending = std::move(next);
  }
  return caught;
}

constexpr double kBudgets[] = {0.05, 0.10, 0.20};
constexpr int kMethods = 5;
const char* kMethodNames[kMethods] = {"presubmit", "tier order", "random", "tier order, changed only",
                                      "random, changed only"};

struct Scenario {
  std::string name;
  double share_lo, share_hi, mean_size;
};

// caught[budget][method] / total, over all diffs of the scenario.
std::vector<std::vector<double>> run_scenario(const Args& a, const Scenario& s, const CostModel& m, uint64_t seed) {
  Rng r(seed);
  std::vector<Case> tier = make_tier(a, m, r);
  for (int night = 0; night < 60; ++night) record_in_history(tier, make_diff(tier, 0.10, 0.05, a.threshold, r), a.threshold, r);
  // Timing the whole tier: every case measured to its decision on a diff that changes nothing.
  double whole = 0;
  {
    const Diff none = make_diff(tier, 0, 0, a.threshold, r);
    for (size_t i = 0; i < tier.size(); ++i) {
      double left = 1e9;  // no budget limit (and exact differences in a double)
      measure_case(tier[i], none, i, left, m, r);
      whole += 1e9 - left;
    }
  }
  std::vector<std::vector<double>> caught(std::size(kBudgets), std::vector<double>(kMethods, 0));
  double total = 0;
  std::vector<size_t> all(tier.size());
  std::iota(all.begin(), all.end(), 0);
  for (int k = 0; k < a.diffs; ++k) {
    const double share = s.share_lo + (s.share_hi - s.share_lo) * r.uniform();
    const Diff d = make_diff(tier, share, s.mean_size, a.threshold, r);
    for (size_t i = 0; i < tier.size(); ++i)
      if (d.effect[i] > 0) total += tier[i].weight;
    std::vector<size_t> changed, shuffled = all;
    for (size_t i : all)
      if (d.changed[i]) changed.push_back(i);
    r.shuffle(shuffled);
    std::vector<size_t> shuffled_changed = changed;
    r.shuffle(shuffled_changed);
    for (size_t b = 0; b < std::size(kBudgets); ++b) {
      const double budget = kBudgets[b] * whole;
      const std::vector<size_t>* orders[kMethods] = {nullptr, &all, &shuffled, &changed, &shuffled_changed};
      caught[b][0] += run_presubmit(tier, d, budget, m, r);
      for (int meth = 1; meth < kMethods; ++meth) caught[b][size_t(meth)] += run_order(tier, d, *orders[meth], budget, m, r);
    }
    record_in_history(tier, d, a.threshold, r);
  }
  for (auto& row : caught)
    for (auto& x : row) x = total > 0 ? x / total : 0;
  return caught;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "presubmit_value: " << k << " needs a value\n";
      return 2;
    }
    const std::string v = argv[++i];
    if (k == "--cases") a.cases = std::atoi(v.c_str());
    else if (k == "--diffs") a.diffs = std::atoi(v.c_str());
    else if (k == "--seed") a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--threshold") a.threshold = std::atof(v.c_str());
    else {
      std::cerr << "presubmit_value: unknown option " << k << "\n";
      return 2;
    }
  }
  if (a.cases < 10 || a.diffs < 1 || !(a.threshold > 0 && a.threshold < 1)) {
    std::cerr << "presubmit_value: need --cases >= 10, --diffs >= 1, --threshold in (0, 1)\n";
    return 2;
  }
  CostModel m;  // the defaults of presubmit's measure: 16 pairs a block, looks at 10..160 blocks, alpha 0.05
  m.threshold = a.threshold;
  const auto t0 = std::chrono::steady_clock::now();
  std::cout << fmt::format("tier of {} cases, {} diffs per scenario, threshold {:g}%, seed {}\n", a.cases, a.diffs,
                           100 * a.threshold, a.seed);
  const Scenario typical{"typical diffs: 2-20% of the cases change code", 0.02, 0.20, 0.05};
  const Scenario bump{"LLVM bump: every case changes code", 1.0, 1.0, 0.10};
  std::vector<std::vector<std::vector<double>>> results;
  for (const Scenario* s : {&typical, &bump}) {
    results.push_back(run_scenario(a, *s, m, a.seed + (s == &bump ? 1000 : 0)));
    std::cout << fmt::format("\n{}: value-weighted share of the regressions caught\n\n| budget |", s->name);
    for (const char* n : kMethodNames) std::cout << " " << n << " |";
    std::cout << "\n|---|---:|---:|---:|---:|---:|\n";
    for (size_t b = 0; b < std::size(kBudgets); ++b) {
      std::cout << fmt::format("| {:.0f}% of the tier |", 100 * kBudgets[b]);
      for (double x : results.back()[b]) std::cout << fmt::format(" {:.3f} |", x);
      std::cout << "\n";
    }
  }
  const double typical20 = results[0][2][0];
  const double bump_ratio = results[1][2][0] / std::max(1e-9, results[1][2][1]);
  std::cout << fmt::format("\ntarget: at 20% with at most 20% changed, presubmit catches >= 95%: {:.3f} ({})\n", typical20,
                           typical20 >= 0.95 ? "met" : "not met");
  std::cout << fmt::format("target: LLVM bump at 20%, presubmit >= 2x tier order: {:.2f}x ({})\n", bump_ratio,
                           bump_ratio >= 2 ? "met" : "not met");
  for (size_t b = 0; b < 2; ++b)
    std::cout << fmt::format("LLVM bump at {:.0f}%: presubmit / tier order = {:.2f}x\n", 100 * kBudgets[b],
                             results[1][b][0] / std::max(1e-9, results[1][b][1]));
  std::cout << fmt::format("presubmit_value: typical_20pct={:.3f} bump_20pct_vs_tier_order={:.2f}x ({:.1f} s)\n",
                           typical20, bump_ratio,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
