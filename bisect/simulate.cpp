#include "bisect/simulate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "bisect/bisector.h"
#include "bisect/strategy.h"
#include "stats/stats.h"

namespace kb::bisect {

History make_history(const SimConfig& c, uint64_t seed) {
  stats::Rng rng(seed * 0x9E3779B97F4A7C15ULL + 17);
  History h;
  h.n = c.commits + 1;
  h.culprit = 1 + int(rng.below(uint64_t(c.commits)));
  h.build_fails.assign(size_t(h.n), false);
  h.code.assign(size_t(h.n), 0);
  uint64_t code = 1;
  for (int i = 0; i < h.n; ++i) {
    if (i > 0 && (i == h.culprit || rng.uniform() < c.code_change)) ++code;
    h.code[size_t(i)] = code;
    if (i > 0 && i < h.n - 1 && rng.uniform() < c.build_fail) h.build_fails[size_t(i)] = true;
  }
  return h;
}

History make_history_steps(const SimConfig& c, uint64_t seed, const std::vector<double>& steps, int min_gap) {
  History h = make_history(c, seed);
  stats::Rng rng(seed * 0xD1B54A32D192ED03ULL + 5);
  const int k = int(steps.size());
  std::vector<int> at;
  for (int tries = 0; tries < 1000; ++tries) {
    at.clear();
    for (int j = 0; j < k; ++j) at.push_back(1 + int(rng.below(uint64_t(h.n - 1))));
    std::sort(at.begin(), at.end());
    bool ok = true;
    for (int j = 1; j < k; ++j)
      if (at[size_t(j)] - at[size_t(j - 1)] < min_gap) ok = false;
    if (ok) break;
  }
  h.changes.clear();
  for (int j = 0; j < k; ++j) h.changes.emplace_back(at[size_t(j)], steps[size_t(j)]);
  // The main culprit: the largest regression.
  double best = 0;
  for (const auto& [i, st] : h.changes)
    if (st > best) {
      best = st;
      h.culprit = i;
    }
  // Every change commit changes code and builds.
  const std::vector<uint64_t> orig = h.code;
  uint64_t next_code = orig[0];
  for (const auto& [i, st] : h.changes) h.build_fails[size_t(i)] = false;
  for (int i = 1; i < h.n; ++i) {
    bool change = orig[size_t(i)] != orig[size_t(i - 1)];
    for (const auto& [k2, st] : h.changes) change = change || k2 == i;
    if (change) ++next_code;
    h.code[size_t(i)] = next_code;
  }
  return h;
}

std::vector<int> History::regressions() const {
  if (changes.empty()) return {culprit};
  std::vector<int> r;
  for (const auto& [i, st] : changes)
    if (st > 0) r.push_back(i);
  return r;
}

std::vector<int> History::improvements() const {
  std::vector<int> r;
  for (const auto& [i, st] : changes)
    if (st < 0) r.push_back(i);
  return r;
}

std::string SimLab::sha_of(int i) { return fmt::format("sim{:06d}", i); }
int SimLab::index_of(const std::string& sha) { return std::stoi(sha.substr(3)); }

SimLab::SimLab(const SimConfig& c, const History& h, uint64_t seed) : c_(c), h_(h), seed_(seed) {}

Probe SimLab::probe(const std::string& sha) {
  const int i = index_of(sha);
  Probe p;
  p.built = true;
  if (h_.build_fails[size_t(i)]) {
    p.reason = "simulated build failure";
    return p;
  }
  p.ok = true;
  p.case_ids = {"sim-kernel"};
  p.code_hashes = {fmt::format("code{}", h_.code[size_t(i)])};
  return p;
}

Measured SimLab::measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) {
  NoiseModel m = c_.noise;
  m.seed = ask.seed;
  NoiseGenerator gen(m);
  std::vector<double> truth;
  for (const auto& s : shas) truth.push_back(h_.time_at(index_of(s), c_));
  Measured out;
  out.units.resize(shas.size());
  if (ask.block_rounds <= 0) {
    // One load per commit for the lab's life: the same placement offset in every measurement.
    std::vector<double> t = truth;
    for (size_t i = 0; i < shas.size(); ++i) {
      stats::Rng load(seed_ * 0x9E3779B97F4A7C15ULL + uint64_t(index_of(shas[i])));
      t[i] *= std::exp(c_.load_sd * load.normal());
    }
    for (int k = 0; k < ask.max_units; ++k) {
      auto row = gen.round(t);
      for (size_t i = 0; i < shas.size(); ++i) out.units[i].push_back(row[i]);
      if (stop && stop(out.units)) break;
    }
    out.raw = out.units;
    return out;
  }
  // Blocks: fresh loads (new offsets) per block, block_summary per commit.
  out.raw.resize(shas.size());
  stats::Rng load(ask.seed ^ 0x5851F42D4C957F2DULL);
  for (int u = 0; u < ask.max_units; ++u) {
    std::vector<double> t = truth;
    for (auto& x : t) x *= std::exp(c_.load_sd * load.normal());
    Rounds block(shas.size());
    for (int k = 0; k < ask.block_rounds; ++k) {
      auto row = gen.round(t);
      for (size_t i = 0; i < shas.size(); ++i) block[i].push_back(row[i]);
    }
    add_block(out, block);
    if (stop && stop(out.units)) break;
  }
  return out;
}

