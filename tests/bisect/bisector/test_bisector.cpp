// The bisector end to end: temp git repos of toolchain specs (in-tree YAMLs, or a "build" that writes a
// compiler wrapper), real CPU compiles, real measurements (with effects large enough for a noisy 2-core
// machine), the kbisect binary for the CLI, kill -9 and --resume.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/journal.h"
#include "bisect/report.h"
#include "bisect/strategy.h"
#include "tests/common/svg_checks.h"
#include "tests/common/bisect_fixture.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::cpu_toolchain;
using kbtest::GitRepo;

namespace {


using kbtest::bisect_config;
using kbtest::write_tmp;

// A "compiler build": writes $KBISECT_OUT/cc, a wrapper that runs clang++-19 with the commit's flags.txt.
const char* kBuildScript = R"SH(#!/bin/sh
set -e
if [ -f BROKEN ]; then echo "error: this commit does not build" >&2; exit 1; fi
if [ -n "$KB_TEST_BUILD_SLEEP" ]; then sleep "$KB_TEST_BUILD_SLEEP"; fi
printf '#!/bin/sh\nexec clang++-19 %s "$@"\n' "$(cat flags.txt)" > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
)SH";
const char* kBuildProvider =
    "{build: {command: 'sh build.sh', timeout_s: 60, toolchain: {name: built, backend: cpu, kind: clang, "
    "compiler: '{out}/cc'}}}";

std::vector<json> journal_events(const std::string& workdir) { return read_journal(workdir + "/journal.jsonl"); }

int count_events(const std::vector<json>& evs, const std::string& kind, const std::string& sha = "") {
  int n = 0;
  for (const auto& e : evs)
    if (e.value("ev", "") == kind && (sha.empty() || e.value("sha", "") == sha)) ++n;
  return n;
}

std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

// ---- pure pieces ----------------------------------------------------------------------------------

TEST(Bisect, FindsTheCommitThatSwitchesFlagsByRuntime) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -march=native")}}, "good: -O3"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O2 -march=native")}}, "use -O2"));
  s.push_back(r.commit({{"README", "docs\n"}}, "docs only"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -march=native -fno-unroll-loops")}}, "no unrolling"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O0")}}, "switch to -O0"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O0 -fstack-protector-all")}}, "stack protector"));
  s.push_back(r.commit({{"README", "more docs\n"}}, "docs again"));
  s.push_back(r.commit({{"README", "even more docs\n"}}, "docs, bad end"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), "{in_tree: tc.yaml}", "time", "20%"));
  const std::string wd = r.tmp() + "/work";
  BisectRun run = bisect(load_bisect_config(cfgp), wd, false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary;
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[4]);
  EXPECT_GT(o.samples, 0);
  // Commit 5 compiles to the bad end's code (only docs change after it): classified without measuring.
  bool saw5 = false;
  for (const auto& st : o.steps)
    if (st.sha == s[5]) {
      saw5 = true;
      EXPECT_EQ(st.how, "same-code") << st.reason;
      EXPECT_FALSE(st.measured);
      EXPECT_EQ(st.side, Side::bad);
    }
  EXPECT_TRUE(saw5);
  EXPECT_GE(o.measured_steps, 1);
  ASSERT_TRUE(o.verify.has_value());
  EXPECT_GT(o.verify->decision.effect, std::log(1.2));
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["verdict"], "culprit");
  EXPECT_EQ(res["culprit"]["sha"], s[4]);
  EXPECT_EQ(res["culprit"]["subject"], "switch to -O0");
  EXPECT_GT(res["culprit"]["effect_pct"].get<double>(), 20.0);
  EXPECT_EQ(res["culprit"]["author"], "Test Author");
  const std::string html = kb::read_file(run.report_html);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("culprit"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, nothing to fetch or run
  // The plot: round y ticks, and the culprit's point says its short sha and subject when hovered.
  EXPECT_TRUE(kbtest::round_ticks(kbtest::y_tick_labels(html)));
  EXPECT_GE(kbtest::tooltips_with(html, s[4].substr(0, 12)), 1u) << html;
  EXPECT_GE(kbtest::tooltips_with(html, "switch to -O0"), 1u);
  EXPECT_NE(kb::read_file(run.report_md).find("switch to -O0"), std::string::npos);
  // The main (largest) culprit is the last line; other verified regressions in the range (here -O2 or
  // -fno-unroll-loops may cost more than the 20% threshold on this machine) come before it.
  EXPECT_EQ(last_line(final_line(o, run.commits)), "culprit: " + s[4] + " switch to -O0");
}

