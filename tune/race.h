// Racing: measure every live candidate once per round (in a shuffled order, so drift hits all alike) and,
// at planned looks, drop each candidate that is significantly slower than the leader (one-sided
// Mann-Whitney on its samples against the leader's). The looks are at first_look * 2^j rounds; the test
// level is alpha / (looks * (candidates - 1)) (Bonferroni over every comparison that can be made), so
// the chance that the truly fastest candidate is ever dropped is at most alpha.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stats/stats.h"

namespace kb::tune {

struct RaceConfig {
  double alpha = 0.05;  // probability of dropping the truly fastest candidate, over the whole race
  int first_look = 10;  // rounds before the first look (looks then double)
  int max_rounds = 160; // last planned look
  double budget_s = 60; // measuring time: the race ends at the end of the round that spends it
  uint64_t seed = 1;    // order of the candidates within a round
};

// One sample of candidate i: the time of one execution and the wall time the sample took.
struct Sample {
  double seconds = 0;
  double wall_s = 0;
};
using Sampler = std::function<Sample(size_t candidate)>;
// Called after each look: rounds so far, candidates still racing, the leader's index and median time.
using RaceProgress = std::function<void(int rounds, size_t alive, size_t leader, double leader_median_s)>;

struct RaceEntry {
  std::vector<double> samples_s;
  int dropped_at = 0;       // rounds measured when it was dropped (0: still racing at the end)
  double p_slower = 1;      // at its last look: p of "slower than the leader"
  double median_s = 0;
  stats::Interval ci;       // 95% bootstrap CI of the median
};

struct RaceResult {
  std::vector<RaceEntry> entries;  // in the order given
  size_t winner = 0;               // lowest median among those still racing
  std::vector<size_t> tied;        // others still racing at the end (not shown slower than the winner)
  int rounds = 0, looks = 0;
  double measured_s = 0;           // wall time spent in samples
  double alpha_per_test = 0;
  std::string stop;                // "one left", "last look", "budget"
};

// Throws InputError when n is 0 or the configuration cannot look even once (field named).
RaceResult race(size_t n, const Sampler& sample, const RaceConfig& cfg, const RaceProgress& progress = nullptr);

}  // namespace kb::tune
