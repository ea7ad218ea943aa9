#include "bisect/strategy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::bisect {

std::string to_string(Side s) {
  switch (s) {
    case Side::good: return "good";
    case Side::bad: return "bad";
    case Side::skip: return "skip";
  }
  return "?";
}

Side parse_side(const std::string& s) {
  if (s == "good") return Side::good;
  if (s == "bad") return Side::bad;
  if (s == "skip") return Side::skip;
  throw InputError(fmt::format("side '{}' is not good, bad or skip", s));
}

Strategy::Strategy(int n, std::vector<double> weights) : state_(size_t(std::max(n, 0))), weight_(std::move(weights)) {
  if (n < 2) throw std::invalid_argument("a bisection needs at least the two endpoints");
  if (weight_.empty()) weight_.assign(size_t(n), 1.0);
  if (int(weight_.size()) != n) throw std::invalid_argument("one weight per commit");
  for (double& w : weight_)
    if (!(w > 0) || !std::isfinite(w)) w = 1e-12;  // never exactly zero: every commit stays possible
  state_[0] = Side::good;
  state_[size_t(n - 1)] = Side::bad;
  lo_ = 0;
  hi_ = n - 1;
}

std::optional<int> Strategy::next() const {
  if (hi_ == lo_ + 1) return std::nullopt;
  // Weight of candidates lo+1..m is left(m); testing m splits (lo, hi] into (lo, m] and (m, hi].
  double total = 0;
  for (int i = lo_ + 1; i <= hi_; ++i) total += weight_[size_t(i)];
  double left = 0;
  std::optional<int> best;
  double best_score = 0, best_center = 0;
  const double center = 0.5 * (lo_ + hi_);
  for (int m = lo_ + 1; m < hi_; ++m) {
    left += weight_[size_t(m)];
    if (state_[size_t(m)]) continue;  // tested already (only skips can be inside (lo, hi))
    const double score = std::abs(2 * left - total);
    const double dc = std::abs(m - center);
    if (!best || score < best_score - 1e-12 * total || (std::abs(score - best_score) <= 1e-12 * total && dc < best_center)) {
      best = m;
      best_score = score;
      best_center = dc;
    }
  }
  return best;
}

std::vector<int> Strategy::next_k(int k) const {
  std::vector<int> out;
  if (k <= 1) {
    if (auto m = next()) out.push_back(*m);
    return out;
  }
  if (hi_ == lo_ + 1) return out;
  std::vector<int> free;         // untested commits in (lo, hi)
  std::vector<double> left;      // weight of candidates lo+1..m for each of them
  double total = 0, acc = 0;
  for (int i = lo_ + 1; i <= hi_; ++i) total += weight_[size_t(i)];
  for (int m = lo_ + 1; m < hi_; ++m) {
    acc += weight_[size_t(m)];
    if (state_[size_t(m)]) continue;
    free.push_back(m);
    left.push_back(acc);
  }
  if (int(free.size()) <= k) return free;
  // Greedy over the targets j/(k+1) of the mass: the free commit whose left weight is nearest each target,
  // never one already taken (ties: the nearer to the middle of the free commits after the last pick).
  std::vector<bool> taken(free.size(), false);
  size_t from = 0;
  for (int j = 1; j <= k; ++j) {
    const double target = total * double(j) / double(k + 1);
    const size_t remaining_picks = size_t(k - j);
    std::optional<size_t> best;
    double best_d = 0;
    // Leave room for the picks still to come (each needs its own commit to the right).
    for (size_t q = from; q + remaining_picks < free.size(); ++q) {
      if (taken[q]) continue;
      const double d = std::abs(left[q] - target);
      if (!best || d < best_d - 1e-12 * total) {
        best = q;
        best_d = d;
      }
    }
    if (!best) break;
    taken[*best] = true;
    out.push_back(free[*best]);
    from = *best + 1;
  }
  return out;
}

double Strategy::remaining_weight() const {
  double total = 0;
  for (int i = lo_ + 1; i <= hi_; ++i) total += weight_[size_t(i)];
  return total;
}

void Strategy::record(int i, Side s) {
  if (i <= 0 || i >= size() - 1) throw std::logic_error(fmt::format("index {} is an endpoint or outside the range", i));
  state_[size_t(i)] = s;
  if (s == Side::good) {
    if (i >= hi_) throw std::logic_error(fmt::format("commit {} good after first bad commit {}", i, hi_));
    if (i > lo_) lo_ = i;
  } else if (s == Side::bad) {
    if (i <= lo_) throw std::logic_error(fmt::format("commit {} bad before last good commit {}", i, lo_));
    if (i < hi_) hi_ = i;
  }
}

std::vector<int> Strategy::candidates() const {
  std::vector<int> out;
  for (int i = lo_ + 1; i <= hi_; ++i) out.push_back(i);
  return out;
}

std::optional<Side> Strategy::outcome(int i) const {
  if (i < 0 || i >= size()) return std::nullopt;
  return state_[size_t(i)];
}

std::vector<int> speculation(int lo, int hi, const std::vector<int>& picks, int workers, const std::set<int>& skips,
                             int want, int depth, const std::vector<double>& weights) {
  std::vector<int> out;
  std::vector<std::pair<int, int>> level;  // the sub-ranges of the next level
  auto split = [&level](int a, int b, std::vector<int> cut) {
    cut.push_back(a);
    cut.push_back(b);
    std::sort(cut.begin(), cut.end());
    for (size_t i = 0; i + 1 < cut.size(); ++i)
      if (cut[i + 1] - cut[i] >= 2) level.emplace_back(cut[i], cut[i + 1]);
  };
  split(lo, hi, picks);
  for (int d = 0; d < depth && !level.empty() && int(out.size()) < want; ++d) {
    std::vector<std::pair<int, int>> ranges;
    ranges.swap(level);
    for (const auto& [a, b] : ranges) {
      std::vector<double> w;
      if (!weights.empty()) w.assign(weights.begin() + a, weights.begin() + b + 1);
      Strategy st(b - a + 1, w);
      for (int f : skips)
        if (f > a && f < b) st.record(f - a, Side::skip);
      std::vector<int> pk;
      for (int k : st.next_k(std::max(1, workers))) pk.push_back(a + k);
      for (int p : pk)
        if (std::find(out.begin(), out.end(), p) == out.end() &&
            std::find(picks.begin(), picks.end(), p) == picks.end())
          out.push_back(p);
      split(a, b, pk);
    }
  }
  return out;
}

}  // namespace kb::bisect