// ---- (2) static metric: code_bytes, no timing ---------------------------------------------------

TEST(Bisect, StaticMetricNeedsNoTiming) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  s.push_back(r.commit({{"README", "x\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1 -fno-omit-frame-pointer")}}, "frame pointer"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -funroll-loops -march=x86-64-v3")}}, "unroll everything"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -funroll-loops -march=x86-64-v3 -fno-omit-frame-pointer")}},
                       "frame pointer again"));
  s.push_back(r.commit({{"README", "y\n"}}, "docs"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), "{in_tree: tc.yaml}", "code_bytes", "25%"));
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary << " / " << (o.reproduce ? o.reproduce->reason : "");
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[3]);
  EXPECT_EQ(o.samples, 0);
  EXPECT_EQ(o.measured_steps, 0);
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["spent"]["samples"], 0);
  for (const auto& st : o.steps) EXPECT_EQ(st.how, "static");
}

// ---- (3) build failures are skipped ---------------------------------------------------------------

TEST(Bisect, SkipsCommitsThatDoNotBuild) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", kBuildScript}, {"flags.txt", "-O1"}}, "good"));
  s.push_back(r.commit({{"README", "a\n"}}, "docs"));
  s.push_back(r.commit({{"flags.txt", "-O1 -fno-omit-frame-pointer"}}, "frame pointer"));
  s.push_back(r.commit({{"BROKEN", "1\n"}}, "break the build"));
  s.push_back(r.commit({{"BROKEN", ""}}, "fix the build"));
  s.push_back(r.commit({{"flags.txt", "-O3 -funroll-loops -march=x86-64-v3"}}, "unroll"));
  s.push_back(r.commit({{"README", "b\n"}}, "docs"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), kBuildProvider, "code_bytes", "25%"));
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary;
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[5]);
  int skipped = 0;
  for (const auto& st : o.steps)
    if (st.side == Side::skip) {
      ++skipped;
      EXPECT_NE(st.reason.find("does not build"), std::string::npos) << st.reason;
    }
  EXPECT_GE(skipped, 1);
  // Worktrees are cleaned up after each build.
  EXPECT_TRUE(!fs::exists(r.tmp() + "/work/worktrees") || fs::is_empty(r.tmp() + "/work/worktrees"));

  // When skips hide the culprit the answer is ambiguous and lists the candidates.
  GitRepo q;
  std::vector<std::string> t;
  t.push_back(q.commit({{"build.sh", kBuildScript}, {"flags.txt", "-O1"}}, "good"));
  t.push_back(q.commit({{"BROKEN", "1\n"}, {"flags.txt", "-O3 -funroll-loops -march=x86-64-v3"}}, "broken + unroll"));
  t.push_back(q.commit({{"BROKEN", ""}}, "fixed"));
  BisectRun amb = bisect(load_bisect_config(write_tmp(q, bisect_config(q, t[0], t[2], kBuildProvider, "code_bytes", "25%"))),
                         q.tmp() + "/work", false);
  EXPECT_EQ(amb.outcome.verdict, "ambiguous");
  ASSERT_EQ(amb.outcome.candidates.size(), 2u);
  EXPECT_EQ(final_line(amb.outcome, amb.commits), "verdict: ambiguous");
}

