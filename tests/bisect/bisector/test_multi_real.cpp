// Several culprits, priors, compile_time and max_error bisections with real git and real compilers
// (CPU backend, in-tree toolchain specs in temp repos). Effects are large (a noisy 2-core machine).
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/journal.h"
#include "bisect/priors.h"
#include "bisect/report.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/sanitized.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/block_worker.h"

using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::cpu_toolchain;
using kbtest::GitRepo;

namespace {

std::string cfg_text(const GitRepo& r, const std::string& good, const std::string& bad, const std::string& metric,
                     const std::string& threshold, const std::string& extra = "", int min_samples = 8) {
  return kbtest::bisect_config(r, good, bad, "{in_tree: tc.yaml}", metric, threshold, extra, {30, min_samples, 30});
}

}  // namespace

// good -O3 (~5 us) -> A: -O1 (~17x slower) -> B: -O0 (~3.5x slower still) -> C: -O1 with trapping UB
// checks and no inlining (a partial recovery: ~2.2x A's level, ~1.6x below B's; measured here 80 / 177 / 290 us). Both regressions are named, each with its own verified effect; the
// recovery too when asked.
TEST(BisectMulti, TwoRegressionsAndAPartialRecoveryOnTheCpu) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -march=native")}}, "good: -O3"));
  s.push_back(r.commit({{"README", "1\n"}}, "docs 1"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "A: -O1"));
  s.push_back(r.commit({{"README", "2\n"}}, "docs 2"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O0")}}, "B: -O0"));
  s.push_back(r.commit({{"README", "3\n"}}, "docs 3"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1 -fno-inline -fsanitize=bounds,signed-integer-overflow,pointer-overflow "
                                                  "-fsanitize-trap=all")}},
                       "C: partial recovery"));
  s.push_back(r.commit({{"README", "4\n"}}, "docs, bad end"));
  const std::string cfgp = kbtest::write_tmp(r, cfg_text(r, s.front(), s.back(), "time", "5%", "report_improvements: true\n"), "m.yaml");
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary;
  std::map<std::string, const Culprit*> by_sha;
  for (const auto& c : o.culprits) by_sha[run.commits[size_t(c.index)].sha] = &c;
  if (kbtest::kSanitized) {
    // Measured under ASan: -O3 -> -O1 read 1.9x instead of ~17x (a ~5 us kernel timed inside an
    // instrumented process, ASan's allocator included), so which regression is the larger is not this
    // build's to say.
    EXPECT_TRUE(by_sha.count(s[2]) || by_sha.count(s[4])) << o.summary;
    GTEST_SKIP() << "ASan build: the bisection ran and named a culprit; the effect sizes and their order "
                    "are checked in the plain build";
  }
  ASSERT_TRUE(by_sha.count(s[2])) << o.summary;
  ASSERT_TRUE(by_sha.count(s[4])) << o.summary;
  EXPECT_TRUE(by_sha[s[2]]->verified);
  EXPECT_TRUE(by_sha[s[4]]->verified);
  EXPECT_FALSE(by_sha[s[2]]->improvement);
  EXPECT_GT(by_sha[s[2]]->effect, std::log(3.0));  // -O3 -> -O1
  EXPECT_GT(by_sha[s[4]]->effect, std::log(1.8));  // -O1 -> -O0
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[2]);  // the largest is the main one
  if (by_sha.count(s[6])) {
    EXPECT_TRUE(by_sha[s[6]]->improvement);
    EXPECT_LT(by_sha[s[6]]->effect, 0);
  }
  int regressions = 0;
  for (const auto& c : o.culprits) regressions += !c.improvement && c.verified;
  EXPECT_EQ(regressions, 2);
  // One culprit line per regression, the largest last.
  EXPECT_EQ(final_line(o, run.commits).substr(final_line(o, run.commits).rfind('\n') + 1), "culprit: " + s[2] + " A: -O1");
  EXPECT_NE(final_line(o, run.commits).find("culprit: " + s[4] + " B: -O0\n"), std::string::npos);
  json res = json::parse(kb::read_file(run.result_json));
  ASSERT_GE(res["culprits"].size(), 2u);
  for (const auto& c : res["culprits"]) {
    EXPECT_TRUE(c.contains("effect_pct"));
    EXPECT_TRUE(c.contains("ci_pct"));
  }
  EXPECT_NE(kb::read_file(run.report_md).find("## Culprits"), std::string::npos);
  EXPECT_NE(kb::read_file(run.report_html).find("B: -O0"), std::string::npos);
}

