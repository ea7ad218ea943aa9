// Racing with successive halving and early stopping (docs/tune.md, "Racing").
//
// Candidates are measured in rounds (one sample of each candidate that needs one, in a shuffled order, so
// drift hits all alike) up to planned looks. Rung k's look is at R_k = first_look * 2^k samples per candidate
// (R_k <= max_rounds; L planned looks). At each look:
//   - the leader is the lowest median among the candidates still racing;
//   - every other candidate is compared with the leader on the samples of both taken up to the last round
//     both were measured in (one-sided Mann-Whitney, and the Hodges-Lehmann shift of log times with the
//     Moses CI at confidence 1 - 2a): p < a drops it ("slower"); a CI whose lower end is above
//     -log(1 + tie_band) makes it "within the band" (it is not faster than the leader by more than tie_band);
//   - the race stops when every other candidate was dropped ("leader clear"), when all those left are within
//     the band ("tied within 1%"), at the last planned look ("last look") or when the budget is spent
//     ("budget");
//   - otherwise only the leader and the best keep_fraction (by median) of the candidates not yet within the
//     band are sampled up to the next look (each to twice its samples, at most R_{k+1}); the others are
//     parked, never dropped without a test: they keep their samples, are tested at every look and are
//     measured again once they rank in the top fraction of what is left.
// a = alpha / (L * (n - 1)): Bonferroni over every look and every candidate the leader can be. Both rules are
// one-sided bounds at level a on the same shift, so the chance that the truly fastest candidate is ever
// dropped, or that the race stops on a leader more than tie_band slower than it, is at most alpha.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stats/stats.h"

namespace kb::tune {

struct RaceConfig {
  double alpha = 0.05;         // chance of losing the truly fastest candidate (see above), over the whole race
  int first_look = 8;          // samples per candidate at the first look (the first rung; looks then double)
  int max_rounds = 160;        // no look beyond this many samples per candidate
  double keep_fraction = 0.5;  // successive halving: share of the unresolved candidates sampled on
  double tie_band = 0.01;      // "tied": not faster than the leader by more than this (relative)
  double budget_s = 60;        // measuring time: the race ends at the end of the round that spends it
  uint64_t seed = 1;           // order of the candidates within a round
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
  std::vector<int> rounds;  // the round of each sample (parallel to samples_s)
  int dropped_at = 0;       // rounds measured when it was dropped (0: still racing at the end)
  double p_slower = 1;      // at its last look: p of "slower than the leader"
  double shift_lo = 0;      // at its last look: lower end of the CI of log(time / leader's time)
  bool within_band = false; // at its last look: shift_lo > -log(1 + tie_band)
  int parked_at = 0;        // round of the look that last parked it (0: sampled at every rung it raced)
  double median_s = 0;
  stats::Interval ci;       // 95% bootstrap CI of the median
};

// What one look saw and decided.
struct RaceLook {
  int round = 0;                 // rounds run at the look
  size_t leader = 0;
  std::vector<size_t> dropped;   // dropped at this look (significantly slower than the leader)
  std::vector<size_t> alive;     // still racing after it
  std::vector<size_t> sampled;   // sampled up to the next look (the leader and the top of the unresolved)
};

struct RaceResult {
  std::vector<RaceEntry> entries;  // in the order given
  size_t winner = 0;               // the leader at the last look
  std::vector<size_t> tied;        // others still racing at the end (not shown slower than the winner)
  int rounds = 0;                  // rounds run (a round samples every candidate that needs a sample)
  int looks = 0;                   // planned looks (L)
  int looks_taken = 0;
  int64_t samples = 0;             // samples taken, all candidates
  double measured_s = 0;           // wall time spent in samples
  double alpha_per_test = 0;       // a
  std::vector<RaceLook> history;   // every look, in order
  std::string stop;                // "one candidate", "leader clear", "tied within 1%", "last look", "budget"
};

// Throws InputError when n is 0 or the configuration cannot look even once (field named).
RaceResult race(size_t n, const Sampler& sample, const RaceConfig& cfg, const RaceProgress& progress = nullptr);

}  // namespace kb::tune