// ---- (4) kill -9 in the middle, then --resume -------------------------------------------------------

TEST(Bisect, ResumeAfterKillRepeatsNoBuild) {
  ASSERT_TRUE(kb::file_exists(kbtest::kKbisect)) << kbtest::kKbisect;
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", kBuildScript}, {"flags.txt", "-O3 -march=native"}}, "good"));
  const char* flags[] = {"-O2 -march=native", "-O3 -march=native -fno-unroll-loops", "-O2", "-O0", "-O0 -fstack-protector-all",
                         "-O0 -fno-omit-frame-pointer", "-O0 -fstack-protector-all -fno-omit-frame-pointer"};
  for (int i = 0; i < 7; ++i) s.push_back(r.commit({{"flags.txt", flags[i]}}, fmt::format("change {}", i + 1)));
  // culprit: index 4 ("-O0")
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), kBuildProvider, "time", "20%"));
  const std::string wd = r.tmp() + "/work";
  const std::string log = r.tmp() + "/first.log";

  // Once three builds have finished, kill -9 (the next build or a measurement is in flight).
  const bool killed = kbtest::kill_bisect_when(cfgp, wd, log, {{"KB_TEST_BUILD_SLEEP", "1"}}, [&] {
    return kb::file_exists(wd + "/journal.jsonl") && count_events(journal_events(wd), "build_end") >= 3;
  });
  ASSERT_TRUE(killed) << "not killed, or finished before the kill:\n" << kb::read_file(log);

  const auto before = journal_events(wd);
  std::vector<std::string> built_before;
  for (const auto& e : before)
    if (e.value("ev", "") == "build_end") built_before.push_back(e["sha"]);
  ASSERT_GE(built_before.size(), 3u);
  EXPECT_EQ(count_events(before, "verdict"), 0);

  kb::RunOptions o;
  o.timeout_s = 600;
  kb::RunResult rr = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", wd, "--resume"}, o);
  ASSERT_EQ(rr.exit_code, 0) << rr.out << rr.err;
  EXPECT_EQ(last_line(rr.out), "culprit: " + s[4] + " change 4") << rr.out << rr.err;

  const auto after = journal_events(wd);
  for (const auto& sha : built_before) {
    EXPECT_EQ(count_events(after, "build_start", sha), 1) << sha;
    EXPECT_EQ(count_events(after, "build_end", sha), 1) << sha;
  }
  // No measurement repeated either. Each is journaled in blocks (fresh loads per block): the decisions'
  // units and every timed round.
  std::map<std::string, int> keys;
  for (const auto& e : after)
    if (e.value("ev", "") == "measure") {
      EXPECT_EQ(++keys[e["key"].get<std::string>()], 1) << e["key"];
      EXPECT_EQ(e["block_rounds"], 4);
      ASSERT_FALSE(e["units"].empty());
      EXPECT_GE(e["units"][0].size(), 8u);  // the first look is 8 blocks
      EXPECT_EQ(e["raw"][0].size(), 4 * e["units"][0].size());
    }
  EXPECT_EQ(count_events(after, "resume"), 1);

  // Resuming a finished run replays everything: no build, no measurement, same answer.
  kb::RunResult again = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", wd, "--resume"}, o);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(last_line(again.out), last_line(rr.out));
  const auto final_events = journal_events(wd);
  EXPECT_EQ(count_events(final_events, "build_start"), count_events(after, "build_start"));
  EXPECT_EQ(count_events(final_events, "measure"), count_events(after, "measure"));
  // Resuming with other units (one load, decisions on rounds) would misread the journal: refused.
  const std::string cfg_text = kb::read_file(cfgp);
  const std::string other = write_tmp(
      r, std::string(cfg_text).replace(cfg_text.find("measure: {"), 10, "measure: {block_rounds: 0, "), "other.yaml");
  kb::RunResult units = kb::run_process({kbtest::kKbisect, "bisect", other, "--workdir", wd, "--resume"}, o);
  EXPECT_EQ(units.exit_code, 2);
  EXPECT_NE(units.err.find("measure.block_rounds 4, the config now says 0"), std::string::npos) << units.err;
  // Without --resume an existing journal is refused.
  kb::RunResult refused = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", wd}, o);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--resume"), std::string::npos) << refused.err;
}

