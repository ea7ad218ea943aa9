// Where to run next when one sample is expensive (measure.sample_cost: expensive; docs/bisect.md, "L3"): the
// pure half of probabilistic bisection over a range's posterior (stats/step_posterior.h). Indices are local
// to the range: commit 0 is its first end, n-1 its last; a hypothesis h in 1..n-1 says commit h is the first
// at the last end's level. No git, no runs, no I/O: the bisection loop and the simulation call the same code.
#pragma once
#include <optional>
#include <vector>

namespace kb::bisect {

// Hypotheses runs cannot tell apart, grouped: h and h+1 differ only in commit h's level, so a commit that
// cannot run (its build failed) puts them in one class. Classes cover 1..n-1 in order.
struct HypothesisClass {
  int first = 0, last = 0;  // h in first..last
  double mass = 0;          // their posterior probability together
};
std::vector<HypothesisClass> hypothesis_classes(const std::vector<double>& p, const std::vector<bool>& skipped);

// Entropy (bits) of the posterior's split by runs at the commits `cuts` (a run at c tells h <= c from h > c):
// the masses cdf[c1], cdf[c2] - cdf[c1], ..., 1 - cdf[ck] over the cuts in order. What a set of runs can
// learn at most (each run noiseless); one cut at c: the binary entropy of cdf[c].
double split_entropy(const std::vector<double>& cdf, std::vector<int> cuts);

// The commits worth weighing for the next run: the `k` that split the posterior best (largest binary entropy
// of cdf[c]; never a skipped one), then the range's two ends (their runs pin the two levels), in that order.
std::vector<int> probe_candidates(const std::vector<double>& cdf, const std::vector<bool>& skipped, int k);

// The candidate to run next: the largest information per unit of cost. info[i] is what a run at cands[i]
// tells (stats::expected_information); with runs in flight at `flying` it counts only for the share of its
// split that the flying runs do not already make (split_entropy with and without it; an end of the range
// cuts nothing and keeps its share); a run costs 1, a commit not built yet 1 + build_cost (in runs). A
// commit in flight is never chosen. Nothing when no candidate adds information.
std::optional<int> choose_probe(const std::vector<int>& cands, const std::vector<double>& info,
                                const std::vector<double>& cdf, const std::vector<int>& flying,
                                const std::vector<bool>& built, double build_cost);

}  // namespace kb::bisect
