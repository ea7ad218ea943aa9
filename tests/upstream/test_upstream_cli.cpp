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

TEST(UpstreamCli, EndToEndJsonAndFiles) {
  std::string out = scenario().repo.tmp() + "/cli-out";
  std::string cfg = scenario().repo.tmp() + "/upstream.yaml";
  write_file_atomic(cfg, "# test config\nrisky_paths:\n  - lib/Target/**\nbundle_max_commits: 20\nhistory_weeks: 3\nfork_conflicts: file\n");
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
  std::string a = r.commit_line("f.txt", 10, "f line 10 by A", "A: change f line 10", day(1));
  r.write("f.txt", "new 1\nnew 2\nnew 3\nnew 4\nnew 5\n" + read_file(r.path() + "/f.txt"));
  std::string i = r.commit("I: five lines on top", day(2));
  // A's line, shifted by I
  std::string b = r.commit_line("f.txt", 15, "f line 10 by B", "B: change A's line again", day(3));
  // originally line 5: nobody's
  std::string c = r.commit_line("f.txt", 10, "f line 5 by C", "C: change old line 5", day(4));
  std::string d = r.commit_line("h.txt", 1, "h line 1 by D", "D: follow-up\n\nSee " + a.substr(0, 12) + " for context.", day(5));
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
  std::string x = r.commit_line("a.txt", 1, "a line 1 up", "X: first line", day(1));
  r.commit_line("a.txt", 2, "a line 2 up", "Y: second line", day(2));
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