// ---- (5) nothing to find ----------------------------------------------------------------------------

TEST(Bisect, NotReproducedWhenThereIsNoRegression) {
  GitRepo r;
  std::vector<std::string> s;
  // "bad" is much FASTER than good (-O1 -> -O3): different code, measured, and no regression. (A change of a
  // few percent against a 50% threshold is not used: with 8 rounds on a loaded runner its first CI can sit
  // above 0 and reach past 50%, which the rule calls "worse" - see docs/statistics.md.)
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  s.push_back(r.commit({{"README", "a\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -march=native")}}, "optimize more"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), "{in_tree: tc.yaml}", "time", "50%"));
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  EXPECT_EQ(run.outcome.verdict, "not-reproduced") << run.outcome.summary;
  ASSERT_TRUE(run.outcome.reproduce.has_value());
  EXPECT_TRUE(run.outcome.reproduce->measured);
  EXPECT_EQ(run.outcome.reproduce->decision.verdict, kb::stats::Verdict::better);
  EXPECT_TRUE(run.outcome.steps.empty());
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["verdict"], "not-reproduced");
  EXPECT_NE(res["reproduce"]["evidence"].get<std::string>().find("bad vs good"), std::string::npos);
  EXPECT_EQ(final_line(run.outcome, run.commits), "verdict: not-reproduced");

  // Identical code at both ends: not reproduced without measuring.
  GitRepo q;
  auto a = q.commit({{"tc.yaml", cpu_toolchain("-O2")}}, "a");
  auto b = q.commit({{"README", "z\n"}}, "b");
  BisectRun same = bisect(load_bisect_config(write_tmp(q, bisect_config(q, a, b, "{in_tree: tc.yaml}", "time", "1%"))),
                          q.tmp() + "/work", false);
  EXPECT_EQ(same.outcome.verdict, "not-reproduced");
  EXPECT_EQ(same.outcome.samples, 0);
}

// ---- (6) clear errors --------------------------------------------------------------------------------

