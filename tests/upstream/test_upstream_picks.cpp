// Pick recognition on a generated fork/upstream pair that carries upstream work the way real forks do:
// plain picks, a squashed bundle with a skipped section, a resolved pick with a changed diff, a pick
// trailer, a pick whose context moved, a won't-port commit, GitHub reverts and relands, a UTF-8 and
// a Latin-1 subject and an unreadable blob. Every date is fixed, so every figure is exact.
//
// Upstream `up` (U<n> at day n, PR numbers 101..111 in upstream's number space 100..999):
//   U1 core (#101)  U2 feature two (#102)  U3 feature three, a Latin-1 subject (#103)  U4 feature four (#104)
//   U5 resolved (#105)  U6 trailer (#106)  U7 moved context (#107)  U8 won't port (#108)
//   U9 non-ASCII subject (#109)  U10 Revert "feature two (#102)" (#110)  U11 Reland "feature two (#102)" (#111)
// Fork `fork` (its own PRs #1..#9): picks U1 by cherry-pick (patch-id), bundles U2 and U4 (U3 under
// "Skipped"), resolves U5, ports U6 with a trailer, re-adds U7's lines into a reformatted file, and
// adds a commit whose blob is then made unreadable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/fsutil.h"
#include "core/text.h"
#include "git/git.h"
#include "tests/common/temp_repo.h"
#include "upstream/upstream.h"

using namespace kb;
using kbtest::day;

namespace {

struct Pair {
  kbtest::TempRepo repo;
  std::map<std::string, std::string> sha;
};

void build_upstream(kbtest::TempRepo& r, std::map<std::string, std::string>& sha) {
  sha["U1"] = r.commit_line("core.c", 2, "core fixed (#101)", "core: fix (#101)", day(1));
  sha["U2"] = r.commit_line("two.c", 3, "two v2", "x: feature two (#102)", day(2));
  r.set_line("three.c", 3, "three v2");
  // Raw Latin-1 (0xEF is "ï"), no encoding header: git log passes the bytes through as they are.
  sha["U3"] = r.commit_raw_message("x: feature three, na\xefve (#103)", day(3));
  sha["U4"] = r.commit_line("four.c", 3, "four v2", "x: feature four (#104)", day(4));
  sha["U5"] = r.commit_line("five.c", 3, "five v2", "y: resolved change (#105)", day(5));
  sha["U6"] = r.commit_line("six.c", 3, "six v2", "z: trailer change (#106)", day(6));
  r.write("seven.c", "seven line 1\nseven added A\nseven added B\nseven added C\nseven added D\nseven line 2\n");
  sha["U7"] = r.commit("w: moved context (#107)", day(7));
  sha["U8"] = r.commit_line("eight.c", 3, "eight v2", "experimental: not for us (#108)", day(8));
  sha["U9"] = r.commit_line("nine.c", 3, "nine v2", "docs: r\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 caf\xc3\xa9 (#109)", day(9));
  sha["U10"] = r.commit_line("two.c", 3, "two line 3", "Revert \"x: feature two (#102)\" (#110)\n\nReverts owner/up#102", day(10));
  sha["U11"] = r.commit_line("two.c", 3, "two v2", "Reland \"x: feature two (#102)\" (#111)", day(11));
}

void build_fork(kbtest::TempRepo& r, std::map<std::string, std::string>& sha) {
  r.git({"checkout", "-q", "fork"});
  r.git_committer({"cherry-pick", sha["U1"]}, day(1.5));
  sha["P1"] = r.git({"rev-parse", "HEAD"});
  r.set_line("two.c", 3, "two v2");
  r.set_line("four.c", 3, "four v2");
  sha["B"] = r.commit("[Cherry-pick][BUNDLE] Cherry-pick 3 upstream(#102 #103 #104) (#2)\n\n"
                      "Applied (2): #102, #104\n\nSkipped (1):\n- #103 needs the new allocator\n",
                      day(4.5));
  sha["P5"] = r.commit_line("five.c", 3, "five v2 (resolved for the fork)", "[Cherry-pick][RESOLVED] 'y: resolved change (#105)' (#3)", day(5.5));
  sha["P6"] = r.commit_line("six.c", 3, "six v2 adapted", "port z change\n\nReactor Cherry-pick Revision: " + sha["U6"] + "\n", day(6.5));
  r.write("seven.c", "seven line 1 (reformatted)\nseven added A\nseven added B\nseven added C\nseven added D\n"
                     "seven line 2 (reformatted)\n");
  sha["P7"] = r.commit("misc: sync seven (#4)", day(7.5));
  r.write("blob.bin", "fork data that will be lost\n");
  sha["F9"] = r.commit("fork: add data (#5)", day(8.5));
  // Make the blob unreadable: remove its loose object (after leaving the fork, whose work tree file
  // git would otherwise read instead).
  std::string blob = r.git({"rev-parse", "HEAD:blob.bin"});
  r.git({"checkout", "-q", "up"});
  remove_tree(r.path() + "/.git/objects/" + blob.substr(0, 2) + "/" + blob.substr(2));
}

Pair& pair() {
  static Pair* p = [] {
    auto* pp = new Pair;
    auto& r = pp->repo;
    for (const char* f : {"core", "two", "three", "four", "five", "six", "eight", "nine"})
      r.write_lines(std::string(f) + ".c", f, 6);
    r.write("seven.c", "seven line 1\nseven line 2\n");
    pp->sha["U0"] = r.commit("initial import", day(0));
    r.git({"branch", "fork"});
    build_upstream(r, pp->sha);
    build_fork(r, pp->sha);
    return pp;
  }();
  return *p;
}

const std::string& S(const std::string& n) { return pair().sha.at(n); }

upstream::Config pair_config() {
  return upstream::parse_config(
      "risky_paths: []\n"
      "upstream_pr_range: [100, 999]\n"
      "pick_trailers: ['Reactor Cherry-pick Revision: ([0-9a-f]{7,40})']\n"
      "skip:\n  - pr: 108\n    reason: experimental API\n",
      "pair.yaml");
}

}  // namespace

