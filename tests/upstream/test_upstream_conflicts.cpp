// The conflict signal: fork commits that carry picks or are rebases/squashes are not the fork's own
// changes; a pending commit near the fork's own lines is judged by a trial merge onto the fork.
//
// Five files a.c .. e.c of 10 lines. Upstream `up`: U1 a.c:7 (day 1), U2 b.c:5 (day 2), U3 c.c:5
// (day 3). Fork `fork`: F1 a.c:5 (day 1.5), F2 b.c:5 its own way (day 2.5), R rewrites line 1 of
// every file ("fork: license headers", day 3.5: a rebase-like commit by its share of files, with
// rebase_min_files lowered to 5 for this small tree).
// U1 lies near F1 but merges cleanly, U2 conflicts with F2, U3 touches only what R changed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/upstream/scenario.h"

using namespace kb;
using kbtest::day;

namespace {

using Pair = kbtest::upstream_scenario::Scenario;  // a repository and its named commits

Pair& pair() {
  static Pair* p = [] {
    auto* pp = new Pair;
    auto& r = pp->repo;
    auto& sha = pp->sha;
    for (const char* f : {"a", "b", "c", "d", "e"}) r.write_lines(std::string(f) + ".c", f, 10);
    sha["U0"] = r.commit("initial import", day(0));
    r.git({"branch", "fork"});
    sha["U1"] = r.commit_line("a.c", 7, "a line 7 upstream", "a: line 7", day(1));
    sha["U2"] = r.commit_line("b.c", 5, "b line 5 upstream", "b: line 5", day(2));
    sha["U3"] = r.commit_line("c.c", 5, "c line 5 upstream", "c: line 5", day(3));
    r.git({"checkout", "-q", "fork"});
    sha["F1"] = r.commit_line("a.c", 5, "a line 5 fork", "fork: a line 5", day(1.5));
    sha["F2"] = r.commit_line("b.c", 5, "b line 5 fork", "fork: b line 5", day(2.5));
    for (const char* f : {"a", "b", "c", "d", "e"}) r.set_line(std::string(f) + ".c", 1, "// license");
    sha["R"] = r.commit("fork: license headers", day(3.5));
    r.git({"checkout", "-q", "up"});
    return pp;
  }();
  return *p;
}

const std::string& S(const std::string& n) { return pair().sha.at(n); }

upstream::Config cfg(const std::string& extra = "") {
  return upstream::parse_config("risky_paths: []\nrebase_min_files: 5\n" + extra, "conflicts.yaml");
}

}  // namespace

TEST(UpstreamConflicts, TrialPickAppliesOrConflicts) {
  git::Repo repo(pair().repo.path());
  auto clean = repo.trial_pick("fork", S("U1"));
  EXPECT_TRUE(clean.clean);
  EXPECT_TRUE(clean.conflicts.empty());
  EXPECT_EQ(repo.check({"cat-file", "-p", clean.tree + ":a.c"}),
            "// license\na line 2\na line 3\na line 4\na line 5 fork\na line 6\na line 7 upstream\na line 8\n"
            "a line 9\na line 10\n");
  auto bad = repo.trial_pick("fork", S("U2"));
  EXPECT_FALSE(bad.clean);
  EXPECT_EQ(bad.conflicts, std::vector<std::string>{"b.c"});
  // A tree is accepted as the base too (a chain picked one after another).
  EXPECT_TRUE(repo.trial_pick(clean.tree, S("U3")).clean);
}