TEST(Bisect, ClearErrorsForBadRangesAndHangingBuilds) {
  GitRepo r;
  auto a = r.commit({{"tc.yaml", cpu_toolchain("-O2")}, {"build.sh", "sleep 30\n"}}, "a");
  auto b = r.commit({{"README", "1\n"}}, "b");
  auto expect_error = [&](const std::string& good, const std::string& bad, const std::string& needle,
                          const std::string& provider = "{in_tree: tc.yaml}") {
    const std::string p = write_tmp(r, bisect_config(r, good, bad, provider, "code_bytes", "10%"), "e.yaml");
    try {
      bisect(load_bisect_config(p), r.tmp() + "/work-" + std::to_string(std::rand()), false);
      ADD_FAILURE() << "no error, expected: " << needle;
    } catch (const kb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("no-such-ref", b, "no-such-ref");
  expect_error(a, "deadbeefdeadbeef", "deadbeefdeadbeef");
  expect_error(b, a, "is not an ancestor");
  expect_error(a, a, "range is empty");
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(a, b, "timed out after 1 s",
               "{build: {command: 'sh build.sh', timeout_s: 1, toolchain: {name: x, backend: cpu, kind: clang, "
               "compiler: clang++-19}}}");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 25.0);  // not 30 s of sleep
}

// ---- (7) commit subjects never reach a shell --------------------------------------------------------

TEST(Bisect, SubjectsWithShellSyntaxNeverReachAShell) {
  ASSERT_TRUE(kb::file_exists(kbtest::kKbisect));
  GitRepo r;
  const std::string pw = r.tmp() + "/pwned";
  std::vector<std::string> s, subj = {
      "good",
      "$(touch " + pw + "1)",
      "`touch " + pw + "2`",
      "\"; touch " + pw + "3; echo \"",
      "'; touch " + pw + "4; echo '",
      "unroll; $(touch " + pw + "5) && echo 'x' \"y\"",
      "tail"};
  s.push_back(r.commit({{"build.sh", kBuildScript}, {"flags.txt", "-O1"}}, subj[0]));
  s.push_back(r.commit({{"README", "1\n"}}, subj[1]));
  s.push_back(r.commit({{"flags.txt", "-O1 -fno-omit-frame-pointer"}}, subj[2]));
  s.push_back(r.commit({{"README", "2\n"}}, subj[3]));
  s.push_back(r.commit({{"README", "3\n"}}, subj[4]));
  s.push_back(r.commit({{"flags.txt", "-O3 -funroll-loops -march=x86-64-v3"}}, subj[5]));
  s.push_back(r.commit({{"README", "4\n"}}, subj[6]));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), kBuildProvider, "code_bytes", "25%"));
  kb::RunOptions o;
  o.timeout_s = 600;
  kb::RunResult rr = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", r.tmp() + "/work"}, o);
  ASSERT_EQ(rr.exit_code, 0) << rr.out << rr.err;
  EXPECT_EQ(last_line(rr.out), "culprit: " + s[5] + " " + subj[5]);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(kb::file_exists(pw + std::to_string(i))) << i;
  // The reports carry the subjects as text.
  const std::string html = kb::read_file(r.tmp() + "/work/report.html");
  EXPECT_NE(html.find("$(touch"), std::string::npos);
  EXPECT_EQ(html.find("\"; touch"), std::string::npos);  // quotes are escaped in HTML
  json res = json::parse(kb::read_file(r.tmp() + "/work/result.json"));
  EXPECT_EQ(res["culprit"]["subject"], subj[5]);
}

// ---- (8) kbisect check exit codes ---------------------------------------------------------------------

TEST(Check, ExitCodesForGitBisectRun) {
  ASSERT_TRUE(kb::file_exists(kbtest::kKbisect));
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", kBuildScript}, {"flags.txt", "-O1"}}, "good"));
  s.push_back(r.commit({{"flags.txt", "-O1 -fno-omit-frame-pointer"}}, "good side"));
  s.push_back(r.commit({{"BROKEN", "1\n"}}, "broken"));
  s.push_back(r.commit({{"BROKEN", ""}, {"flags.txt", "-O3 -funroll-loops -march=x86-64-v3"}}, "culprit"));
  s.push_back(r.commit({{"README", "1\n"}}, "bad"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), kBuildProvider, "code_bytes", "25%"));
  kb::RunOptions o;
  o.timeout_s = 300;
  auto check = [&](const std::string& rev) {
    return kb::run_process({kbtest::kKbisect, "check", cfgp, "--commit", rev, "--workdir", r.tmp() + "/work"}, o);
  };
  auto r1 = check(s[1]);
  EXPECT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  auto r2 = check(s[2]);
  EXPECT_EQ(r2.exit_code, 125) << r2.out << r2.err;
  EXPECT_NE(r2.out.find("skip"), std::string::npos);
  auto r3 = check(s[3]);
  EXPECT_EQ(r3.exit_code, 1) << r3.out << r3.err;
  auto r4 = check(s[4].substr(0, 12));
  EXPECT_EQ(r4.exit_code, 1) << r4.out << r4.err;
  // An error is not a verdict: 128 + the usual code (130 bad input), which git bisect run reads as "abort".
  auto r5 = check("no-such-ref");
  EXPECT_EQ(r5.exit_code, 130) << r5.err;
  EXPECT_NE(r5.err.find("no-such-ref"), std::string::npos);
  // A usage error (missing --commit) aborts too, never "bad".
  auto r6 = kb::run_process({kbtest::kKbisect, "check", cfgp}, o);
  EXPECT_EQ(r6.exit_code, 130) << r6.err;
  // Builds are cached by sha in the workdir: a second check of the same commit builds nothing.
  EXPECT_TRUE(kb::file_exists(r.tmp() + "/work/toolchains/" + s[3] + "/toolchain.yaml"));
}

