// kbisect upstream: metrics, dependency chains, bundles, plans, --emergency and --history on a
// temporary repository whose every date is fixed, so all expected values are exact.
//
// Upstream branch `up` (linear, one commit per day, U<n> committed at day n 00:00 UTC):
//   U0 initial  U1 util:2  U2 tools/a  | U3 tools/b (skipped by the fork)  U4 util:15 (picked)
//   U5 isel:4 (picked with -x, patch changed while picking)  U6 docs:3  U7 Revert U6  U8 Reland U6
//   U9 core:12 (the fork changed src/core.c)  U10 isel:8 (risky path)  U11 tools/c:2  U12 tools/c:3
//   U13 tools/c:9  U14 util:10 (emergency fix, picked ahead)  U15 README:1  U16 fixup! U15 (README:4)
// Fork branch `fork`: created at U0 with a local src/core.c edit, rebased onto U2 (merge base U2),
// then cherry-picks U4, U5 (-x, amended), U14 and adds fork/only.txt at day 16.25.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "git/git.h"
#include "upstream/upstream.h"
#include "tests/common/temp_repo.h"
#include "core/error.h"
#include "core/fsutil.h"

using namespace kb;
using kbtest::day;

namespace {

struct Scenario {
  kbtest::TempRepo repo;
  std::map<std::string, std::string> sha;  // "U3", "F1", "P4", ...
};

Scenario& scenario() {
  static Scenario* s = [] {
    auto* sc = new Scenario;
    auto& r = sc->repo;
    auto& sha = sc->sha;
    r.write_lines("README.md", "readme", 5);
    r.write_lines("docs/guide.md", "guide", 10);
    r.write_lines("lib/Target/X86/isel.cpp", "isel", 10);
    r.write_lines("src/core.c", "core", 20);
    r.write_lines("src/util.c", "util", 20);
    r.write_lines("tools/a.py", "a", 10);
    r.write_lines("tools/b.py", "b", 10);
    r.write_lines("tools/c.py", "c", 10);
    sha["U0"] = r.commit("initial import", day(0));
    r.git({"checkout", "-q", "-b", "fork"});
    r.set_line("src/core.c", 5, "core line 5 (fork)");
    sha["F1"] = r.commit("fork: local core tweak", day(0.5));
    r.git({"checkout", "-q", "up"});
    r.set_line("src/util.c", 2, "util line 2 v2");
    sha["U1"] = r.commit("util: tweak line 2", day(1));
    r.set_line("tools/a.py", 1, "a line 1 v2");
    sha["U2"] = r.commit("tools: a tweak", day(2));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"rebase", "-q", "up"}, day(2.5));
    sha["F1r"] = r.git({"rev-parse", "HEAD"});
    r.git({"checkout", "-q", "up"});
    r.set_line("tools/b.py", 5, "b line 5 v2");
    sha["U3"] = r.commit("tools: b tweak", day(3));
    r.set_line("src/util.c", 15, "util line 15 fixed");
    sha["U4"] = r.commit("util: fix line 15", day(4));
    r.set_line("lib/Target/X86/isel.cpp", 4, "isel line 4 fixed");
    sha["U5"] = r.commit("x86: isel fix 4", day(5));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"cherry-pick", sha["U4"]}, day(4.5));
    sha["P4"] = r.git({"rev-parse", "HEAD"});
    r.git_committer({"cherry-pick", "-x", sha["U5"]}, day(5.5));
    r.set_line("lib/Target/X86/isel.cpp", 9, "isel line 9 (fork adaptation)");
    r.git({"add", "-A"});
    r.git_committer({"commit", "-q", "--amend", "--no-edit"}, day(5.5));
    sha["P5"] = r.git({"rev-parse", "HEAD"});
    r.git({"checkout", "-q", "up"});
    r.set_line("docs/guide.md", 3, "guide line 3 clarified");
    sha["U6"] = r.commit("docs: clarify guide", day(6));
    r.git({"revert", "--no-edit", sha["U6"]}, day(7));
    sha["U7"] = r.git({"rev-parse", "HEAD"});
    r.set_line("docs/guide.md", 3, "guide line 3 clarified");
    sha["U8"] = r.commit("Reland \"docs: clarify guide\"", day(8));
    r.set_line("src/core.c", 12, "core line 12 upstream");
    sha["U9"] = r.commit("core: upstream change", day(9));
    r.set_line("lib/Target/X86/isel.cpp", 8, "isel line 8 v2");
    sha["U10"] = r.commit("x86: isel change 8", day(10));
    r.set_line("tools/c.py", 2, "c line 2 v2");
    sha["U11"] = r.commit("tools: c line 2", day(11));
    r.set_line("tools/c.py", 3, "c line 3 v2");
    sha["U12"] = r.commit("tools: c line 3", day(12));
    r.set_line("tools/c.py", 9, "c line 9 v2");
    sha["U13"] = r.commit("tools: c line 9", day(13));
    r.set_line("src/util.c", 10, "util line 10 crash fixed");
    sha["U14"] = r.commit("util: emergency crash fix", day(14));
    r.set_line("README.md", 1, "readme intro v2");
    sha["U15"] = r.commit("readme: update intro", day(15));
    r.set_line("README.md", 4, "readme line 4 v2");
    sha["U16"] = r.commit("fixup! readme: update intro", day(16));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"cherry-pick", sha["U14"]}, day(14.5));
    sha["P14"] = r.git({"rev-parse", "HEAD"});
    r.write("fork/only.txt", "fork notes\n");
    sha["F2"] = r.commit("fork: add notes", day(16.25));
    // An unrelated history.
    r.git({"checkout", "-q", "--orphan", "other"});
    r.git({"rm", "-q", "-rf", "."});
    r.write("other.txt", "other\n");
    sha["O1"] = r.commit("unrelated root", day(3));
    r.git({"checkout", "-q", "fork"});
    return sc;
  }();
  return *s;
}

