// The wall-clock model (bisect/simulate_wall.h) on the simulator: its logic, checked deterministically
// with fixed seeds. Figures (how much faster) come from bench/bisect_sim, never from here.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "bisect/bisector.h"
#include "bisect/simulate.h"
#include "bisect/simulate_wall.h"

using namespace kb::bisect;

namespace {

SimConfig wall_sim() {
  SimConfig c;
  c.commits = 256;
  c.step = 0.02;
  c.threshold = 0.01;
  c.max_samples_per_step = 256;
  return c;  // build failures (3%) stay on: speculation must live with skips
}

struct SimRun {
  History h;
  Outcome o;
  MethodResult r;
  std::vector<WallRound> trace;
};

SimRun sim_run(const SimConfig& c, uint64_t seed, int workers = 1) {
  SimRun x;
  x.h = make_history(c, seed);
  RunOptions opt;
  opt.workers = workers;
  opt.outcome = &x.o;
  x.r = run_kbisect(c, x.h, seed, opt);
  x.trace = wall_trace(x.o, x.h.n);
  return x;
}

WallConfig cluster(int builders) {
  WallConfig w;
  w.cluster = true;
  w.builders = builders;
  return w;
}

}  // namespace

// The trace is the loop's rounds in order; the one-node price is the closed form.
TEST(SimWall, TraceIsTheLoopsRoundsAndOneNodeIsTheClosedForm) {
  const SimConfig c = wall_sim();
  int named = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const SimRun x = sim_run(c, seed);
    if (x.o.verdict != "culprit") continue;  // e.g. ambiguous: the culprit itself fails to build
    ++named;
    ASSERT_GE(x.trace.size(), 3u);
    EXPECT_EQ(x.trace.front().needs, (std::vector<int>{0, x.h.n - 1}));
    std::vector<int> picks;
    std::set<int> needed;
    for (size_t k = 1; k + x.o.culprits.size() < x.trace.size(); ++k)
      for (int p : x.trace[k].picks) picks.push_back(p);
    std::vector<int> steps;
    for (const auto& s : x.o.steps) steps.push_back(s.index);
    EXPECT_EQ(picks, steps) << "seed " << seed;
    int n_needs = 0, measured = 0;
    for (const auto& rd : x.trace) {
      n_needs += int(rd.needs.size());
      measured += rd.measured;
      for (int c2 : rd.needs) EXPECT_TRUE(needed.insert(c2).second) << "commit " << c2 << " needed twice";
    }
    EXPECT_EQ(n_needs, x.o.builds);
    // The last round verifies the named culprit.
    EXPECT_EQ(x.trace.back().hi, x.o.culprit);
    EXPECT_TRUE(x.trace.back().needs.empty());
    WallConfig w;
    const WallResult seq = wall_clock(x.trace, 1, x.h.build_fails, w);
    EXPECT_DOUBLE_EQ(seq.wall_min, x.o.builds * w.build_min + measured * w.measure_min);
    EXPECT_EQ(seq.builds_started, x.o.builds);
    EXPECT_EQ(seq.builds_cancelled, 0);
  }
  EXPECT_GE(named, 4);
}

// Speculation changes when builds are ready, never what is decided: the same seed gives the same loop
// (the same named commit and steps) whatever it is priced with, every needed build completes, and
// builders never make it slower than one node.
TEST(SimWall, SpeculationNeverChangesTheNamedCommit) {
  const SimConfig c = wall_sim();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const SimRun a = sim_run(c, seed), b = sim_run(c, seed);
    EXPECT_EQ(a.o.culprit, b.o.culprit);
    EXPECT_EQ(a.o.steps.size(), b.o.steps.size());
    const WallResult seq = wall_clock(a.trace, 1, a.h.build_fails, WallConfig{});
    for (int builders : {1, 4, 8, 16}) {
      const WallResult r = wall_clock(a.trace, 1, a.h.build_fails, cluster(builders));
      EXPECT_EQ(r.builds_needed, a.o.builds);
      EXPECT_GE(r.builds_started - r.builds_cancelled, r.builds_needed) << "a needed build never completed";
      // Builders only ever add slots: never slower than one node (not monotone in B: a heuristic).
      EXPECT_LE(r.wall_min, seq.wall_min + 1e-9) << "seed " << seed << ", " << builders << " builders";
      EXPECT_GE(r.wall_min, a.trace.size() > 0 ? WallConfig{}.build_min : 0.0);
      if (builders == 1) EXPECT_LE(r.builds_started, 3 * a.o.builds);
    }
    // Eight builders: the round's commit is mostly built before it is asked for.
    EXPECT_LT(wall_clock(a.trace, 1, a.h.build_fails, cluster(8)).wall_min, 0.6 * seq.wall_min) << "seed " << seed;
  }
}

// Parallel rounds on one node pay every build of a round in turn; with builders they overlap.
TEST(SimWall, ParallelRoundsOnOneNodeAgainstBuilders) {
  const SimConfig c = wall_sim();
  const SimRun x = sim_run(c, 3, 3);
  ASSERT_EQ(x.o.verdict, "culprit");
  const WallResult node = wall_clock(x.trace, 3, x.h.build_fails, WallConfig{});
  const WallResult b4 = wall_clock(x.trace, 3, x.h.build_fails, cluster(4));
  EXPECT_EQ(node.builds_started, x.o.builds);
  EXPECT_LT(b4.wall_min, node.wall_min);
  // A round of three new builds on a single builder waits for each in turn.
  WallRound r;
  r.lo = 0;
  r.hi = 8;
  r.picks = r.needs = {2, 4, 6};
  const std::vector<bool> ok(9, false);
  EXPECT_DOUBLE_EQ(wall_clock({r}, 3, ok, cluster(1)).wall_min, 3 * WallConfig{}.build_min);
  EXPECT_DOUBLE_EQ(wall_clock({r}, 3, ok, cluster(3)).wall_min, WallConfig{}.build_min);
}