// `git bisect run kbisect check ...` end to end: names the culprit, skips the broken commit; a config error
// aborts git's bisection instead of marking commits bad. `kbisect bisect` exits by verdict.
TEST(Check, RealGitBisectRunAndBisectExitCodes) {
  ASSERT_TRUE(kb::file_exists(kbtest::kKbisect));
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  s.push_back(r.commit({{"tc.yaml", "name: [broken\n"}}, "broken spec"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1 -fno-omit-frame-pointer")}}, "fixed, frame pointer"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -funroll-loops -march=x86-64-v3")}}, "unroll everything"));
  s.push_back(r.commit({{"README", "1\n"}}, "docs"));
  s.push_back(r.commit({{"README", "2\n"}}, "bad end"));
  const std::string cfgp = write_tmp(r, bisect_config(r, s.front(), s.back(), "{in_tree: tc.yaml}", "code_bytes", "25%"));
  kb::RunOptions o;
  o.timeout_s = 300;
  o.cwd = r.path();
  o.env_set = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"}, {"LC_ALL", "C"}};
  auto git = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "-c", "user.name=T", "-c", "user.email=t@example.com"};
    argv.insert(argv.end(), args.begin(), args.end());
    return kb::run_process(argv, o);
  };
  ASSERT_TRUE(git({"bisect", "start", s.back(), s.front()}).ok());
  auto run = git({"bisect", "run", kbtest::kKbisect, "check", cfgp, "--commit", "HEAD", "--workdir", r.tmp() + "/work"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find(s[3] + " is the first bad commit"), std::string::npos) << run.out << run.err;
  git({"bisect", "reset"});

  // A config whose good ref does not exist: every check fails with 130 and git aborts the run.
  const std::string badcfg = write_tmp(r, bisect_config(r, "no-such-ref", s.back(), "{in_tree: tc.yaml}", "code_bytes", "25%"), "bad.yaml");
  ASSERT_TRUE(git({"bisect", "start", s.back(), s.front()}).ok());
  auto aborted = git({"bisect", "run", kbtest::kKbisect, "check", badcfg, "--commit", "HEAD", "--workdir", r.tmp() + "/work2"});
  EXPECT_NE(aborted.exit_code, 0) << aborted.out << aborted.err;
  EXPECT_EQ((aborted.out + aborted.err).find("is the first bad commit"), std::string::npos) << aborted.out << aborted.err;
  EXPECT_NE((aborted.out + aborted.err).find("130"), std::string::npos) << aborted.out << aborted.err;
  git({"bisect", "reset"});

  // kbisect bisect: 0 when a culprit is named, 4 when there is nothing to bisect.
  kb::RunOptions bo;
  bo.timeout_s = 300;
  auto found = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", r.tmp() + "/w-found", "-q"}, bo);
  EXPECT_EQ(found.exit_code, 0) << found.out << found.err;
  EXPECT_EQ(last_line(found.out), "culprit: " + s[3] + " unroll everything");
  const std::string flat = write_tmp(r, bisect_config(r, s[3], s.back(), "{in_tree: tc.yaml}", "code_bytes", "25%"), "flat.yaml");
  auto nothing = kb::run_process({kbtest::kKbisect, "bisect", flat, "--workdir", r.tmp() + "/w-flat", "-q"}, bo);
  EXPECT_EQ(nothing.exit_code, 4) << nothing.out << nothing.err;
  EXPECT_EQ(last_line(nothing.out), "verdict: not-reproduced");
}