const std::string& S(const std::string& name) { return scenario().sha.at(name); }

upstream::Config test_config() {
  return upstream::parse_config("risky_paths: ['lib/Target/**']\nbundle_max_commits: 20\n", "test.yaml");
}

std::vector<std::string> shas_of(const upstream::Report& r, const std::vector<size_t>& idx) {
  std::vector<std::string> out;
  for (size_t k : idx) out.push_back(r.pending[k].commit.sha);
  return out;
}

std::vector<std::string> names(const std::vector<std::string>& n) {
  std::vector<std::string> out;
  for (const auto& x : n) out.push_back(S(x));
  return out;
}

const upstream::PendingCommit& pending(const upstream::Report& r, const std::string& name) {
  for (const auto& p : r.pending)
    if (p.commit.sha == S(name)) return p;
  throw std::runtime_error(name + " is not pending");
}

bool depends_on(const upstream::Report& r, const std::string& from, const std::string& on, const std::string& reason_part) {
  for (const auto& d : pending(r, from).depends_on)
    if (r.pending[d.on].commit.sha == S(on))
      for (const auto& why : d.reasons)
        if (why.find(reason_part) != std::string::npos) return true;
  return false;
}

}  // namespace

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

TEST(UpstreamCli, EndToEndJsonAndFiles) {
  std::string out = scenario().repo.tmp() + "/cli-out";
  std::string cfg = scenario().repo.tmp() + "/upstream.yaml";
  write_file_atomic(cfg, "# test config\nrisky_paths:\n  - lib/Target/**\nbundle_max_commits: 20\nhistory_weeks: 3\n");
  RunOptions o;
  o.timeout_s = 120;
  RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(), "--fork",
                             "fork", "--upstream", "up", "--config", cfg, "--format", "table,json,md,html", "-o", out,
                             "--history", "--emergency", S("U12")},
                            o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("days behind         14.00"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(read_file(out + "/upstream.json"));
  EXPECT_EQ(j["metrics"]["days_behind"], 14.0);
  EXPECT_EQ(j["metrics"]["pending_commits"], 11);
  EXPECT_EQ(j["metrics"]["integration_point"]["sha"], S("U2"));
  EXPECT_EQ(j["emergency"]["closure"], nlohmann::json({S("U11"), S("U12")}));
  EXPECT_EQ(j["history"].size(), 3u);
  EXPECT_EQ(j["history"][2]["backlog_commits"], 9);
  EXPECT_TRUE(file_exists(out + "/upstream.md"));
  EXPECT_TRUE(file_exists(out + "/upstream.txt"));
  EXPECT_NE(read_file(out + "/upstream.html").find("<svg"), std::string::npos);

  // JSON on stdout alone parses.
  RunResult js = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(), "--fork",
                              "fork", "--upstream", "up", "--format", "json"},
                             o);
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(nlohmann::json::parse(js.out)["metrics"]["backlog_commits"], 9);

  // Bad input: exit 2 with the ref named.
  RunResult bad = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(), "--fork",
                               "nosuch", "--upstream", "up"},
                              o);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("fork ref 'nosuch'"), std::string::npos) << bad.err;
  RunResult badfmt = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(),
                                  "--fork", "fork", "--upstream", "up", "--format", "xml"},
                                 o);
  EXPECT_EQ(badfmt.exit_code, 2);
  EXPECT_NE(badfmt.err.find("unknown format 'xml'"), std::string::npos) << badfmt.err;
  RunResult badcfg = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(),
                                  "--fork", "fork", "--upstream", "up", "--config", out + "/missing.yaml"},
                                 o);
  EXPECT_EQ(badcfg.exit_code, 2);
  RunResult unrelated = run_process({KBISECT_BINARY_DIR "/kbisect", "upstream", "--repo", scenario().repo.path(),
                                     "--fork", "other", "--upstream", "up"},
                                    o);
  EXPECT_EQ(unrelated.exit_code, 2);
  EXPECT_NE(unrelated.err.find("unrelated histories"), std::string::npos);
}