TEST(UpstreamConflicts, TrialMergeDecidesRiskyVersusBundle) {
  git::Repo repo(pair().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", cfg());
  ASSERT_EQ(r.fork_rebase_commits.size(), 1u);
  EXPECT_EQ(r.fork_rebase_commits[0].sha, S("R"));
  EXPECT_EQ(r.fork_rebase_commits[0].why, "changes 5 of 5 tracked files (100% > 50%)");
  EXPECT_EQ(r.fork_changed_files, (std::vector<std::string>{"a.c", "b.c"}));
  ASSERT_EQ(r.pending.size(), 3u);
  const auto &u1 = r.pending[0], &u2 = r.pending[1], &u3 = r.pending[2];
  EXPECT_EQ(u1.fork_collisions, std::vector<std::string>{"a.c:7"});
  EXPECT_EQ(u1.trial, "clean");
  EXPECT_TRUE(u1.risks.empty());
  EXPECT_EQ(u1.notes, std::vector<std::string>{"near the fork's changes (a.c:7); a trial merge onto the fork applies cleanly"});
  EXPECT_EQ(u2.fork_collisions, std::vector<std::string>{"b.c:5"});
  EXPECT_EQ(u2.trial, "conflict");
  EXPECT_EQ(u2.conflicts, std::vector<std::string>{"b.c"});
  EXPECT_EQ(u2.risks, std::vector<std::string>{"conflicts with the fork (trial merge onto its head): b.c"});
  EXPECT_TRUE(u3.fork_collisions.empty());
  EXPECT_EQ(u3.trial, "");
  EXPECT_TRUE(u3.risks.empty());

  ASSERT_EQ(r.plan.size(), 2u);
  EXPECT_EQ(r.plan[0].kind, "bundle");
  EXPECT_FALSE(r.plan[0].risky);
  EXPECT_EQ(r.plan[0].commits, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(r.plan[0].reasons,
            std::vector<std::string>{"2 independent commits: no dependency on or from another pending commit, no "
                                     "risky path, no conflict with the fork (at most 20 per bundle)"});
  EXPECT_EQ(r.plan[1].kind, "chain");
  EXPECT_TRUE(r.plan[1].risky);
  EXPECT_EQ(r.plan[1].commits, std::vector<size_t>{1});
  EXPECT_EQ(r.plan[1].reasons,
            (std::vector<std::string>{"single commit with risks: ingest alone",
                                      S("U2").substr(0, 12) + ": conflicts with the fork (trial merge onto its head): b.c"}));
  EXPECT_DOUBLE_EQ(r.metrics.days_behind, 3.0);
  auto j = upstream::to_json(r);
  EXPECT_EQ(j["pending"][1]["trial"], "conflict");
  EXPECT_EQ(j["fork_rebase_commits"][0]["why"], "changes 5 of 5 tracked files (100% > 50%)");
}

TEST(UpstreamConflicts, RebaseCommitNoLongerMakesEverythingRisky) {
  git::Repo repo(pair().repo.path());
  // Without rebase detection and with file-level collisions, R puts every file in the fork's set.
  auto before = upstream::analyze(
      repo, "fork", "up", cfg("fork_conflicts: file\nrebase_subjects: []\nrebase_file_share: 0\n"));
  EXPECT_TRUE(before.fork_rebase_commits.empty());
  EXPECT_EQ(before.fork_changed_files.size(), 5u);
  ASSERT_EQ(before.plan.size(), 3u);
  for (const auto& st : before.plan) {
    EXPECT_EQ(st.kind, "chain");
    EXPECT_TRUE(st.risky);
  }
  // File level with R recognized by its subject: only U1 and U2 touch the fork's own files.
  auto by_subject = upstream::analyze(
      repo, "fork", "up", cfg("fork_conflicts: file\nrebase_subjects: ['^fork: license']\nrebase_file_share: 0\n"));
  ASSERT_EQ(by_subject.fork_rebase_commits.size(), 1u);
  EXPECT_EQ(by_subject.fork_rebase_commits[0].why, "subject matches '^fork: license'");
  ASSERT_EQ(by_subject.plan.size(), 3u);
  EXPECT_EQ(by_subject.plan[0].kind, "bundle");
  EXPECT_EQ(by_subject.plan[0].commits, std::vector<size_t>{2});
}

TEST(UpstreamConflicts, ReportsStartWithTheSummary) {
  git::Repo repo(pair().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", cfg());
  const std::string u2 = S("U2").substr(0, 12);
  std::string t = upstream::render_table(r);
  size_t sum = t.find("\nsummary\n"), det = t.find("\ndetails\n"), plan = t.find("\ningestion plan (");
  ASSERT_NE(sum, std::string::npos) << t;
  EXPECT_LT(sum, det);
  EXPECT_LT(det, plan);
  EXPECT_NE(t.find("  days behind         3.00 "), std::string::npos) << t;
  EXPECT_NE(t.find("  plan                2 steps (bundles first, then each chain alone)\n"
                   "    1. bundle of 2 commits\n"
                   "    2. chain of 1 commit, risky from " + u2 + "\n"
                   "  top risks\n"
                   "    " + u2 + " (step 2) b: line 5: conflicts with the fork (trial merge onto its head): b.c\n"),
            std::string::npos)
      << t;
  EXPECT_LT(t.find("  top risks\n"), det);
  std::string html = upstream::render_html(r);
  size_t hs = html.find("<h2>Summary</h2>"), hd = html.find("<h2>Details</h2>"), hp = html.find("<h3>Ingestion plan</h3>");
  ASSERT_NE(hs, std::string::npos);
  EXPECT_LT(hs, hd);
  EXPECT_LT(hd, hp);
  EXPECT_NE(html.find("<li>1. bundle of 2 commits</li>\n<li>2. chain of 1 commit, risky from " + u2 + "</li>"),
            std::string::npos);
  EXPECT_LT(html.find("<li>" + u2 + " (step 2) b: line 5: conflicts with the fork"), hd);
}