TEST(UpstreamPicks, EveryConventionIsRecognized) {
  git::Repo repo(pair().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", pair_config());
  std::vector<std::tuple<std::string, std::string, std::string>> got;
  for (const auto& ic : r.integrated) got.emplace_back(ic.commit.sha, ic.how, ic.fork_sha);
  using T = std::vector<std::tuple<std::string, std::string, std::string>>;
  EXPECT_EQ(got, (T{{S("U1"), "patch-id", S("P1")},
                    {S("U2"), "bundle", S("B")},
                    {S("U4"), "bundle", S("B")},
                    {S("U5"), "PR number", S("P5")},
                    {S("U6"), "cherry-pick trailer", S("P6")},
                    {S("U7"), "content", S("P7")}}));
  ASSERT_EQ(r.integrated.size(), 6u);
  EXPECT_EQ(r.integrated[1].evidence, "#102 named by the fork commit");
  EXPECT_EQ(r.integrated[4].evidence, "trailer \"Reactor Cherry-pick Revision: " + S("U6") + "\"");
  EXPECT_EQ(r.integrated[5].evidence, "4 of 4 added lines (100%) are in the fork");
  EXPECT_TRUE(r.integrated[5].weak);
  EXPECT_FALSE(r.integrated[0].weak);

  ASSERT_EQ(r.excluded.size(), 1u);
  EXPECT_EQ(r.excluded[0].commit.sha, S("U8"));
  EXPECT_EQ(r.excluded[0].kind, "won't port");
  EXPECT_EQ(r.excluded[0].reason, "experimental API");
  EXPECT_EQ(r.excluded[0].rule, "PR #108");

  std::vector<std::string> pend;
  for (const auto& p : r.pending) pend.push_back(p.commit.sha);
  EXPECT_EQ(pend, (std::vector<std::string>{S("U3"), S("U9"), S("U10"), S("U11")}));
  EXPECT_EQ(r.metrics.upstream_commits, 11);
  EXPECT_EQ(r.metrics.integrated_commits, 6);
  EXPECT_EQ(r.metrics.pending_commits, 4);
  EXPECT_EQ(r.metrics.excluded_commits, 1);
  // Contiguous: U3 is missing, so U2 (day 2); the head U11 is day 11.
  EXPECT_EQ(r.metrics.integration_point.sha, S("U2"));
  EXPECT_DOUBLE_EQ(r.metrics.days_behind, 9.0);
  // Frontier: the newest integrated commit U7 (day 7).
  ASSERT_TRUE(r.metrics.newest_integrated);
  EXPECT_EQ(r.metrics.newest_integrated->sha, S("U7"));
  EXPECT_DOUBLE_EQ(r.metrics.days_behind_frontier, 4.0);
  EXPECT_EQ(r.metrics.backlog_commits, 1);  // U3; U8 is excluded, not backlog

  // The unreadable blob degrades its commit with a warning naming commit and path.
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[0].find(S("F9").substr(0, 12)), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("blob.bin"), std::string::npos) << r.warnings[0];
  // The Latin-1 subject is read as Latin-1, with a warning naming the commit.
  EXPECT_EQ(r.pending[0].commit.subject, "x: feature three, na\xc3\xafve (#103)");
  EXPECT_EQ(r.warnings[1], "commit " + S("U3").substr(0, 12) +
                               " (x: feature three, na\xc3\xafve (#103)): its message is not UTF-8; its stray "
                               "bytes were read as Latin-1");
  // Picks are not fork-local changes; only the commit with the unreadable blob is left, unread.
  EXPECT_TRUE(r.fork_changed_files.empty());
}