// Line ownership follows insertions made by an integrated commit; sha mentions and file re-creation
// are dependencies too.
TEST(Upstream, HunkTrackingThroughIntegratedCommits) {
  kbtest::TempRepo r;
  r.write_lines("f.txt", "f", 20);
  r.write_lines("g.txt", "g", 3);
  r.write_lines("h.txt", "h", 3);
  r.commit("base", day(0));
  r.git({"branch", "fork"});
  r.set_line("f.txt", 10, "f line 10 by A");
  std::string a = r.commit("A: change f line 10", day(1));
  r.write("f.txt", "new 1\nnew 2\nnew 3\nnew 4\nnew 5\n" + read_file(r.path() + "/f.txt"));
  std::string i = r.commit("I: five lines on top", day(2));
  r.set_line("f.txt", 15, "f line 10 by B");  // A's line, shifted by I
  std::string b = r.commit("B: change A's line again", day(3));
  r.set_line("f.txt", 10, "f line 5 by C");  // originally line 5: nobody's
  std::string c = r.commit("C: change old line 5", day(4));
  r.set_line("h.txt", 1, "h line 1 by D");
  std::string d = r.commit("D: follow-up\n\nSee " + a.substr(0, 12) + " for context.", day(5));
  r.git({"rm", "-q", "g.txt"});
  std::string e = r.commit("E: drop g", day(6));
  r.write("g.txt", "g again\n");
  std::string f = r.commit("F: bring g back", day(7));
  r.git({"checkout", "-q", "fork"});
  r.git({"cherry-pick", i}, day(8));

  git::Repo repo(r.path());
  auto cfg = upstream::parse_config("risky_paths: []\n", "t.yaml");
  auto rep = upstream::analyze(repo, "fork", "up", cfg);
  ASSERT_EQ(rep.pending.size(), 6u);
  EXPECT_EQ(rep.metrics.integrated_commits, 1);
  EXPECT_EQ(rep.metrics.backlog_commits, 1);  // A, older than the picked I
  EXPECT_DOUBLE_EQ(rep.metrics.days_behind, 7.0);
  auto deps_of = [&](size_t k) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& dep : rep.pending[k].depends_on)
      for (const auto& why : dep.reasons) out.emplace_back(rep.pending[dep.on].commit.sha, why);
    return out;
  };
  using V = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(rep.pending[0].commit.sha, a);
  EXPECT_EQ(deps_of(1), (V{{a, "touches lines it changed in f.txt:15"}}));
  EXPECT_EQ(deps_of(2), V{});
  EXPECT_EQ(deps_of(3), (V{{a, "mentions it (its sha " + a.substr(0, 12) + " is in the message)"}}));
  EXPECT_EQ(deps_of(4), V{});
  EXPECT_EQ(deps_of(5), (V{{e, "re-creates g.txt, which it deleted"}}));
  // C is the only independent commit; A+B+D and E+F are chains.
  ASSERT_EQ(rep.plan.size(), 3u);
  EXPECT_EQ(shas_of(rep, rep.plan[0].commits), std::vector<std::string>{c});
  EXPECT_EQ(shas_of(rep, rep.plan[1].commits), (std::vector<std::string>{a, b, d}));
  EXPECT_EQ(shas_of(rep, rep.plan[2].commits), (std::vector<std::string>{e, f}));
}

// A pick whose patch changed and that has no -x trailer is still found by author, date and subject
// (unless turned off); the changed patch keeps it out of patch-id matching.
TEST(Upstream, ConflictedPickWithoutTrailerMatchesByAuthor) {
  kbtest::TempRepo r;
  r.write_lines("a.txt", "a", 10);
  r.commit("base", day(0));
  r.git({"branch", "fork"});
  r.set_line("a.txt", 1, "a line 1 up");
  std::string x = r.commit("X: first line", day(1));
  r.set_line("a.txt", 2, "a line 2 up");
  r.commit("Y: second line", day(2));
  r.git({"checkout", "-q", "fork"});
  r.git({"cherry-pick", x}, day(3));
  r.set_line("a.txt", 5, "a line 5 adapted");
  r.git({"add", "-A"});
  r.git({"commit", "-q", "--amend", "--no-edit"}, day(3));
  std::string pick = r.git({"rev-parse", "HEAD"});
  git::Repo repo(r.path());
  auto rep = upstream::analyze(repo, "fork", "up", upstream::parse_config("risky_paths: []\n", "t.yaml"));
  ASSERT_EQ(rep.integrated.size(), 1u);
  EXPECT_EQ(rep.integrated[0].commit.sha, x);
  EXPECT_EQ(rep.integrated[0].how, "author, author date and subject");
  EXPECT_EQ(rep.integrated[0].fork_sha, pick);
  EXPECT_EQ(rep.metrics.integration_point.sha, x);
  EXPECT_DOUBLE_EQ(rep.metrics.days_behind, 1.0);
  EXPECT_TRUE(rep.fork_changed_files.empty());  // the pick is not a fork-local change
  auto off = upstream::analyze(repo, "fork", "up",
                               upstream::parse_config("risky_paths: []\nmatch_by_author: false\n", "t.yaml"));
  EXPECT_TRUE(off.integrated.empty());
  EXPECT_EQ(off.metrics.pending_commits, 2);
  EXPECT_EQ(off.fork_changed_files, std::vector<std::string>{"a.txt"});
}
