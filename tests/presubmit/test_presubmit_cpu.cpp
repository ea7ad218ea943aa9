// `kbisect presubmit` for real on the CPU backend, through the binary: the 12-commit compiler repository that
// scripts/demo-bisect generates (an in-tree clang++-19 toolchain spec; one commit turns the loop and SLP
// vectorizers off), a small sweep, real compiles, real interleaved A/B measurements.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

namespace {

using json = nlohmann::json;

const std::string kKbisect = KBISECT_BINARY_DIR "/kbisect";

// Two tiled matmul cases on 128x128x128 (a few hundred microseconds each, vectorized).
constexpr const char* kSweep = R"(name: presubmit-test
tier: l1
toolchains: [clang-19]
measure: {warmup_s: 0.01}
benchmarks:
  - kernel: matmul_tiled
    backend: cpu
    params: {BM: 32, BN: 64, BK: 64, MR: 4, NR: 16}
    dtypes: [f32]
    shapes: [[128, 128, 128], [128, 256, 128]]
)";

class PresubmitCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    repo = dir.path + "/compiler";
    kb::RunResult r = kb::run_process({KBISECT_SOURCE_DIR "/scripts/demo-bisect", "--repo-only", repo});
    ASSERT_TRUE(r.ok()) << r.err;
    kb::write_file_atomic(dir.path + "/sweep.yaml", kSweep);
  }

  std::string config(const std::string& extra,
                     const std::string& measure = "{block_pairs: 8, min_blocks: 8, max_blocks: 32}") {
    const std::string path = dir.path + "/presubmit.yaml";
    kb::write_file_atomic(path, fmt::format(R"(name: cpu-presubmit
compiler: {{repo: compiler, provider: {{in_tree: kernel-compiler.yaml}}}}
cases: {{sweep: sweep.yaml}}
threshold: 5%
measure: {}
{})",
                                            measure, extra));
    return path;
  }

  kb::RunResult presubmit(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kKbisect, "presubmit"};
    argv.insert(argv.end(), args.begin(), args.end());
    kb::RunOptions o;
    o.timeout_s = 600;
    return kb::run_process(argv, o);
  }

  json report(const std::string& out) { return json::parse(kb::read_file(out + "/presubmit.json")); }

  // Presubmit of two clang++-19 toolchains at hand (their flags), into OUT; the report.
  json presubmit_flags(const std::string& cfg, const std::string& base_flags, const std::string& change_flags,
                       int want_exit) {
    kb::write_file_atomic(dir.path + "/base.yaml", kbtest::cpu_toolchain(base_flags));
    kb::write_file_atomic(dir.path + "/change.yaml", kbtest::cpu_toolchain(change_flags));
    kb::RunResult r = presubmit({cfg, "--base-toolchain", dir.path + "/base.yaml", "--change-toolchain",
                                 dir.path + "/change.yaml", "-o", dir.path + "/out", "-q"});
    EXPECT_EQ(r.exit_code, want_exit) << r.out << r.err;
    json j = report(dir.path + "/out");
    j["stdout"] = r.out;
    return j;
  }

  kbtest::TestDir dir{"kb-presubmit-cpu"};
  std::string repo;
};

}  // namespace

TEST_F(PresubmitCpu, TheVectorizerDiffIsTimedAndFails) {
  const std::string cfg = config("budget: {cpu_minutes: 1}\n");
  const std::string out = dir.path + "/out";
  // main~5 is "Disable loop and SLP vectorizers", main~6 its parent.
  kb::RunResult r = presubmit({cfg, "--base", "main~6", "--change", "main~5", "-o", out});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("presubmit: FAIL ("), std::string::npos) << r.out;
  const json j = report(out);
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_EQ(j["counts"]["cases"], 2);
  EXPECT_EQ(j["counts"]["changed"], 2);
  EXPECT_EQ(j["counts"]["unchanged"], 0);
  EXPECT_GE(j["counts"]["regressions"].get<int>(), 1);
  int timed_worse = 0;
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["state"], "changed");
    EXPECT_NE(c["base"]["code_hash"], c["change"]["code_hash"]);
    EXPECT_FALSE(c["static_moves"].empty()) << c.dump();  // the code size moved
    ASSERT_TRUE(c.contains("cost")) << c.dump();           // priced (no history here: by a pilot)
    EXPECT_EQ(c["cost"]["from"], "pilot");
    if (c.contains("ab") && c["ab"]["decision"]["verdict"] == "worse") {
      ++timed_worse;
      EXPECT_EQ(c["check"], "ok");  // correctness came first
      ASSERT_TRUE(c.contains("confirmation"));
      const std::string second = c["confirmation"]["decision"]["verdict"];
      EXPECT_EQ(c["regression"], second != "same" && second != "better");  // only a contradiction clears it
      EXPECT_GT(c["ab"]["decision"]["effect_log"].get<double>(), std::log(1.05));
    }
  }
  EXPECT_GE(timed_worse, 1);
  EXPECT_LE(j["budget"]["cpu_spent_s"].get<double>(), 60 + 5);  // within the budget (a block's overshoot)
  const std::string md = kb::read_file(out + "/summary.md");
  EXPECT_NE(md.find("**FAIL**"), std::string::npos);
  EXPECT_NE(md.find("Disable loop and SLP vectorizers"), std::string::npos);
  EXPECT_NE(md.find("### Timed"), std::string::npos);
  const std::string xml = kb::read_file(out + "/junit.xml");
  EXPECT_EQ(xml.rfind("<?xml", 0), 0u);
  EXPECT_NE(xml.find("<failure type=\"regression\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("tests=\"2\""), std::string::npos);
}

