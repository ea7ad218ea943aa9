#include "presubmit/choice.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "stats/sample_size.h"

namespace kb::presubmit {

double value_of(const Candidate& c) {
  return c.weight * (1 + std::max(0, c.change_points)) * (1 + std::max(0.0, c.static_size));
}

std::vector<bool> knapsack(const std::vector<double>& values, const std::vector<double>& costs, double capacity,
                           int units) {
  if (values.size() != costs.size()) throw Error("internal: knapsack needs one cost per value");
  const size_t n = values.size();
  std::vector<bool> take(n, false);
  if (n == 0 || !(capacity > 0) || units < 1) return take;
  // Bound the table (items × units bits) to ~64 MiB for very large candidate lists.
  const int64_t cap_units = std::max<int64_t>(1, std::min<int64_t>(units, int64_t(5e8) / int64_t(n)));
  const double unit = capacity / double(cap_units);
  std::vector<int64_t> w(n);
  for (size_t i = 0; i < n; ++i) {
    if (!(costs[i] >= 0) || !(values[i] >= 0)) throw Error("internal: knapsack needs non-negative values and costs");
    const double u = std::ceil(costs[i] / unit - 1e-9);
    w[i] = u > double(cap_units) ? cap_units + 1 : int64_t(u);
  }
  std::vector<double> best(size_t(cap_units) + 1, 0.0);
  std::vector<std::vector<bool>> keep(n, std::vector<bool>(size_t(cap_units) + 1, false));
  for (size_t i = 0; i < n; ++i) {
    if (w[i] > cap_units) continue;
    for (int64_t c = cap_units; c >= w[i]; --c) {
      const double with = best[size_t(c - w[i])] + values[i];
      if (with > best[size_t(c)]) {
        best[size_t(c)] = with;
        keep[i][size_t(c)] = true;
      }
    }
  }
  for (int64_t c = cap_units, i = int64_t(n) - 1; i >= 0; --i)
    if (keep[size_t(i)][size_t(c)]) {
      take[size_t(i)] = true;
      c -= w[size_t(i)];
    }
  return take;
}

Choice choose(const std::vector<Candidate>& candidates, double budget_s) {
  std::vector<double> values, costs;
  for (const auto& c : candidates) {
    values.push_back(value_of(c));
    costs.push_back(c.cost_s);
  }
  Choice ch;
  ch.chosen = knapsack(values, costs, budget_s);
  for (size_t i = 0; i < candidates.size(); ++i)
    if (ch.chosen[i]) {
      ch.value += values[i];
      ch.cost_s += costs[i];
    }
  return ch;
}

std::vector<size_t> measuring_order(const std::vector<Candidate>& candidates, double budget_s) {
  const Choice ch = choose(candidates, budget_s);
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (ch.chosen[i]) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return value_of(candidates[a]) / candidates[a].cost_s > value_of(candidates[b]) / candidates[b].cost_s;
  });
  return order;
}

CostModel cost_model(const PresubmitConfig& cfg) {
  CostModel m;
  m.threshold = cfg.threshold;
  m.alpha = cfg.measure.alpha;
  m.block_pairs = cfg.measure.block_pairs;
  m.min_blocks = cfg.measure.min_blocks;
  m.max_blocks = cfg.measure.max_blocks;
  m.block_overhead_s = cfg.measure.block_overhead_s;
  m.placement_sd = cfg.measure.placement_sd;
  return m;
}

namespace {
Cost priced(const CostModel& m, double block_s, double block_sd, const char* from, double effect = 0) {
  stats::DecisionConfig d;
  d.threshold = m.threshold;
  d.alpha = m.alpha;
  d.min_n = m.min_blocks;
  d.max_n = m.max_blocks;
  Cost c;
  c.from = from;
  c.block_s = block_s;
  c.block_sd = block_sd;
  c.blocks = stats::samples_to_decide(block_sd, d, &c.reached, effect);
  c.seconds = double(c.blocks) * block_s;
  return c;
}
}  // namespace

Cost cost_from_history(const CostModel& m, double sample_s, double sample_cv) {
  if (!(sample_s > 0) || !(sample_cv >= 0))
    throw InputError(fmt::format("history: time per sample {} s and spread {} cannot price a case", sample_s, sample_cv));
  const double pairs = double(m.block_pairs);
  const double median_sd = stats::kMedianSe * std::sqrt(2.0) * sample_cv / std::sqrt(pairs);
  const double block_sd = std::hypot(median_sd, m.placement_sd);
  return priced(m, 2 * pairs * sample_s + m.block_overhead_s, block_sd, "history");
}

Cost cost_from_pilot(const CostModel& m, double block_s, const std::vector<double>& block_effects) {
  if (block_effects.size() < 2 || !(block_s > 0))
    throw Error(fmt::format("internal: a pilot of {} blocks cannot price a case", block_effects.size()));
  // The pilot's few blocks estimate the spread poorly: never below what placement alone gives. Its effect is
  // taken one standard error closer to 0 than its median (a pilot that saw +20% prices the case as one whose CI
  // must clear 0 by that much less).
  const double sd = std::max(stats::stddev(block_effects), m.placement_sd);
  const double se = sd / std::sqrt(double(block_effects.size()));
  const double effect = std::max(0.0, std::abs(stats::median(block_effects)) - se);
  Cost c = priced(m, block_s, sd, "pilot", effect);
  c.effect = effect;
  return c;
}

}  // namespace kb::presubmit
