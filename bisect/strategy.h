// Which commit to test next, given what is known. Pure: no git, no builds, no I/O, so the simulation
// (bisect/simulate) drives exactly this code.
//
// Commits are indexed 0..n-1 in walk order: 0 is the known-good endpoint, n-1 the known-bad one. The
// culprit is the first bad commit; the candidates are (lo, hi] where lo is the last commit known good and
// hi the first known bad. Each candidate carries a weight (its prior probability of being the culprit,
// 1 by default); the next commit to test is the untested one in (lo, hi) that splits the candidates'
// weight most evenly — a plain midpoint for equal weights. A skipped commit (build or compile failure,
// or undecided at its budget) is never tested again, so the split moves to its neighbour; when every
// commit left in (lo, hi) is skipped the culprit is ambiguous among the skipped commits and hi.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kb::bisect {

// good/bad: which side of the regression a commit is on. skip: cannot tell (build failure, compile
// failure, undecided at budget): never counted as good or bad.
enum class Side { good, bad, skip };
std::string to_string(Side s);
Side parse_side(const std::string& s);  // throws InputError

class Strategy {
 public:
  // n >= 2 commits including both endpoints; weights (size n, or empty for all 1) for the candidates.
  explicit Strategy(int n, std::vector<double> weights = {});

  int size() const { return int(state_.size()); }
  int lo() const { return lo_; }
  int hi() const { return hi_; }
  // The next commit to test, or nullopt when the culprit is found or ambiguous.
  std::optional<int> next() const;
  // Up to k distinct untested commits in (lo, hi) that split the candidates' weight into k+1 parts as
  // evenly as possible (for parallel rounds: probe and measure them together), in increasing order.
  // next_k(1) is {next()}. Fewer when fewer untested commits are left; empty when done.
  std::vector<int> next_k(int k) const;
  // Weight of the candidates lo+1..hi.
  double remaining_weight() const;
  double weight(int i) const { return weight_[size_t(i)]; }
  // Records the outcome at index i (0 < i < n-1). A good/bad outcome outside (lo, hi) that contradicts
  // the known order throws std::logic_error.
  void record(int i, Side s);
  bool done() const { return !next().has_value(); }
  bool found() const { return hi_ == lo_ + 1; }
  // The culprit (when found) is hi(); otherwise the remaining candidates lo+1..hi.
  std::vector<int> candidates() const;
  std::optional<Side> outcome(int i) const;  // recorded outcome, if any

 private:
  std::vector<std::optional<Side>> state_;
  std::vector<double> weight_;
  int lo_ = 0, hi_ = 0;
};

// Speculation (builds started before a decision needs them): the commits the rounds after the decision on
// (lo, hi] can probe, breadth first — the picks of every sub-range that `picks` can leave, then those of
// their sub-ranges, and so on, over at most `depth` levels, each commit once, none of `picks` itself; no
// level starts once `want` commits are listed (a level is always listed whole). Each sub-range picks as the loop would (next_k(workers) over `weights`, indexed as the
// whole walk; empty: equal), with the commits of `skips` recorded as skips. Pure: the simulation
// (bisect/simulate_wall) and the bisection loop call the same function.
std::vector<int> speculation(int lo, int hi, const std::vector<int>& picks, int workers, const std::set<int>& skips,
                             int want, int depth, const std::vector<double>& weights = {});

}  // namespace kb::bisect
