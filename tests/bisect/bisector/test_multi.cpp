// Several culprits, prior weights and parallel rounds on the simulator (the real loop, strategy and
// decisions over synthetic histories), plus the pure pieces they add.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "bisect/bisector.h"
#include "bisect/priors.h"
#include "bisect/simulate.h"
#include "bisect/strategy.h"

using namespace kb::bisect;

namespace {

SimConfig multi_config() {
  SimConfig c;
  c.commits = 256;
  c.noise.cv = 0.01;
  c.threshold = 0.005;
  c.max_samples_per_step = 512;
  c.build_fail = 0;  // skips have their own tests; here every change must be nameable
  return c;
}

}  // namespace

TEST(Strategy, NextKSplitsTheMassIntoEqualParts) {
  Strategy st(101);  // candidates 1..100
  auto three = st.next_k(3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_NEAR(three[0], 25, 1);
  EXPECT_NEAR(three[1], 50, 1);
  EXPECT_NEAR(three[2], 75, 1);
  EXPECT_EQ(st.next_k(1), std::vector<int>{*st.next()});
  // Fewer untested commits than asked for: all of them.
  Strategy small(4);
  EXPECT_EQ(small.next_k(7), (std::vector<int>{1, 2}));
  // A prior moves the parallel split too: all the mass on commit 90 puts a pick right at it.
  std::vector<double> w(101, 1e-3);
  w[90] = 1;
  Strategy pr(101, w);
  auto picks = pr.next_k(3);
  EXPECT_TRUE(std::find(picks.begin(), picks.end(), 89) != picks.end() ||
              std::find(picks.begin(), picks.end(), 90) != picks.end())
      << picks[0] << " " << picks[1] << " " << picks[2];
}

TEST(Priors, FileAndCommitWeights) {
  Priors p = {{"llvm/lib/Target/NVPTX/**", 5}, {"**/docs/**", 0.05}, {"llvm/**", 2}};
  EXPECT_EQ(file_weight("llvm/lib/Target/NVPTX/NVPTXISelLowering.cpp", p), 5);  // max of the matching globs
  EXPECT_EQ(file_weight("llvm/docs/LangRef.rst", p), 2);
  EXPECT_EQ(file_weight("clang/docs/UsersManual.rst", p), 0.05);
  EXPECT_EQ(file_weight("README.md", p), 1);  // unmatched: 1
  EXPECT_EQ(commit_weight({"clang/docs/a.rst", "mlir/docs/b.md"}, p), 0.05);
  EXPECT_EQ(commit_weight({"clang/docs/a.rst", "README.md"}, p), 1);
  EXPECT_EQ(commit_weight({}, p), 1);
}

TEST(SimMulti, TwoRegressionsAreBothFound) {
  SimConfig c = multi_config();
  int all = 0, runs = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed, ++runs) {
    History h = make_history_steps(c, seed, {0.03, 0.02});
    MethodResult r = run_kbisect(c, h, seed);
    all += r.all_found;
    EXPECT_EQ(r.regressions_found, r.regressions_true) << "seed " << seed << ": a spurious culprit";
  }
  EXPECT_GE(all, runs - 1) << all << " of " << runs;
}

TEST(SimMulti, PartialRecoveryIsReportedWhenAsked) {
  SimConfig c = multi_config();
  int all = 0, without = 0, runs = 0;
  for (uint64_t seed = 11; seed <= 18; ++seed, ++runs) {
    // +3%, +3%, then a partial recovery of -1.5%: levels 0, 3, 6, 4.5% (a recovery that cancels a
    // regression leaves no trace at bad's level, so each level must stay apart from bad's).
    History h = make_history_steps(c, seed, {0.03, 0.03, -0.015}, 24);
    RunOptions o;
    o.report_improvements = true;
    MethodResult r = run_kbisect(c, h, seed, o);
    all += r.all_found;
    EXPECT_LE(r.improvements_found, 1);
    // Without the flag no improvement is searched or reported.
    MethodResult q = run_kbisect(c, h, seed);
    EXPECT_EQ(q.improvements_found, 0);
    without += q.regressions_true >= 1;
  }
  EXPECT_GE(all, runs - 1) << all << " of " << runs;
  EXPECT_EQ(without, runs);
}

TEST(SimMulti, OneCulpritModeStillNamesOne) {
  SimConfig c = multi_config();
  History h = make_history_steps(c, 3, {0.03, 0.02});
  RunOptions o;
  o.several = false;
  MethodResult r = run_kbisect(c, h, 3, o);
  EXPECT_EQ(r.regressions_found, 1);
  EXPECT_EQ(r.regressions_true, 1);
}

TEST(SimMulti, SingleStepHistoriesStayExact) {
  SimConfig c;
  c.commits = 512;
  int correct = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    History h = make_history(c, seed);
    correct += run_kbisect(c, h, seed).correct;
  }
  EXPECT_GE(correct, 9);
}

