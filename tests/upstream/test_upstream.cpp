// kbisect upstream on the scenario of tests/upstream/scenario.h (every date fixed, so every expected
// value is exact).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "git/git.h"
#include "tests/upstream/scenario.h"
#include "upstream/upstream.h"

using namespace kb;
using namespace kbtest::upstream_scenario;
using kbtest::day;


TEST(Upstream, MetricsSurviveRebaseAndCherryPicks) {
  git::Repo repo(scenario().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", test_config());
  EXPECT_EQ(r.merge_base.sha, S("U2"));  // the rebase moved the merge base
  EXPECT_EQ(r.metrics.upstream_commits, 14);
  EXPECT_EQ(r.metrics.integrated_commits, 3);
  EXPECT_EQ(r.metrics.pending_commits, 11);
  // U3 was skipped: the integration point stays at the merge base U2 (day 2); head U16 is day 16.
  EXPECT_EQ(r.metrics.integration_point.sha, S("U2"));
  EXPECT_TRUE(r.metrics.integration_point_is_merge_base);
  EXPECT_EQ(r.metrics.seconds_behind, 14 * kbtest::kDay);
  EXPECT_DOUBLE_EQ(r.metrics.days_behind, 14.0);
  ASSERT_TRUE(r.metrics.newest_integrated);
  EXPECT_EQ(r.metrics.newest_integrated->sha, S("U14"));
  EXPECT_EQ(r.metrics.backlog_commits, 9);  // U3, U6..U13

  ASSERT_EQ(r.integrated.size(), 3u);
  EXPECT_EQ(r.integrated[0].commit.sha, S("U4"));
  EXPECT_EQ(r.integrated[0].how, "patch-id");
  EXPECT_EQ(r.integrated[0].fork_sha, S("P4"));
  EXPECT_EQ(r.integrated[1].commit.sha, S("U5"));
  EXPECT_EQ(r.integrated[1].how, "cherry-pick trailer");  // patch changed while picking
  EXPECT_EQ(r.integrated[1].fork_sha, S("P5"));
  EXPECT_EQ(r.integrated[2].commit.sha, S("U14"));
  EXPECT_EQ(r.integrated[2].how, "patch-id");

  std::vector<std::string> pend;
  for (const auto& p : r.pending) pend.push_back(p.commit.sha);
  EXPECT_EQ(pend, names({"U3", "U6", "U7", "U8", "U9", "U10", "U11", "U12", "U13", "U15", "U16"}));
  for (const char* b : {"U3", "U6", "U7", "U8", "U9", "U10", "U11", "U12", "U13"})
    EXPECT_TRUE(pending(r, b).backlog) << b;
  EXPECT_FALSE(pending(r, "U15").backlog);
  EXPECT_FALSE(pending(r, "U16").backlog);
  // Picks are not fork-local changes; the local edit and the new file are.
  EXPECT_EQ(r.fork_changed_files, (std::vector<std::string>{"fork/only.txt", "src/core.c"}));
  EXPECT_EQ(pending(r, "U3").commit.commit_time, day(3));
}

TEST(Upstream, DependenciesChainsBundlesAndPlan) {
  git::Repo repo(scenario().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", test_config());
  EXPECT_EQ(r.dependency_level, "hunk");
  // Revert chain: message references and line overlap.
  EXPECT_TRUE(depends_on(r, "U7", "U6", "This reverts commit"));
  EXPECT_TRUE(depends_on(r, "U7", "U6", "touches lines it changed in docs/guide.md:3"));
  EXPECT_TRUE(depends_on(r, "U8", "U6", "Reland"));
  EXPECT_TRUE(depends_on(r, "U8", "U7", "relands after it (this reverted the original)"));
  EXPECT_TRUE(depends_on(r, "U8", "U7", "docs/guide.md:3"));
  // Adjacent lines (2 then 3) touch; line 9 of the same file does not.
  EXPECT_TRUE(depends_on(r, "U12", "U11", "tools/c.py:2"));
  EXPECT_TRUE(pending(r, "U13").depends_on.empty());
  // fixup! by subject only (lines 1 and 4 are apart).
  ASSERT_EQ(pending(r, "U16").depends_on.size(), 1u);
  EXPECT_TRUE(depends_on(r, "U16", "U15", "amends it (fixup! \"readme: update intro\")"));
  // Risks: fork collision and risky glob.
  ASSERT_EQ(pending(r, "U9").risks.size(), 1u);
  EXPECT_NE(pending(r, "U9").risks[0].find("src/core.c"), std::string::npos);
  EXPECT_NE(pending(r, "U9").risks[0].find("fork"), std::string::npos);
  ASSERT_EQ(pending(r, "U10").risks.size(), 1u);
  EXPECT_NE(pending(r, "U10").risks[0].find("lib/Target/X86/isel.cpp (lib/Target/**)"), std::string::npos);
  EXPECT_TRUE(pending(r, "U3").risks.empty());

  ASSERT_EQ(r.plan.size(), 6u);
  EXPECT_EQ(r.plan[0].kind, "bundle");
  EXPECT_FALSE(r.plan[0].risky);
  EXPECT_EQ(shas_of(r, r.plan[0].commits), names({"U3", "U13"}));
  EXPECT_EQ(r.plan[1].kind, "chain");
  EXPECT_FALSE(r.plan[1].risky);
  EXPECT_EQ(shas_of(r, r.plan[1].commits), names({"U6", "U7", "U8"}));
  EXPECT_EQ(r.plan[2].kind, "chain");
  EXPECT_TRUE(r.plan[2].risky);
  EXPECT_EQ(shas_of(r, r.plan[2].commits), names({"U9"}));
  EXPECT_TRUE(r.plan[3].risky);
  EXPECT_EQ(shas_of(r, r.plan[3].commits), names({"U10"}));
  EXPECT_FALSE(r.plan[4].risky);
  EXPECT_EQ(shas_of(r, r.plan[4].commits), names({"U11", "U12"}));
  EXPECT_FALSE(r.plan[5].risky);
  EXPECT_EQ(shas_of(r, r.plan[5].commits), names({"U15", "U16"}));
  EXPECT_EQ(pending(r, "U13").step, 1u);
  EXPECT_EQ(pending(r, "U16").step, 6u);
}

TEST(Upstream, FileLevelDependenciesAndBundleCap) {
  git::Repo repo(scenario().repo.path());
  auto cfg = upstream::parse_config(
      "risky_paths: []\nfork_changes_risky: false\nbundle_max_commits: 2\ndependency: file\n", "file.yaml");
  auto r = upstream::analyze(repo, "fork", "up", cfg);
  EXPECT_EQ(r.dependency_level, "file");
  EXPECT_TRUE(depends_on(r, "U13", "U12", "changes file tools/c.py"));
  // With no risk rules, U3, U9 and U10 are independent: two bundles of at most 2.
  ASSERT_EQ(r.plan.size(), 5u);
  EXPECT_EQ(shas_of(r, r.plan[0].commits), names({"U3", "U9"}));
  EXPECT_EQ(shas_of(r, r.plan[1].commits), names({"U10"}));
  EXPECT_EQ(r.plan[1].kind, "bundle");
  EXPECT_EQ(shas_of(r, r.plan[2].commits), names({"U6", "U7", "U8"}));
  EXPECT_EQ(shas_of(r, r.plan[3].commits), names({"U11", "U12", "U13"}));
  EXPECT_EQ(shas_of(r, r.plan[4].commits), names({"U15", "U16"}));
}

TEST(Upstream, LargeCommitsAreRisky) {
  git::Repo repo(scenario().repo.path());
  auto cfg = upstream::parse_config("risky_paths: []\nlarge_commit_lines: 1\n", "large.yaml");
  auto r = upstream::analyze(repo, "fork", "up", cfg);
  // Every one-line change is 2 changed lines (one removed, one added) > 1.
  ASSERT_FALSE(pending(r, "U3").risks.empty());
  EXPECT_NE(pending(r, "U3").risks[0].find("large: 2 changed lines"), std::string::npos);
  for (const auto& st : r.plan) EXPECT_EQ(st.kind, "chain");
}

TEST(Upstream, EmergencyClosureLeavesDaysBehind) {
  git::Repo repo(scenario().repo.path());
  upstream::Options opt;
  opt.emergency = S("U8");
  auto r = upstream::analyze(repo, "fork", "up", test_config(), opt);
  ASSERT_TRUE(r.emergency);
  EXPECT_EQ(shas_of(r, r.emergency->closure), names({"U6", "U7", "U8"}));
  EXPECT_DOUBLE_EQ(r.emergency->after.days_behind, 14.0);
  EXPECT_EQ(r.emergency->after.backlog_commits, 6);
  EXPECT_EQ(r.emergency->after.pending_commits, 8);
  ASSERT_FALSE(r.emergency->effect.empty());
  EXPECT_NE(r.emergency->effect[0].find("unchanged"), std::string::npos);
  EXPECT_NE(r.emergency->effect[0].find(S("U3").substr(0, 10)), std::string::npos);
}

TEST(Upstream, EmergencyThatClosesTheGapMovesDaysBehind) {
  git::Repo repo(scenario().repo.path());
  upstream::Options opt;
  opt.emergency = "up~13";  // U3
  auto r = upstream::analyze(repo, "fork", "up", test_config(), opt);
  ASSERT_TRUE(r.emergency);
  EXPECT_EQ(shas_of(r, r.emergency->closure), names({"U3"}));
  EXPECT_EQ(r.emergency->after.integration_point.sha, S("U5"));
  EXPECT_FALSE(r.emergency->after.integration_point_is_merge_base);
  EXPECT_DOUBLE_EQ(r.emergency->after.days_behind, 11.0);
  EXPECT_EQ(r.emergency->after.backlog_commits, 8);
}

TEST(Upstream, EmergencyErrors) {
  git::Repo repo(scenario().repo.path());
  auto expect_error = [&](const std::string& rev, const std::string& part) {
    upstream::Options opt;
    opt.emergency = rev;
    try {
      upstream::analyze(repo, "fork", "up", test_config(), opt);
      ADD_FAILURE() << "no error for " << rev;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(S("U4"), "already integrated (patch-id");
  expect_error(S("U1"), "already in the fork's history");
  expect_error(S("F2"), "already in the fork's history");
  expect_error(S("O1"), "not an upstream commit");
  expect_error("no-such-commit", "--emergency commit 'no-such-commit'");
}

TEST(Upstream, HistoryPerWeek) {
  git::Repo repo(scenario().repo.path());
  auto cfg = test_config();
  cfg.history_weeks = 4;
  upstream::Options opt;
  opt.history = true;
  auto r = upstream::analyze(repo, "fork", "up", cfg, opt);
  ASSERT_EQ(r.history.size(), 4u);
  EXPECT_EQ(r.history[0].as_of, day(0));
  EXPECT_EQ(r.history[0].fork_sha, S("U0"));
  EXPECT_DOUBLE_EQ(r.history[0].metrics.days_behind, 0.0);
  EXPECT_EQ(r.history[0].metrics.pending_commits, 0);

  EXPECT_EQ(r.history[1].as_of, day(7));
  EXPECT_EQ(r.history[1].fork_sha, S("P5"));
  EXPECT_EQ(r.history[1].upstream_sha, S("U7"));
  EXPECT_DOUBLE_EQ(r.history[1].metrics.days_behind, 5.0);
  EXPECT_EQ(r.history[1].metrics.backlog_commits, 1);
  EXPECT_EQ(r.history[1].metrics.pending_commits, 3);

  EXPECT_EQ(r.history[2].as_of, day(14));
  EXPECT_EQ(r.history[2].upstream_sha, S("U14"));
  EXPECT_DOUBLE_EQ(r.history[2].metrics.days_behind, 12.0);
  EXPECT_EQ(r.history[2].metrics.backlog_commits, 1);
  EXPECT_EQ(r.history[2].metrics.pending_commits, 10);

  EXPECT_EQ(r.history[3].as_of, day(16.25));
  EXPECT_EQ(r.history[3].fork_sha, S("F2"));
  EXPECT_DOUBLE_EQ(r.history[3].metrics.days_behind, 14.0);
  EXPECT_EQ(r.history[3].metrics.backlog_commits, 9);

  std::string html = upstream::render_html(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, static
}

TEST(Upstream, UpToDateForkHasNothingPending) {
  git::Repo repo(scenario().repo.path());
  auto r = upstream::analyze(repo, "up", "up~3", test_config());
  EXPECT_EQ(r.metrics.pending_commits, 0);
  EXPECT_EQ(r.metrics.backlog_commits, 0);
  EXPECT_DOUBLE_EQ(r.metrics.days_behind, 0.0);
  EXPECT_TRUE(r.plan.empty());
  EXPECT_NE(upstream::render_table(r).find("nothing pending"), std::string::npos);
}

TEST(Upstream, BadRefsAndUnrelatedHistories) {
  git::Repo repo(scenario().repo.path());
  try {
    upstream::analyze(repo, "nosuch", "up", test_config());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fork ref 'nosuch' is not a commit"), std::string::npos) << e.what();
  }
  try {
    upstream::analyze(repo, "fork", "up~99", test_config());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("upstream ref 'up~99'"), std::string::npos) << e.what();
  }
  try {
    upstream::analyze(repo, "other", "up", test_config());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unrelated histories"), std::string::npos) << e.what();
  }
  EXPECT_THROW(git::Repo(scenario().repo.tmp() + "/does-not-exist"), InputError);
  EXPECT_THROW(git::Repo(scenario().repo.tmp() + "/.home"), InputError);
}

TEST(Upstream, ConfigErrorsNameFileLineAndField) {
  auto msg = [](const std::string& text) -> std::string {
    try {
      upstream::parse_config(text, "cfg.yaml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(msg("risky_paths: []\nbundle_max_commits: abc\n"),
            "cfg.yaml:2:21: field 'bundle_max_commits': expected an integer >= 1, got 'abc'");
  EXPECT_EQ(msg("bundle_max_commits: 0\n"), "cfg.yaml:1:21: field 'bundle_max_commits': expected an integer >= 1, got 0");
  EXPECT_NE(msg("\nriskypaths: []\n").find("cfg.yaml:2:1: unknown field 'riskypaths'"), std::string::npos);
  EXPECT_NE(msg("dependency: line\n").find("field 'dependency': expected 'hunk' or 'file', got 'line'"), std::string::npos);
  EXPECT_NE(msg("risky_paths: lib\n").find("cfg.yaml:1:14: field 'risky_paths'"), std::string::npos);
  EXPECT_NE(msg("fork_changes_risky: maybe\n").find("field 'fork_changes_risky'"), std::string::npos);
  EXPECT_NE(msg("risky_paths: [\n").find("YAML syntax error"), std::string::npos);
  auto c = upstream::parse_config("", "empty.yaml");
  EXPECT_EQ(c.bundle_max_commits, 20);
  EXPECT_EQ(c.dependency, upstream::Config::Level::Hunk);
}

TEST(Upstream, PrintersCarryDefinitionsAndNumbers) {
  git::Repo repo(scenario().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", test_config());
  std::string t = upstream::render_table(r), md = upstream::render_markdown(r), html = upstream::render_html(r);
  for (const std::string* s : {&t, &md, &html}) {
    EXPECT_NE(s->find("14.00"), std::string::npos);
    EXPECT_NE(s->find("committer date of the upstream head minus committer date of the integration point"),
              std::string::npos);
  }
  EXPECT_NE(md.find("| days behind | 14.00 |"), std::string::npos);
  EXPECT_NE(md.find("| backlog commits | 9 |"), std::string::npos);
  auto j = upstream::to_json(r);
  EXPECT_EQ(j["schema"], "kbisect.upstream/1");
  EXPECT_EQ(j["metrics"]["backlog_commits"], 9);
  EXPECT_EQ(j["plan"].size(), 6u);
  EXPECT_EQ(j["plan"][0]["commits"][1], S("U13"));
  EXPECT_TRUE(j["definitions"]["days_behind"].is_string());
}