TEST(BisectPriors, WeightsComeFromTheFilesEachCommitTouches) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  s.push_back(r.commit({{"docs/a.md", "1\n"}}, "docs only"));
  s.push_back(r.commit({{"docs/b.md", "1\n"}, {"src/x.c", "1\n"}}, "docs and code"));
  s.push_back(r.commit({{"lib/Target/NVPTX/isel.cpp", "1\n"}}, "nvptx"));
  s.push_back(r.commit({{"docs/c.md", "1\n"}}, "docs again"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -funroll-loops -march=x86-64-v3")}, {"lib/Target/NVPTX/x.td", "1\n"}},
                       "nvptx + unroll"));
  s.push_back(r.commit({{"docs/d.md", "1\n"}}, "docs, bad end"));
  Priors pr = {{"**/docs/**", 0.05}, {"docs/**", 0.05}, {"lib/Target/NVPTX/**", 5}};
  kb::git::Repo repo(r.path());
  auto w = prior_weights(repo, s, pr);
  ASSERT_EQ(w.size(), s.size());
  EXPECT_EQ(w[1], 0.05);
  EXPECT_EQ(w[2], 1.0);  // an unmatched file keeps weight 1
  EXPECT_EQ(w[3], 5.0);
  EXPECT_EQ(w[4], 0.05);
  EXPECT_EQ(w[5], 5.0);  // tc.yaml (1) and an NVPTX file (5): the max
  EXPECT_EQ(w[6], 0.05);

  const std::string cfgp = kbtest::write_tmp(
      r, cfg_text(r, s.front(), s.back(), "code_bytes", "25%", "priors: {\"docs/**\": 0.05, \"lib/Target/NVPTX/**\": 5}\n"),
      "p.yaml");
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[5]);
  // The weighted split: mass 0.05 | 1 | 5 | 0.05 | 5 | 0.05 puts the first probe at the first NVPTX commit
  // (a uniform split would start at commit 3 too, so check the journal and the report carry the weights).
  auto evs = read_journal(run.workdir + "/journal.jsonl");
  ASSERT_FALSE(evs.empty());
  ASSERT_TRUE(evs[0].contains("weights"));
  EXPECT_EQ(evs[0]["weights"][5].get<double>(), 5.0);
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["prior_weights"].size(), 5u);  // the commits whose weight is not 1
  // Config errors name the field.
  try {
    load_bisect_config(kbtest::write_tmp(r, cfg_text(r, s.front(), s.back(), "code_bytes", "25%", "priors: {\"docs/**\": -1}\n"), "e.yaml"));
    FAIL() << "negative prior accepted";
  } catch (const kb::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("priors.docs/**"), std::string::npos) << e.what();
  }
}

TEST(BisectPriors, AWeightedCommitIsProbedFirst) {
  // Nine commits, the culprit's files weighted 50x: the weighted split probes next to it first.
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  for (int i = 1; i <= 8; ++i) {
    if (i == 7)
      s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -funroll-loops -march=x86-64-v3")}, {"hot/x.c", "1\n"}}, "culprit"));
    else
      s.push_back(r.commit({{fmt::format("f{}.txt", i), "1\n"}}, fmt::format("c{}", i)));
  }
  const std::string cfgp =
      kbtest::write_tmp(r, cfg_text(r, s.front(), s.back(), "code_bytes", "25%", "priors: {\"hot/**\": 50}\n"), "p.yaml");
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[7]);
  ASSERT_FALSE(run.outcome.steps.empty());
  EXPECT_GE(run.outcome.steps[0].index, 6);  // a uniform split starts at 4
  EXPECT_LE(int(run.outcome.steps.size()), 2);
}

// compile_time: a commit that makes the compiler unroll hard (seconds instead of a fraction of one).
TEST(BisectMetrics, CompileTime) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O2")}}, "good"));
  s.push_back(r.commit({{"README", "1\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O2 -mllvm -unroll-threshold=100000 -mllvm -unroll-count=4")}}, "unroll hard"));
  s.push_back(r.commit({{"README", "2\n"}}, "bad end"));
  const std::string cfgp = kbtest::write_tmp(r, cfg_text(r, s.front(), s.back(), "compile_time", "50%", "", 4), "c.yaml");
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[2]);
  ASSERT_TRUE(run.outcome.verify.has_value());
  EXPECT_GT(run.outcome.verify->decision.effect, std::log(1.5));
}