int SimLab::start_run(const std::string& sha, int ordinal) {
  const int i = index_of(sha);
  stats::Rng rng(seed_ * 0x9E3779B97F4A7C15ULL ^ (uint64_t(i) * 0xD1B54A32D192ED03ULL + uint64_t(ordinal) * 0x94D049BB133111EBULL));
  NoiseModel m = c_.noise;
  m.seed = rng.next();
  NoiseGenerator gen(m);
  RunDone d;
  d.ticket = tickets_++;
  d.sha = sha;
  d.value = gen.round({h_.time_at(i, c_) * std::exp(c_.load_sd * rng.normal())})[0];
  d.wall_s = 1 + c_.run_spread * rng.uniform();
  flying_.push_back({d.ticket, clock_ + d.wall_s, d});
  return d.ticket;
}

RunDone SimLab::wait_run() {
  if (flying_.empty()) throw std::logic_error("SimLab::wait_run: no run in flight");
  auto it = std::min_element(flying_.begin(), flying_.end(), [](const Flying& a, const Flying& b) { return a.end < b.end; });
  clock_ = std::max(clock_, it->end);
  RunDone d = it->done;
  flying_.erase(it);
  return d;
}

namespace {

// Correct answer given what can be known: the culprit, or — when unbuildable commits hide it — the
// candidate list that holds it, every member but the last (the first known bad) unbuildable.
void score(MethodResult& r, const History& h, const std::string& verdict, int culprit, const std::vector<int>& cands) {
  r.verdict = verdict;
  r.exact = culprit == h.culprit;
  r.correct = r.exact;
  if (!r.correct && !cands.empty() && std::find(cands.begin(), cands.end(), h.culprit) != cands.end()) {
    bool only_skips = true;
    for (int i : cands)
      if (i != cands.back() && !h.build_fails[size_t(i)]) only_skips = false;
    r.correct = only_skips;
  }
}

// A plain bisection walk for the baselines: every visited commit is a build; unbuildable ones are
// skipped, the others classified by side(strategy, i); then scored.
void walk(MethodResult& r, const History& h, const std::function<Side(const Strategy&, int)>& side) {
  Strategy st(h.n);
  while (auto nx = st.next()) {
    const int i = *nx;
    ++r.builds;
    ++r.visited;
    if (h.build_fails[size_t(i)]) {
      st.record(i, Side::skip);
      continue;
    }
    ++r.measured;
    st.record(i, side(st, i));
  }
  score(r, h, st.found() ? "culprit" : "ambiguous", st.found() ? st.hi() : -1, st.found() ? std::vector<int>{} : st.candidates());
}

}  // namespace

