#include "tune/race.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"

namespace kb::tune {

namespace {

int planned_looks(const RaceConfig& cfg) {
  int looks = 0;
  for (int64_t r = cfg.first_look; r <= cfg.max_rounds; r *= 2) ++looks;
  return looks;
}

void check_config(size_t n, const RaceConfig& cfg) {
  if (n == 0) throw InputError("race: no candidates to race");
  if (!(cfg.alpha > 0 && cfg.alpha < 0.5)) throw InputError(fmt::format("race.alpha {} must be in (0, 0.5)", cfg.alpha));
  if (cfg.first_look < 2) throw InputError(fmt::format("race.first_look {} must be at least 2", cfg.first_look));
  if (cfg.max_rounds < cfg.first_look)
    throw InputError(fmt::format("race.max_rounds {} is below race.first_look {}", cfg.max_rounds, cfg.first_look));
  if (!(cfg.budget_s > 0)) throw InputError(fmt::format("race.budget_s {} must be positive", cfg.budget_s));
}

size_t leader_of(const std::vector<RaceEntry>& e, const std::vector<size_t>& alive) {
  size_t best = alive.front();
  for (size_t i : alive)
    if (e[i].median_s < e[best].median_s) best = i;
  return best;
}

// Drops every live candidate significantly slower than the leader; returns the leader.
size_t look(std::vector<RaceEntry>& e, std::vector<size_t>& alive, double level, int rounds) {
  for (size_t i : alive) e[i].median_s = stats::median(e[i].samples_s);
  const size_t lead = leader_of(e, alive);
  std::vector<size_t> keep;
  for (size_t i : alive) {
    if (i != lead) e[i].p_slower = stats::mann_whitney(e[i].samples_s, e[lead].samples_s).p_greater;
    if (i != lead && e[i].p_slower < level) e[i].dropped_at = rounds;
    else keep.push_back(i);
  }
  alive = std::move(keep);
  return lead;
}

}  // namespace

RaceResult race(size_t n, const Sampler& sample, const RaceConfig& cfg, const RaceProgress& progress) {
  check_config(n, cfg);
  RaceResult r;
  r.entries.resize(n);
  r.looks = planned_looks(cfg);
  r.alpha_per_test = n > 1 ? cfg.alpha / (double(r.looks) * double(n - 1)) : cfg.alpha;
  std::vector<size_t> alive(n);
  for (size_t i = 0; i < n; ++i) alive[i] = i;
  Rng rng(cfg.seed);
  int next_look = cfg.first_look;
  r.stop = "last look";
  while (alive.size() > 1 && r.rounds < cfg.max_rounds) {
    std::vector<size_t> order = alive;
    rng.shuffle(order);
    for (size_t i : order) {
      Sample s = sample(i);
      r.entries[i].samples_s.push_back(s.seconds);
      r.measured_s += s.wall_s;
    }
    ++r.rounds;
    const bool out_of_time = r.measured_s >= cfg.budget_s;
    if (r.rounds == next_look || out_of_time) {
      size_t lead = look(r.entries, alive, r.alpha_per_test, r.rounds);
      if (progress) progress(r.rounds, alive.size(), lead, r.entries[lead].median_s);
      if (r.rounds == next_look) next_look *= 2;
    }
    if (out_of_time && alive.size() > 1) {
      r.stop = "budget";
      break;
    }
  }
  if (alive.size() == 1) r.stop = "one left";
  for (size_t i : alive)
    if (!r.entries[i].samples_s.empty()) r.entries[i].median_s = stats::median(r.entries[i].samples_s);
  r.winner = leader_of(r.entries, alive);
  for (size_t i : alive)
    if (i != r.winner) r.tied.push_back(i);
  for (size_t i = 0; i < n; ++i) {
    auto& e = r.entries[i];
    if (e.samples_s.size() >= 2)
      e.ci = stats::bootstrap_ci(e.samples_s, [](const std::vector<double>& x) { return stats::median(x); }, 0.95, 400,
                                 cfg.seed + i);
  }
  return r;
}

}  // namespace kb::tune