// max_error: -ffast-math reassociates the f32 reductions; the error against the reference moves (~4% here).
TEST(BisectMetrics, MaxError) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1")}}, "good"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O1 -ffp-contract=off")}}, "same arithmetic"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3 -march=native -ffast-math")}}, "fast math"));
  s.push_back(r.commit({{"README", "1\n"}}, "bad end"));
  const std::string cfgp = kbtest::write_tmp(r, cfg_text(r, s.front(), s.back(), "max_error", "1%"), "e.yaml");
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[2]);
  EXPECT_EQ(run.outcome.samples, 0);  // a static value per commit: no timing
}

// Parallel rounds with the real lab: three commits per round, each built concurrently in its own worktree
// by a build command, then classified together.
TEST(BisectParallel, ThreeCommitsPerRoundWithConcurrentBuilds) {
  GitRepo r;
  const char* build = "#!/bin/sh\nset -e\nsleep 1\nprintf '#!/bin/sh\\nexec clang++-19 %s \"$@\"\\n' \"$(cat flags.txt)\" > "
                      "\"$KBISECT_OUT/cc\"\nchmod +x \"$KBISECT_OUT/cc\"\n";
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", build}, {"flags.txt", "-O1"}}, "good"));
  for (int i = 1; i <= 9; ++i)
    s.push_back(r.commit({{"flags.txt", i >= 6 ? "-O3 -funroll-loops -march=x86-64-v3" : fmt::format("-O1 -DV{}", i)}},
                         fmt::format("c{}", i)));
  const std::string provider =
      "{build: {command: 'sh build.sh', timeout_s: 60, toolchain: {name: built, backend: cpu, kind: clang, "
      "compiler: '{out}/cc'}}}";
  std::string text = cfg_text(r, s.front(), s.back(), "code_bytes", "25%", "parallel: 3\n");
  text.replace(text.find("{in_tree: tc.yaml}"), 18, provider);
  BisectRun run = bisect(load_bisect_config(kbtest::write_tmp(r, text, "par.yaml")), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary;
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[6]);
  EXPECT_GE(o.visited, 3);
  EXPECT_LE(o.rounds, 2);                 // 9 candidates, 3 per round: log_4(9) < 2
  EXPECT_LT(o.rounds, o.visited);
  EXPECT_EQ(o.builds, 2 + o.visited);     // each commit built once, none twice
  for (int i = 1; i <= 9; ++i) EXPECT_FALSE(kb::file_exists(r.tmp() + "/work/worktrees/" + s[size_t(i)].substr(0, 16)));
}

// measure.placement: process. Every block of a measurement but its first is measured by the worker started
// ahead during the block before (blocks of one measurement ask the same), and the culprit is found.
TEST(BisectPlacement, EveryBlockButAMeasurementsFirstFindsItsWorkerStartedAhead) {
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O3")}}, "good: -O3"));
  s.push_back(r.commit({{"README", "1\n"}}, "docs 1"));
  s.push_back(r.commit({{"tc.yaml", cpu_toolchain("-O0")}}, "bad: -O0"));
  s.push_back(r.commit({{"README", "2\n"}}, "docs 2"));
  std::string text = cfg_text(r, s.front(), s.back(), "time", "5%");
  text.replace(text.find("measure: {"), 10, "measure: {placement: process, block_rounds: 4, ");
  const std::string cfgp = kbtest::write_tmp(r, text, "p.yaml");
  const kb::BlockWorkerCounts before = kb::block_worker_counts();
  BisectRun run = bisect(load_bisect_config(cfgp), r.tmp() + "/work", false);
  const kb::BlockWorkerCounts after = kb::block_worker_counts();
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  ASSERT_EQ(run.outcome.culprits.size(), 1u);
  EXPECT_EQ(run.commits[size_t(run.outcome.culprits[0].index)].sha, s[2]);
  long blocks = 0, measurements = 0;
  for (const auto& ev : read_journal(run.workdir + "/journal.jsonl")) {
    if (ev.value("ev", "") != "measure") continue;
    ++measurements;
    const auto& where = ev.at("placements");
    blocks += long(where.size());
    for (const auto& block : where)
      for (const auto& p : block) EXPECT_NE(p.get<std::string>().find(" worker="), std::string::npos) << p;
  }
  ASSERT_GT(measurements, 0);
  // A measurement's first block can find one too, when the step before measured the same builds.
  const long used = after.used_ahead - before.used_ahead;
  EXPECT_GE(used, blocks - measurements) << blocks << " blocks in " << measurements << " measurements";
  EXPECT_EQ(after.started - before.started, blocks + (blocks - used)) << "one start ahead per block, and the rest";
}