TEST(SimParallel, MoreWorkersFewerRounds) {
  SimConfig c = multi_config();
  c.commits = 512;
  c.build_fail = 0;
  std::vector<double> rounds;
  for (int P : {1, 3, 7}) {
    double sum = 0;
    int correct = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      History h = make_history_steps(c, seed, {0.03});
      RunOptions o;
      o.workers = P;
      MethodResult r = run_kbisect(c, h, seed, o);
      correct += r.all_found;
      sum += r.rounds;
    }
    EXPECT_GE(correct, 5) << "P=" << P;
    rounds.push_back(sum / 6);
  }
  // log2(512) = 9 rounds, log4 = 4.5, log8 = 3 (hash shortcuts can only save rounds).
  EXPECT_LE(rounds[0], 10);
  EXPECT_LT(rounds[1], rounds[0] * 0.7);
  EXPECT_LT(rounds[2], rounds[1]);
  EXPECT_LE(rounds[2], 4.5);
}

TEST(SimPriors, InformativePriorsSaveBuildsMisleadingOnesStillFind) {
  SimConfig c = multi_config();
  c.commits = 512;
  double uni = 0, inf = 0, mis = 0;
  int correct_mis = 0;
  const int runs = 8;
  for (uint64_t seed = 1; seed <= runs; ++seed) {
    History h = make_history_steps(c, seed, {0.03});
    const int cul = h.regressions()[0];
    // Informative: the culprit touches a 5x path, a third of the others only docs (0.05).
    std::vector<double> w(size_t(h.n), 1.0), wm(size_t(h.n), 1.0);
    for (int i = 1; i < h.n; ++i) {
      if (i % 3 == 0) w[size_t(i)] = 0.05;
      if (i % 7 == 0) wm[size_t(i)] = 5;
    }
    w[size_t(cul)] = 5;
    wm[size_t(cul)] = 0.05;  // misleading: the culprit touches only a 0.05-weighted path
    RunOptions o;
    uni += run_kbisect(c, h, seed, o).builds;
    o.weights = w;
    inf += run_kbisect(c, h, seed, o).builds;
    o.weights = wm;
    MethodResult m = run_kbisect(c, h, seed, o);
    mis += m.builds;
    correct_mis += m.all_found;
  }
  EXPECT_LT(inf, uni);
  EXPECT_GE(correct_mis, runs - 1);
  EXPECT_LT(mis, 2.5 * uni);  // bounded extra cost
}

// ---- placement: blocks with fresh loads ------------------------------------------------------------

TEST(BlockSummary, PairedMedianPerCommit) {
  // Commit 0 drifts a lot within the block; commit 1 is 10% slower in every round, commit 2 2% faster
  // except for one outlier round. Summaries keep commit 0's median scale and the paired ratios exactly.
  const Rounds block = {{1.0, 2.0, 4.0, 1.5, 3.0}, {1.1, 2.2, 4.4, 1.65, 3.3}, {0.98, 1.96, 8.0, 1.47, 2.94}};
  const auto s = block_summary(block);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0], 2.0);              // median of commit 0
  EXPECT_NEAR(s[1] / s[0], 1.10, 1e-12);    // every paired ratio is 1.1
  EXPECT_NEAR(s[2] / s[0], 0.98, 1e-12);    // the outlier round does not move the median ratio
  // Unpaired medians would have said 2.2 / 2.0 for commit 1 too, but 2.94 / 2.0 = +47% for commit 2.
  EXPECT_EQ(block_summary(Rounds{{}, {}}), (std::vector<double>{0, 0}));
}

TEST(SimPlacement, BlocksWithFreshLoadsSurviveLoadOffsets) {
  // Each load of an executable runs at its own fixed offset (sd 0.4%, the size behind the A/A false
  // positives of one-load `kbisect ab`). With one load per commit for the whole bisection the good and
  // bad endpoints carry their offsets into every ±0.25% midpoint question; with fresh loads per block the
  // offsets vary between blocks and only widen the CI.
  SimConfig c;
  c.commits = 256;
  c.load_sd = 0.004;
  int one_load = 0, blocks = 0;
  const int runs = 12;
  for (uint64_t seed = 1; seed <= runs; ++seed) {
    History h = make_history(c, seed);
    SimConfig a = c;
    a.block_rounds = 0;
    one_load += run_kbisect(a, h, seed).correct;
    blocks += run_kbisect(c, h, seed).correct;
  }
  EXPECT_LE(one_load, runs / 2) << "one load per commit: " << one_load << " of " << runs << " right";
  EXPECT_GE(blocks, runs - 1) << "blocks: " << blocks << " of " << runs << " right";
  // Without placement offsets both designs are right (the block design costs some samples, not accuracy).
  SimConfig q = c;
  q.load_sd = 0;
  int quiet = 0;
  for (uint64_t seed = 1; seed <= runs; ++seed) quiet += run_kbisect(q, make_history(q, seed), seed).correct;
  EXPECT_GE(quiet, runs - 1);
}
