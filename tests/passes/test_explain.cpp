// `kbisect explain`: dump splitting, normalization and the LCS diff on fixed text; clang-16 vs clang-19 on
// the CPU matmul names a pass and shows a non-empty diff; the --bisect-dir form reads a finished
// bisection's toolchains.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "passes/explain.h"
#include "core/fsutil.h"
#include "core/process.h"

using namespace kb;

namespace {

const char* kSweep =
    "name: explain-test\nbenchmarks:\n  - kernel: matmul_tiled\n    backend: cpu\n"
    "    params: {BM: 32, BN: 64, BK: 64, MR: 4, NR: 16}\n    dtypes: [f32]\n    shapes: [[64, 64, 64]]\n";

std::string tc_yaml(const std::string& name, const std::string& cc) {
  return "name: " + name + "\nbackend: cpu\nkind: clang\ncompiler: " + cc + "\nflags: [-O3, -march=x86-64-v3]\n";
}

}  // namespace

TEST(ExplainText, SplitsNormalizesAndDiffs) {
  const std::string log =
      "*** IR Dump After SROAPass on f ***\n"
      "define void @f() #0 {\n  %a = add i32 1, 2, !tbaa !5 ; comment\n  ret void\n}\n"
      "!5 = !{}\nattributes #0 = { nounwind }\n"
      "*** IR Dump After InstCombinePass on f ***\n"
      "define void @f() #1 {\n  ret void\n}\n"
      "*** IR Dump After SROAPass on f ***\n"
      "define void @f() {\n}\n";
  auto d = split_ir_dumps(log);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].pass, "SROAPass");
  EXPECT_EQ(d[0].unit, "f");
  EXPECT_EQ(d[0].occurrence, 0);
  EXPECT_EQ(d[2].occurrence, 1);
  EXPECT_EQ(normalize_ir(d[0].text), "define void @f() {\n  %a = add i32 1, 2\n  ret void\n}\n");
  EXPECT_EQ(normalize_ir(d[1].text), "define void @f() {\n  ret void\n}\n");

  EXPECT_EQ(unified_diff("a\nb\nc\n", "a\nb\nc\n", "x", "y"), "");
  const std::string df = unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n", "x", "y", 1);
  EXPECT_EQ(df, "--- x\n+++ y\n@@ -4,3 +4,3 @@\n 4\n-5\n+FIVE\n 6\n");
  std::string big_a, big_b;
  for (int i = 0; i < 200; ++i) big_a += std::to_string(i) + "\n", big_b += std::to_string(i * 7) + "\n";
  const std::string capped = unified_diff(big_a, big_b, "x", "y", 3, 20);
  EXPECT_NE(capped.find("more lines"), std::string::npos);
}

TEST(Explain, Clang16VsClang19NamesAPassAndShowsADiff) {
  if (which("clang++-16").empty() || which("clang++-19").empty()) GTEST_SKIP() << "clang++-16 or clang++-19 missing";
  const std::string dir = temp_dir("kb-explain-test");
  write_file_atomic(dir + "/s.yaml", kSweep);
  write_file_atomic(dir + "/a.yaml", tc_yaml("c16", "clang++-16"));
  write_file_atomic(dir + "/b.yaml", tc_yaml("c19", "clang++-19"));
  ExplainOptions o;
  o.sweep_file = dir + "/s.yaml";
  o.toolchains = {dir + "/a.yaml", dir + "/b.yaml"};
  Explanation e = run_explain(o);
  std::fprintf(stderr, "%s", render_explanation(e).c_str());
  EXPECT_EQ(e.verdict, "differs");
  EXPECT_FALSE(e.pass.empty());
  EXPECT_NE(e.diff.find("\n-"), std::string::npos) << e.diff;
  EXPECT_NE(e.diff.find("\n+"), std::string::npos) << e.diff;
  EXPECT_NE(e.diff.find("@@"), std::string::npos);
  EXPECT_GT(e.dumps_a, 10);
  EXPECT_GT(e.dumps_b, 10);
  EXPECT_NE(e.code_hash_a, e.code_hash_b);
  ASSERT_FALSE(e.metrics.empty());
  EXPECT_EQ(e.metrics[0].name, "code_bytes");

  // The same toolchain twice: same IR everywhere, no metric difference.
  o.toolchains = {dir + "/b.yaml", dir + "/b.yaml"};
  Explanation same = run_explain(o);
  EXPECT_EQ(same.verdict, "same-ir");
  EXPECT_TRUE(same.metrics.empty());

  // --bisect-dir: a finished bisection's toolchains of the culprit and its parent.
  const std::string wd = dir + "/work";
  const std::string parent(40, 'a'), culprit(40, 'b');
  make_dirs(wd + "/toolchains/" + parent);
  make_dirs(wd + "/toolchains/" + culprit);
  write_file_atomic(wd + "/toolchains/" + parent + "/toolchain.yaml", tc_yaml("at-parent", "clang++-16"));
  write_file_atomic(wd + "/toolchains/" + culprit + "/toolchain.yaml", tc_yaml("at-culprit", "clang++-19"));
  const std::string cfg = dir + "/bisect.yaml";
  write_file_atomic(cfg, std::string("name: t\nrepo: ") + dir + "\ngood: a\nbad: b\nprovider: {in_tree: tc.yaml}\n" + kSweep +
                             "metric: code_bytes\n");
  nlohmann::json rj = {{"verdict", "culprit"},
                       {"config", {{"file", cfg}}},
                       {"culprit", {{"sha", culprit}, {"parent", parent}, {"subject", "x"}}}};
  write_file_atomic(wd + "/result.json", rj.dump());
  ExplainOptions b;
  b.bisect_dir = wd;
  b.culprit = culprit.substr(0, 10);
  Explanation eb = run_explain(b);
  EXPECT_EQ(eb.toolchain_a, "at-parent");
  EXPECT_EQ(eb.toolchain_b, "at-culprit");
  EXPECT_EQ(eb.pass, e.pass);
  b.culprit = "cccc";
  EXPECT_THROW(run_explain(b), InputError);
  remove_tree(dir);
}