MethodResult run_kbisect(const SimConfig& c, const History& h, uint64_t seed, const RunOptions& opts) {
  SimLab lab(c, h, seed);
  Plan p;
  for (int i = 0; i < h.n; ++i) p.shas.push_back(SimLab::sha_of(i));
  p.metric = Metric::time;
  p.threshold = c.threshold;
  p.budgets.max_builds = 1000;
  p.budgets.max_samples_per_step = c.max_samples_per_step;
  p.min_samples = c.min_samples;
  p.block_rounds = c.block_rounds;
  p.alpha = c.alpha;
  p.max_step_s = 1e9;
  p.seed = seed;
  p.weights = opts.weights;
  p.workers = opts.workers;
  p.several = opts.several;
  p.report_improvements = opts.report_improvements;
  p.use_hashes = opts.use_hashes;
  p.expensive = opts.expensive;
  p.confidence = c.confidence;
  p.budgets.max_runs = c.max_runs;
  p.build_cost = c.build_cost;
  Outcome o = run_bisection(p, lab, nullptr, opts.log);
  if (opts.outcome) *opts.outcome = o;
  MethodResult r;
  score(r, h, o.verdict, o.verdict == "culprit" || o.verdict == "unverified" ? o.culprit : -1, o.candidates);
  if (o.verdict == "unverified") r.correct = r.exact = false;  // not named with confidence
  r.named = o.culprit;
  r.builds = o.builds;
  r.samples = o.samples;
  r.visited = o.visited;
  r.measured = o.measured_steps;
  r.rounds = o.rounds;
  r.wall = lab.clock();
  const auto regs = h.regressions(), imps = h.improvements();
  auto has = [](const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) != v.end(); };
  bool spurious = false;
  for (const auto& cu : o.culprits) {
    if (!cu.verified) continue;
    if (cu.improvement) {
      ++r.improvements_found;
      if (has(imps, cu.index)) ++r.improvements_true;
      else spurious = true;
    } else {
      ++r.regressions_found;
      if (has(regs, cu.index)) ++r.regressions_true;
      else spurious = true;
    }
  }
  r.all_found = !spurious && r.regressions_true == int(regs.size()) &&
                (!opts.report_improvements || r.improvements_true == int(imps.size()));
  return r;
}

MethodResult run_plain_bisect(const SimConfig& c, const History& h, uint64_t seed) {
  NoiseModel m = c.noise;
  m.seed = seed ^ 0xA5A5A5A5ULL;
  NoiseGenerator gen(m);
  MethodResult r;
  r.builds = 2;  // good and bad
  walk(r, h, [&](const Strategy&, int i) {
    auto g = gen.samples(h.time_at(0, c), c.plain_samples);
    auto t = gen.samples(h.time_at(i, c), c.plain_samples);
    r.samples += 2 * c.plain_samples;
    return stats::mann_whitney(g, t).p_two_sided <= c.plain_alpha ? Side::bad : Side::good;
  });
  return r;
}

MethodResult run_pinpoint(const SimConfig& c, const History& h, uint64_t seed, bool told) {
  NoiseModel m = c.noise;
  m.seed = seed ^ 0x5A5A5A5AULL;
  NoiseGenerator gen(m);
  MethodResult r;
  std::map<int, std::vector<double>> pool;  // samples per commit, reused across comparisons
  auto samples = [&](int i, int n) -> const std::vector<double>& {
    auto& v = pool[i];
    if (int(v.size()) < n) {
      auto more = gen.samples(h.time_at(i, c), n - int(v.size()));
      r.samples += int64_t(more.size());
      v.insert(v.end(), more.begin(), more.end());
    }
    return v;
  };
  // different / same / (unsure at the maximum counts as same, as Pinpoint gives up on the segment)
  auto different = [&](int a, int b) {
    for (int n = c.pinpoint_start;; n *= 2) {
      std::vector<double> x(samples(a, n).begin(), samples(a, n).begin() + n);
      std::vector<double> y(samples(b, n).begin(), samples(b, n).begin() + n);
      const double p = stats::mann_whitney(x, y).p_two_sided;
      if (p <= c.pinpoint_p_diff) return true;
      if (p > c.pinpoint_p_same || n * 2 > c.pinpoint_max) return false;
    }
  };
  r.builds = 2;
  if (!told && !different(0, h.n - 1)) {
    score(r, h, "not-reproduced", -1, {});
    return r;
  }
  walk(r, h, [&](const Strategy& st, int i) { return different(st.lo(), i) ? Side::bad : Side::good; });
  return r;
}

}  // namespace kb::bisect
