// A bisection over Triton builds: a generated compiler history whose commits change which real Triton
// release the in-tree toolchain uses, the way a Triton commit or an LLVM bump changes the compiler. The
// static metric names the release change with no samples (no GPU needed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "bisect/bisector.h"
#include "bisect/config.h"
#include "core/fsutil.h"
#include "tests/backends/triton/triton_fixture.h"
#include "tests/common/bisect_fixture.h"

namespace {

using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::GitRepo;
using kbtest::write_tmp;

std::string triton_python(const std::string& release) { return kb::test::triton_env_python("triton-" + release); }

std::string triton_toolchain(const std::string& release, const std::string& flags = "") {
  return fmt::format("name: in-tree-triton\nbackend: cuda\nkind: triton\ncompiler: {}\ntarget: sm_90a\n{}",
                     triton_python(release), flags.empty() ? "" : "flags: [" + flags + "]\n");
}

TEST(BisectTriton, NamesTheReleaseChangeFromStaticMetrics) {
  if (!kb::find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
  GitRepo r;
  std::vector<std::string> s;
  // The persistent kernel takes 90 registers under 3.5.1 and 110 under 3.3.1 (sm_90a, measured here): a pin
  // moved back to the older release is the regression.
  s.push_back(r.commit({{"tc.yaml", triton_toolchain("3.5.1")}}, "good: triton 3.5.1"));
  s.push_back(r.commit({{"README", "a\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", triton_toolchain("3.5.1", "enable_fp_fusion=true")}}, "spell out the default"));
  s.push_back(r.commit({{"README", "b\n"}}, "docs again"));
  s.push_back(r.commit({{"tc.yaml", triton_toolchain("3.3.1", "enable_fp_fusion=true")}}, "pin triton back to 3.3.1"));
  s.push_back(r.commit({{"README", "c\n"}}, "docs once more"));
  const std::string cfg = fmt::format(R"(name: triton-bump
repo: {}
good: {}
bad: {}
provider: {{in_tree: tc.yaml}}
benchmarks:
  - kernel: triton_matmul_persistent
    backend: cuda
    dtypes: [f16]
    shapes: [[4096, 4096, 4096]]
metric: registers
threshold: 5%
budgets: {{max_builds: 8}}
)", r.path(), s.front(), s.back());
  BisectRun run = bisect(load_bisect_config(write_tmp(r, cfg)), r.tmp() + "/work", false);
  const Outcome& o = run.outcome;
  ASSERT_EQ(o.verdict, "culprit") << o.summary << " / " << (o.reproduce ? o.reproduce->reason : "");
  EXPECT_EQ(run.commits[size_t(o.culprit)].sha, s[4]);
  EXPECT_EQ(o.samples, 0);
  for (const auto& st : o.steps) EXPECT_EQ(st.how, "static");
  json res = json::parse(kb::read_file(run.result_json));
  EXPECT_EQ(res["culprit"]["subject"], "pin triton back to 3.3.1");
}

}  // namespace
