// bisect/locate.h: where the expensive-sample bisection runs next (pure): the classes that skipped commits
// make, the entropy of a split, the candidates and the choice among them.
#include <cmath>

#include <gtest/gtest.h>

#include "bisect/locate.h"

using namespace kb::bisect;

TEST(Locate, ASkippedCommitJoinsTheTwoPositionsItAloneSeparates) {
  // Commits 0..5; commit 2 cannot run: "2 is the first at the second level" and "3 is" differ only in
  // commit 2's level, so they are one class.
  const std::vector<double> p = {0, 0.1, 0.2, 0.3, 0.25, 0.15};
  const auto k = hypothesis_classes(p, {false, false, true, false, false, false});
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(k[1].first, 2);
  EXPECT_EQ(k[1].last, 3);
  EXPECT_NEAR(k[1].mass, 0.5, 1e-12);
  EXPECT_EQ(hypothesis_classes(p, {}).size(), 5u);
}

TEST(Locate, SplitEntropy) {
  const std::vector<double> cdf = {0, 0.25, 0.5, 0.75, 1};
  EXPECT_NEAR(split_entropy(cdf, {2}), 1.0, 1e-12);
  EXPECT_NEAR(split_entropy(cdf, {1, 2, 3}), 2.0, 1e-12);
  EXPECT_NEAR(split_entropy(cdf, {3, 1, 2, 2}), 2.0, 1e-12);  // order and repeats do not matter
  EXPECT_NEAR(split_entropy(cdf, {}), 0.0, 1e-12);
  EXPECT_NEAR(split_entropy(cdf, {1}), -(0.25 * std::log2(0.25) + 0.75 * std::log2(0.75)), 1e-12);
}

TEST(Locate, CandidatesAreTheBestSplitsThenTheEnds) {
  const std::vector<double> cdf = {0, 0.1, 0.3, 0.5, 0.7, 0.95, 1};
  EXPECT_EQ(probe_candidates(cdf, {}, 2), (std::vector<int>{3, 2, 0, 6}));
  EXPECT_EQ(probe_candidates(cdf, {false, false, false, true}, 2), (std::vector<int>{2, 4, 0, 6}));
}

TEST(Locate, ChoiceWeighsInformationFlightAndBuilds) {
  const std::vector<double> cdf = {0, 0.25, 0.5, 0.75, 1};
  const std::vector<int> cands = {1, 2, 3, 0, 4};
  const std::vector<double> info = {0.4, 0.5, 0.4, 0.05, 0.05};
  const std::vector<bool> built(5, true);
  EXPECT_EQ(choose_probe(cands, info, cdf, {}, built, 0), 2);
  // With 2 in flight, 1 and 3 each add half their split; an end its whole (small) information.
  EXPECT_EQ(choose_probe(cands, info, cdf, {2}, built, 0).value_or(-1) % 2, 1);
  // A commit that needs a build costs 1 + build_cost runs.
  std::vector<bool> some = built;
  some[2] = false;
  EXPECT_EQ(choose_probe(cands, info, cdf, {}, some, 0), 2);
  EXPECT_NE(choose_probe(cands, info, cdf, {}, some, 1), 2);
  // Nothing informative: none.
  EXPECT_FALSE(choose_probe(cands, std::vector<double>(5, 0.0), cdf, {}, built, 0).has_value());
}