TEST_F(PresubmitCpu, ADocumentationOnlyDiffChangesNoKernelAndMeasuresNothing) {
  const std::string cfg = config("budget: {cpu_minutes: 1}\n");
  const std::string out = dir.path + "/out";
  // main is "Release 2.0": the toolchain spec is rewritten with the same flags, the changelog grows.
  kb::RunResult r = presubmit({cfg, "--base", "main~1", "--change", "main", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("presubmit: pass (no kernel's code changed; 0 measurements)"), std::string::npos) << r.out;
  const json j = report(out);
  EXPECT_EQ(j["counts"]["unchanged"], 2);
  EXPECT_EQ(j["counts"]["changed"], 0);
  EXPECT_EQ(j["counts"]["measurements"], 0);
  EXPECT_EQ(j["budget"]["cpu_spent_s"], 0.0);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["base"]["code_hash"], c["change"]["code_hash"]);
    EXPECT_FALSE(c.contains("ab"));
  }
  EXPECT_NE(kb::read_file(out + "/summary.md").find("No kernel's code changed"), std::string::npos);
  EXPECT_EQ(kb::read_file(out + "/junit.xml").find("<failure"), std::string::npos);
}

TEST_F(PresubmitCpu, HistoryPricesTheCasesAndTheBudgetDefersTheLessValuable) {
  // One nightly of the base compiler recorded in a history: kbisect sweep, then kbisect history --record.
  const std::string base_tc = dir.path + "/base.yaml";
  kb::RunResult sh = kb::run_process({"git", "-C", repo, "show", "main~6:kernel-compiler.yaml"});
  ASSERT_TRUE(sh.ok()) << sh.err;
  kb::write_file_atomic(base_tc, sh.out);
  kb::RunResult sw = kb::run_process(
      {kKbisect, "sweep", dir.path + "/sweep.yaml", "--toolchain", base_tc, "-o", dir.path + "/night", "--format", "json"});
  ASSERT_EQ(sw.exit_code, 0) << sw.err;
  const std::string db = dir.path + "/history.sqlite";
  kb::RunResult hr = kb::run_process({kKbisect, "history", "--db", db, "--record", dir.path + "/night", "--label", "nightly"});
  ASSERT_EQ(hr.exit_code, 0) << hr.err;
  // Every block is priced at 1 s besides its pairs and every decision plans 8 blocks: about 8 s a case. A
  // budget of 12 s holds one; the weight makes the 128x256x128 case the one. Its decision comes sooner than
  // priced (a large regression, at the first look), so a second round may fit the other with what is left.
  const std::string cfg = config(fmt::format("budget: {{cpu_minutes: 0.2}}\nweights: {{\"/128x256x128$\": 10}}\n"
                                             "history: {{db: {}, last: 30}}\n",
                                             db),
                                 "{block_pairs: 8, min_blocks: 8, max_blocks: 8, block_overhead_s: 1}");
  const std::string out = dir.path + "/out";
  kb::RunResult r = presubmit({cfg, "--base", "main~6", "--change", "main~5", "-o", out, "-q"});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  const json j = report(out);
  ASSERT_EQ(j["cases"].size(), 2u);
  for (const auto& c : j["cases"]) {
    ASSERT_TRUE(c.contains("cost")) << c.dump();
    EXPECT_EQ(c["cost"]["from"], "history");
    EXPECT_EQ(c["cost"]["blocks"], 8);
    EXPECT_NEAR(c["cost"]["seconds"].get<double>(), 8.0, 0.5);
    EXPECT_EQ(c["value"]["history_points"], 1);
    const bool heavy = c["key"].get<std::string>().ends_with("/128x256x128");
    EXPECT_DOUBLE_EQ(c["value"]["weight"].get<double>(), heavy ? 10.0 : 1.0);
    if (heavy) {
      EXPECT_EQ(c["choice"], "timed") << c.dump();
      EXPECT_EQ(c["round"], 1);  // the knapsack's first choice
      EXPECT_TRUE(c["regression"].get<bool>());
    } else if (c["choice"] == "timed") {
      EXPECT_EQ(c["round"], 2);  // only with what the first round left
    } else {
      EXPECT_EQ(c["choice"], "deferred") << c.dump();
      EXPECT_EQ(c["deferred_why"], "did not fit the budget");
      EXPECT_FALSE(c.contains("ab"));
    }
  }
  EXPECT_LE(j["budget"]["cpu_spent_s"].get<double>(), 12 + 2);
}

