// Bisection and explain over TLX-era Triton builds: a generated history whose in-tree toolchain moves from
// Triton 3.5.1 to 3.8.0 through three real builds of the triton-utlx plugin (post14, post15, post16; the
// code they give was measured identical, docs/triton.md), bisected on a per-warp-group column with no
// samples; and `explain` between two plugin builds.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "bisect/bisector.h"
#include "bisect/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "passes/explain.h"
#include "tests/backends/triton/triton_fixture.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

namespace {

using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::GitRepo;
using kbtest::write_tmp;

std::string toolchain_on(const std::string& env) {
  return fmt::format("name: in-tree-triton\nbackend: cuda\nkind: triton\ncompiler: {}\ntarget: sm_100a\n",
                     kb::test::triton_env_python(env));
}

// Automatic warp specialization over tensor descriptors on sm_100a initialises 7 mbarriers under 3.5.1 and 8
// under 3.8.0 (measured here); the plugin builds after that change nothing. The bisection names the commit
// that moves to 3.8.0, from the column alone.
TEST(BisectTlx, NamesTheReleaseChangeOnAWarpGroupColumnThroughPluginBuilds) {
  if (!kb::find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", toolchain_on("triton-3.5.1")}}, "good: triton 3.5.1"));
  s.push_back(r.commit({{"README", "a\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", toolchain_on("utlx-builds/triton-utlx-3.8.0.post14")}},
                       "triton 3.8.0 with triton-utlx 3.8.0.post14"));
  s.push_back(r.commit({{"tc.yaml", toolchain_on("utlx-builds/triton-utlx-3.8.0.post15")}}, "triton-utlx 3.8.0.post15"));
  s.push_back(r.commit({{"tc.yaml", toolchain_on("triton-3.8.0-tlx")}}, "triton-utlx 3.8.0.post16"));
  s.push_back(r.commit({{"README", "b\n"}}, "docs again"));
  const std::string cfg = fmt::format(R"(name: tlx-builds
repo: {}
good: {}
bad: {}
provider: {{in_tree: tc.yaml}}
benchmarks:
  - kernel: triton_matmul_ws_tma
    backend: cuda
    dtypes: [f16]
    shapes: [[4096, 4096, 4096]]
metric: {{static: mbarriers}}
threshold: 1
budgets: {{max_builds: 8}}
)", r.path(), s.front(), s.back());
  BisectRun run = bisect(load_bisect_config(write_tmp(r, cfg)), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary << " / " << (o.reproduce ? o.reproduce->reason : "");
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[2]);
  EXPECT_EQ(o.samples, 0);
  for (const auto& st : o.steps) EXPECT_EQ(st.how, "static");
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["culprit"]["subject"], "triton 3.8.0 with triton-utlx 3.8.0.post14");
  EXPECT_NE(kb::read_file(run.report_md).find("mbarriers"), std::string::npos);
}

// A column no backend reports is a one-line error naming it, not a silent zero.
TEST(BisectTlx, AnUnknownColumnIsNamed) {
  if (!kb::find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
  GitRepo r;
  const std::string a = r.commit({{"tc.yaml", toolchain_on("triton-3.5.1")}}, "good");
  const std::string b = r.commit({{"tc.yaml", toolchain_on("triton-3.8.0-tlx")}}, "bad");
  const std::string cfg = fmt::format(R"(name: nope
repo: {}
good: {}
bad: {}
provider: {{in_tree: tc.yaml}}
benchmarks:
  - {{kernel: triton_matmul_ws_tma, backend: cuda, dtypes: [f16], shapes: [[4096, 4096, 4096]]}}
metric: {{static: ws_p9_warps}}
)", r.path(), a, b);
  try {
    bisect(load_bisect_config(write_tmp(r, cfg)), r.tmp() + "/work", false);
    FAIL() << "a column the backend does not report must be refused";
  } catch (const kb::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("metric 'ws_p9_warps' is not reported by the cuda backend"), std::string::npos) << what;
    EXPECT_NE(what.find("ws_p2_warps"), std::string::npos) << what;  // it lists what it does report
  }
}

// `metric: {static: COLUMN}` in a config: the column's name is kept; a name that no column can have is an
// error naming the file, the line and the field.
TEST(BisectTlx, StaticColumnMetricParses) {
  GitRepo r;
  const std::string a = r.commit({{"README", "a\n"}}, "a");
  auto config = [&](const std::string& metric) {
    return fmt::format("repo: {}\ngood: {}\nbad: {}\nprovider: {{in_tree: tc.yaml}}\nbenchmarks:\n"
                       "  - {{kernel: matmul_tiled, backend: cpu, dtypes: [f32], shapes: [[64, 64, 64]]}}\n"
                       "metric: {}\n", r.path(), a, a, metric);
  };
  const BisectConfig c = parse_bisect_config(config("{static: ws_p1_maxnreg}"), "cfg.yaml");
  EXPECT_EQ(c.metric, Metric::column);
  EXPECT_EQ(c.metric_column, "ws_p1_maxnreg");
  EXPECT_EQ(metric_label(c.metric, c.metric_column), "ws_p1_maxnreg");
  EXPECT_TRUE(c.threshold_absolute);  // a count: any change by default
  try {
    parse_bisect_config(config("{static: 'two words'}"), "cfg.yaml");
    FAIL() << "a bad column name must be refused";
  } catch (const kb::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.yaml:7:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("metric.static"), std::string::npos) << e.what();
  }
}

// Between two builds of the plugin the machine code is the same, but the IR is not: the TLX front end's
// output differs from the first pass on, and explain names the first pass that diverged on equal input.
TEST(ExplainTlx, NamesThePassesBetweenTwoPluginBuilds) {
  if (!kb::find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
  kbtest::TestDir tmp{"kb-tlx-explain"};
  const std::string yaml = tmp.path + "/tc.yaml";
  kb::write_file_atomic(yaml, "toolchains:\n"
                              "  - {name: tlx-post14, backend: cuda, kind: triton, target: sm_90a, compiler: " +
                                  kb::test::triton_env_python("utlx-builds/triton-utlx-3.8.0.post14") + "}\n"
                              "  - {name: tlx-post16, backend: cuda, kind: triton, target: sm_90a, compiler: " +
                                  kb::test::triton_env_python("triton-3.8.0-tlx") + "}\n");
  const std::string sweep = tmp.path + "/sweep.yaml";
  kb::write_file_atomic(sweep, "name: tlx\nbenchmarks:\n  - {kernel: tlx_matmul_ws, backend: cuda, dtypes: [f16], "
                               "shapes: [[4096, 4096, 4096]]}\n");
  kb::ExplainOptions o;
  o.sweep_file = sweep;
  o.toolchains = {yaml + ":tlx-post14", yaml + ":tlx-post16"};
  kb::Explanation e = kb::run_explain(o);
  EXPECT_EQ(e.verdict, "differs");
  EXPECT_EQ(e.code_hash_a, e.code_hash_b);  // measured: the same machine code
  EXPECT_TRUE(e.metrics.empty());
  EXPECT_FALSE(e.pass.empty());
  EXPECT_FALSE(e.first_divergent_pass.empty());
  EXPECT_EQ(e.first_divergent_unit.rfind("mlir ", 0), 0u) << e.first_divergent_unit;
}

}  // namespace
