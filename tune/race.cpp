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
  if (!(cfg.keep_fraction > 0 && cfg.keep_fraction <= 1))
    throw InputError(fmt::format("race.keep_fraction {} must be in (0, 1]", cfg.keep_fraction));
  if (!(cfg.tie_band >= 0 && cfg.tie_band < 1))
    throw InputError(fmt::format("race.tie_band {} must be in [0, 1)", cfg.tie_band));
  if (!(cfg.budget_s > 0)) throw InputError(fmt::format("race.budget_s {} must be positive", cfg.budget_s));
}

size_t leader_of(const std::vector<RaceEntry>& e, const std::vector<size_t>& alive) {
  size_t best = alive.front();
  for (size_t i : alive)
    if (e[i].median_s < e[best].median_s) best = i;
  return best;
}

// Samples of e taken up to round `last`.
std::vector<double> up_to(const RaceEntry& e, int last) {
  std::vector<double> x;
  for (size_t s = 0; s < e.samples_s.size(); ++s)
    if (e.rounds[s] <= last) x.push_back(e.samples_s[s]);
  return x;
}

std::vector<double> logs(std::vector<double> x) {
  for (double& v : x) v = std::log(v);
  return x;
}

// One look: the leader (lowest median), then each other candidate against the leader on the samples of
// both up to the last round both were measured in. Drops those significantly slower (p < level), marks
// the others within the band or not. Returns the leader.
size_t look(std::vector<RaceEntry>& e, std::vector<size_t>& alive, double level, double band, int rounds) {
  for (size_t i : alive)
    if (!e[i].samples_s.empty()) e[i].median_s = stats::median(e[i].samples_s);
  const size_t lead = leader_of(e, alive);
  e[lead].p_slower = 1, e[lead].shift_lo = 0, e[lead].within_band = true;
  std::vector<size_t> keep;
  for (size_t i : alive) {
    if (i == lead) {
      keep.push_back(i);
      continue;
    }
    e[i].within_band = false;
    const int last = std::min(e[i].rounds.empty() ? 0 : e[i].rounds.back(), e[lead].rounds.empty() ? 0 : e[lead].rounds.back());
    const std::vector<double> xi = up_to(e[i], last), xl = up_to(e[lead], last);
    if (xi.size() < 2 || xl.size() < 2) {  // a budget look inside the first rung: nothing to test
      keep.push_back(i);
      continue;
    }
    e[i].p_slower = stats::mann_whitney(xi, xl).p_greater;
    if (e[i].p_slower < level) {
      e[i].dropped_at = rounds;
      continue;
    }
    e[i].shift_lo = stats::hodges_lehmann_shift(logs(xl), logs(xi), 1 - 2 * level).ci.lo;
    e[i].within_band = e[i].shift_lo > -std::log1p(band);
    keep.push_back(i);
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
  if (n == 1) r.stop = "one candidate";
  std::vector<bool> active(n, true);
  std::vector<size_t> target(n, size_t(cfg.first_look));
  Rng rng(cfg.seed);
  int rung = 0;
  size_t lead = 0;
  while (alive.size() > 1) {
    std::vector<size_t> pending;
    for (size_t i : alive)
      if (active[i] && r.entries[i].samples_s.size() < target[i]) pending.push_back(i);
    bool out_of_time = false;
    if (!pending.empty()) {
      rng.shuffle(pending);
      ++r.rounds;
      for (size_t i : pending) {
        Sample s = sample(i);
        r.entries[i].samples_s.push_back(s.seconds);
        r.entries[i].rounds.push_back(r.rounds);
        r.measured_s += s.wall_s;
        ++r.samples;
      }
      out_of_time = r.measured_s >= cfg.budget_s;
      if (!out_of_time) continue;  // the rung is not complete yet
    }
    const std::vector<size_t> before = alive;
    lead = look(r.entries, alive, r.alpha_per_test, cfg.tie_band, r.rounds);
    ++r.looks_taken;
    RaceLook& h = r.history.emplace_back();
    h.round = r.rounds, h.leader = lead, h.alive = alive;
    for (size_t i : before)
      if (r.entries[i].dropped_at == r.rounds) h.dropped.push_back(i);
    if (progress) progress(r.rounds, alive.size(), lead, r.entries[lead].median_s);
    std::vector<size_t> unresolved;
    for (size_t i : alive)
      if (i != lead && !r.entries[i].within_band) unresolved.push_back(i);
    if (alive.size() == 1) {
      r.stop = "leader clear";
      break;
    }
    if (unresolved.empty()) {
      r.stop = fmt::format("tied within {:g}%", 100 * cfg.tie_band);
      break;
    }
    if (out_of_time) {
      r.stop = "budget";
      break;
    }
    if (rung + 1 >= r.looks) {
      r.stop = "last look";
      break;
    }
    // Successive halving: the leader and the best keep_fraction of the unresolved go on to the next rung,
    // each to twice its samples (at most the rung's R); the others are parked, still racing.
    ++rung;
    const size_t rung_samples = size_t(cfg.first_look) << rung;
    std::stable_sort(unresolved.begin(), unresolved.end(),
                     [&](size_t a, size_t b) { return r.entries[a].median_s < r.entries[b].median_s; });
    const size_t k = std::max<size_t>(1, size_t(std::ceil(cfg.keep_fraction * double(unresolved.size()))));
    std::vector<bool> next(n, false);
    next[lead] = true;
    for (size_t j = 0; j < k; ++j) next[unresolved[j]] = true;
    for (size_t i : alive) {
      if (active[i] && !next[i]) r.entries[i].parked_at = r.rounds;
      active[i] = next[i];
      if (next[i]) h.sampled.push_back(i);
      if (next[i]) target[i] = std::min(rung_samples, std::max<size_t>(size_t(cfg.first_look), 2 * r.entries[i].samples_s.size()));
    }
  }
  if (!alive.empty()) {
    for (size_t i : alive)
      if (!r.entries[i].samples_s.empty()) r.entries[i].median_s = stats::median(r.entries[i].samples_s);
    r.winner = n == 1 ? 0 : lead;
  }
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