TEST_F(PresubmitCpu, TheStaticGateFailsADiffWithoutAnyMeasurement) {
  // Two toolchains at hand: -O1, then -O3 with unrolling, whose code is larger. No budget: nothing is timed.
  const std::string cfg = config("budget: {cpu_minutes: 0}\ngate: {code_bytes: 10%, registers: 10%}\n");
  const std::string out = dir.path + "/out";
  const json j = presubmit_flags(cfg, "-O1", "-O3 -funroll-loops", 1);
  EXPECT_EQ(j["counts"]["gate_failures"], 2);
  EXPECT_EQ(j["counts"]["measurements"], 0);
  EXPECT_EQ(j["budget"]["cpu_spent_s"], 0.0);
  for (const auto& c : j["cases"]) {
    ASSERT_EQ(c["gate_failures"].size(), 1u) << c.dump();  // registers: not reported by the CPU backend
    EXPECT_EQ(c["gate_failures"][0].get<std::string>().rfind("code_bytes: ", 0), 0u);
    EXPECT_NE(c["gate_failures"][0].get<std::string>().find("(rule 10%)"), std::string::npos);
    EXPECT_EQ(c["choice"], "deferred");  // changed, but a budget of 0 times nothing
  }
  EXPECT_NE(kb::read_file(out + "/junit.xml").find("<failure type=\"static-gate\""), std::string::npos);
  const std::string md = kb::read_file(out + "/summary.md");
  EXPECT_NE(md.find("static gate: `code_bytes: "), std::string::npos) << md;
  EXPECT_NE(md.find("### Deferred to trunk"), std::string::npos) << md;
}

TEST_F(PresubmitCpu, AChangeThatComputesWrongResultsFailsBeforeAnyTiming) {
  // A flag that changes what the kernel computes: the f32 cases read their operands as bf16 (the kernel's
  // KB_DTYPE_BF16 path). The correctness check comes first; nothing of it is timed.
  const std::string cfg = config("budget: {cpu_minutes: 0.5}\n");
  const std::string out = dir.path + "/out";
  const json j = presubmit_flags(cfg, "-O3", "-O3 -DKB_DTYPE_BF16=1", 1);
  EXPECT_NE(j["stdout"].get<std::string>().find("2 broken or incorrect"), std::string::npos) << j["stdout"];
  EXPECT_EQ(j["counts"]["measurements"], 0);
  for (const auto& c : j["cases"]) {
    EXPECT_TRUE(c["incorrect"].get<bool>()) << c.dump();
    EXPECT_EQ(c["check"].get<std::string>().rfind("change incorrect: ", 0), 0u) << c.dump();
    EXPECT_FALSE(c.contains("ab"));
    EXPECT_EQ(c["choice"], "none");
  }
  EXPECT_NE(kb::read_file(out + "/junit.xml").find("<failure type=\"correctness\""), std::string::npos);
}

TEST_F(PresubmitCpu, BadInputNamesTheFieldAndExitsTwo) {
  const std::string cfg = dir.path + "/bad.yaml";
  kb::write_file_atomic(cfg, "name: x\ncases: {sweep: sweep.yaml}\nbudget: {cpu_minutes: 1}\ngate: {spills: maybe}\n");
  kb::RunResult r = presubmit({cfg, "--base-toolchain", "clang-19", "--change-toolchain", "clang-19"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.yaml:4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gate.spills"), std::string::npos) << r.err;
  const std::string ok = config("budget: {cpu_minutes: 1}\n");
  r = presubmit({ok, "--base", "main~6"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--change"), std::string::npos) << r.err;
  r = presubmit({ok, "--base", "no-such-ref", "--change", "main"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-ref"), std::string::npos) << r.err;
}