TEST(UpstreamPicks, WontPortMovesTheContiguousPoint) {
  git::Repo repo(pair().repo.path());
  auto cfg = pair_config();
  cfg.skip.push_back({"", "x: feature three*", 0, "needs the new allocator", "deferred"});
  auto r = upstream::analyze(repo, "fork", "up", cfg);
  ASSERT_EQ(r.excluded.size(), 2u);
  EXPECT_EQ(r.excluded[0].commit.sha, S("U3"));
  EXPECT_EQ(r.excluded[0].kind, "deferred");
  EXPECT_EQ(r.excluded[0].rule, "subject x: feature three*");
  // Everything up to U8 is integrated or excluded; U9 is the oldest pending.
  EXPECT_EQ(r.metrics.integration_point.sha, S("U8"));
  EXPECT_DOUBLE_EQ(r.metrics.days_behind, 3.0);
  EXPECT_DOUBLE_EQ(r.metrics.days_behind_frontier, 3.0);
  EXPECT_EQ(r.metrics.backlog_commits, 0);
  EXPECT_EQ(r.metrics.pending_commits, 3);
}

TEST(UpstreamPicks, PresetsAndNumberSpaceAreConfigurable) {
  git::Repo repo(pair().repo.path());
  // Without the presets and the trailer only patch-id and the content rule remain.
  auto cfg = upstream::parse_config("risky_paths: []\npick_presets: []\n", "bare.yaml");
  auto r = upstream::analyze(repo, "fork", "up", cfg);
  std::vector<std::string> hows;
  for (const auto& ic : r.integrated) hows.push_back(ic.how);
  EXPECT_EQ(hows, (std::vector<std::string>{"patch-id", "content"}));
  // A number space that excludes upstream's numbers: no PR or bundle matches.
  auto far = upstream::parse_config("risky_paths: []\nupstream_pr_range: [5000, 0]\n", "far.yaml");
  auto f = upstream::analyze(repo, "fork", "up", far);
  EXPECT_EQ(f.metrics.integrated_commits, 2);
  EXPECT_EQ(upstream::to_json(r)["integrated"][1]["weak"], true);
}

TEST(UpstreamPicks, GitHubRevertAndRelandOfAPickNetToNothing) {
  git::Repo repo(pair().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", pair_config());
  ASSERT_EQ(r.pending.size(), 4u);
  const auto& rev = r.pending[2];
  const auto& rel = r.pending[3];
  EXPECT_EQ(rev.commit.sha, S("U10"));
  EXPECT_EQ(rev.reverts, S("U2"));   // by the subject and by "Reverts owner/up#102"
  EXPECT_EQ(rel.relands, S("U2"));
  ASSERT_EQ(rel.depends_on.size(), 1u);
  EXPECT_EQ(rel.depends_on[0].on, 2u);
  EXPECT_EQ(rel.depends_on[0].reasons,
            (std::vector<std::string>{"touches lines it changed in two.c:3", "relands after it (this reverted the original)"}));
  ASSERT_EQ(rev.notes.size(), 1u);
  EXPECT_EQ(rev.notes[0], "reverts " + S("U2").substr(0, 12) + ", which the fork already has (by bundle as " +
                              S("B").substr(0, 12) + ")");
  // Plan: U3 and U9 bundle; U10+U11 skip both.
  ASSERT_EQ(r.plan.size(), 2u);
  EXPECT_EQ(r.plan[0].kind, "bundle");
  EXPECT_EQ(r.plan[0].commits, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(r.plan[1].kind, "skip");
  EXPECT_EQ(r.plan[1].commits, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(r.plan[1].reasons,
            std::vector<std::string>{"revert and reland of " + S("U2").substr(0, 12) +
                                     " (already in the fork) net to nothing: skip both"});
}

// Every report of the pair is valid UTF-8 (the Latin-1 subject converted, never passed through).
TEST(UpstreamPicks, ReportsAreValidUtf8) {
  git::Repo repo(pair().repo.path());
  auto r = upstream::analyze(repo, "fork", "up", pair_config());
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"text", upstream::render_table(r)},
           {"markdown", upstream::render_markdown(r)},
           {"html", upstream::render_html(r)},
           {"json", upstream::to_json(r).dump(2)}}) {
    size_t bad = 0;
    utf8_or_latin1(text, &bad);
    EXPECT_EQ(bad, 0u) << name;
    EXPECT_NE(text.find("na\xc3\xafve"), std::string::npos) << name;
  }
}
