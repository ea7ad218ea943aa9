// `kbisect explain` between two real Triton builds: Triton's own per-pass MLIR dumps (MLIR_ENABLE_DUMP=1)
// split into passes, aligned, and the first pass whose output differs named.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "passes/explain.h"
#include "passes/triton_dumps.h"

namespace kb {
namespace {

TEST(TritonExplain, SplitsMlirDumpsIntoPassOutputs) {
  const std::string log =
      "// -----// IR Dump Before Inliner (inline) ('builtin.module' operation) //----- //\n"
      "module {\n  %0 = arith.constant 1 : i32 loc(\"a.py\":3:4)\n}\n"
      "#loc1 = loc(\"a.py\":1:0)\n"
      "// -----// IR Dump Before Canonicalizer (canonicalize) ('tt.func' operation: @f__i32) //----- //\n"
      "tt.func @f(%x: i32 loc(\"x\"(#loc))) {\n}\n"
      "// -----// SoftwarePipeliner internal IR Dump After: LowerLoops\n"
      "ignored\n"
      "// -----// IR Dump Before CSE (cse) ('builtin.module' operation) //----- //\n"
      "module {}\n"
      "; *** IR Dump After InstCombinePass on kernel ***\n"
      "define void @kernel() {\n  ret void\n}\n";
  auto d = split_triton_dumps(log);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].pass, "Inliner (inline)");
  EXPECT_EQ(d[0].unit, "mlir builtin.module");
  EXPECT_EQ(d[0].text, "tt.func @f(%x: i32) {\n}\n");  // the next "before" dump, locations dropped
  EXPECT_EQ(d[1].pass, "Canonicalizer (canonicalize)");
  EXPECT_EQ(d[1].unit, "mlir tt.func");
  EXPECT_EQ(d[1].text, "module {}\n");
  EXPECT_EQ(d[2].pass, "InstCombinePass");
  EXPECT_EQ(d[2].unit, "kernel");
}

TEST(TritonExplain, NamesAPassBetweenTwoReleases) {
  if (!find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
  ExplainOptions o;
  o.sweep_file = KBISECT_SOURCE_DIR "/sweeps/triton-smoke.yaml";
  o.toolchains = {"triton-3.3.1-sm90a", "triton-3.5.1-sm90a"};
  o.filter = "triton_matmul_tiled.*/f16/";
  Explanation e = run_explain(o);
  EXPECT_EQ(e.verdict, "differs");
  EXPECT_GT(e.dumps_a, 40);
  EXPECT_GT(e.dumps_b, 40);
  EXPECT_FALSE(e.pass.empty());
  EXPECT_EQ(e.unit.rfind("mlir ", 0), 0u) << e.unit;
  EXPECT_NE(e.code_hash_a, e.code_hash_b);
  bool registers = false;
  for (const auto& m : e.metrics) registers |= m.name == "registers";
  EXPECT_TRUE(registers);
}

}  // namespace
}  // namespace kb
