#include "bisect/locate.h"

#include <algorithm>
#include <cmath>

namespace kb::bisect {

std::vector<HypothesisClass> hypothesis_classes(const std::vector<double>& p, const std::vector<bool>& skipped) {
  std::vector<HypothesisClass> out;
  const int n = int(p.size());
  for (int h = 1; h < n; ++h) {
    // h joins the class of h-1 when commit h-1 (inside the range) cannot run.
    const bool join = h > 1 && size_t(h - 1) < skipped.size() && skipped[size_t(h - 1)];
    if (!join) out.push_back({h, h, 0});
    out.back().last = h;
    out.back().mass += p[size_t(h)];
  }
  return out;
}

double split_entropy(const std::vector<double>& cdf, std::vector<int> cuts) {
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  double h = 0, prev = 0;
  auto add = [&](double mass) {
    if (mass > 1e-300) h -= mass * std::log2(mass);
  };
  for (int c : cuts) {
    const double f = cdf[size_t(c)];
    add(std::max(0.0, f - prev));
    prev = std::max(prev, f);
  }
  add(std::max(0.0, 1 - prev));
  return h;
}

std::vector<int> probe_candidates(const std::vector<double>& cdf, const std::vector<bool>& skipped, int k) {
  const int n = int(cdf.size());
  std::vector<std::pair<double, int>> by;
  for (int c = 1; c + 1 < n; ++c) {
    if (size_t(c) < skipped.size() && skipped[size_t(c)]) continue;
    const double f = std::clamp(cdf[size_t(c)], 0.0, 1.0);
    const double h = (f > 0 && f < 1) ? -f * std::log2(f) - (1 - f) * std::log2(1 - f) : 0;
    by.push_back({-h, c});
  }
  std::stable_sort(by.begin(), by.end());
  std::vector<int> out;
  for (size_t i = 0; i < by.size() && int(out.size()) < k; ++i) out.push_back(by[i].second);
  out.push_back(0);
  out.push_back(n - 1);
  return out;
}

std::optional<int> choose_probe(const std::vector<int>& cands, const std::vector<double>& info,
                                const std::vector<double>& cdf, const std::vector<int>& flying,
                                const std::vector<bool>& built, double build_cost) {
  const int n = int(cdf.size());
  const double base = split_entropy(cdf, flying);
  std::optional<int> best;
  double best_score = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int c = cands[i];
    if (std::find(flying.begin(), flying.end(), c) != flying.end()) continue;
    double share = 1;
    if (!flying.empty() && c > 0 && c + 1 < n) {
      std::vector<int> cuts = flying;
      cuts.push_back(c);
      const double alone = split_entropy(cdf, {c});
      share = alone > 1e-12 ? std::clamp((split_entropy(cdf, cuts) - base) / alone, 0.0, 1.0) : 0.0;
    }
    const bool is_built = size_t(c) < built.size() && built[size_t(c)];
    const double score = info[i] * share / (1 + (is_built ? 0 : std::max(0.0, build_cost)));
    if (score > 1e-9 && (!best || score > best_score)) {
      best = c;
      best_score = score;
    }
  }
  return best;
}

}  // namespace kb::bisect
