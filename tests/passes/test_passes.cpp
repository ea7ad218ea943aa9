// `kbisect passes`: the opt-bisect line parser, a runtime crossing on the CPU matmul (the vectorizer, real
// clang-19 compiles and interleaved measurements; only the pass name is asserted, never a time), and a
// register crossing on NVPTX (clang-CUDA, compile only) or AMDGPU (clang-HIP), whichever is built.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "passes/passes.h"
#include "core/process.h"

using namespace kb;

namespace {

std::string write_tmp(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string p = dir + "/" + name;
  write_file_atomic(p, text);
  return p;
}

std::string sweep_text(const std::string& backend, const std::string& extra, const std::string& shape) {
  return "name: passes-test\nbenchmarks:\n  - kernel: matmul_tiled\n    backend: " + backend + "\n" + extra +
         "    dtypes: [f32]\n    shapes: [" + shape + "]\n";
}

bool has_preset(const std::string& name) {
  for (const auto& t : preset_toolchains())
    if (t.name == name) return true;
  return false;
}

}  // namespace

TEST(OptBisect, ParsesRunningAndSkippedPassesWithTheirUnits) {
  const std::string log =
      "warning: something\n"
      "BISECT: running pass (1) InferFunctionAttrsPass on [module]\n"
      "BISECT: running pass (2) LICMPass on loop %for.body in function kb_gemm\n"
      "BISECT: NOT running pass (3) LoopVectorizePass on kb_gemm\r\n"
      "BISECT: NOT running pass (4) X86 LEA Fixup on function (_ZN3kbk12micro_kernelE)\n"
      "BISECT: running pass (x) Broken\n";
  auto v = parse_opt_bisect(log);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].n, 1);
  EXPECT_EQ(v[0].pass, "InferFunctionAttrsPass");
  EXPECT_EQ(v[0].unit, "[module]");
  EXPECT_TRUE(v[0].ran);
  EXPECT_EQ(v[1].pass, "LICMPass");
  EXPECT_EQ(v[1].unit, "loop %for.body in function kb_gemm");
  EXPECT_FALSE(v[2].ran);
  EXPECT_EQ(v[2].unit, "kb_gemm");
  EXPECT_EQ(v[3].pass, "X86 LEA Fixup");
  EXPECT_EQ(v[3].unit, "function (_ZN3kbk12micro_kernelE)");
}

TEST(Passes, RejectsToolchainsThatAreNotClang) {
  if (which("g++").empty()) GTEST_SKIP() << "g++ not installed";
  const std::string dir = temp_dir("kb-passes");
  const std::string sw = write_tmp(dir, "s.yaml", sweep_text("cpu", "", "[64, 64, 64]"));
  PassesOptions o;
  o.sweep_file = sw;
  o.toolchain = "g++";
  try {
    run_passes(o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("clang-based"), std::string::npos) << e.what();
  }
  remove_tree(dir);
}

TEST(Passes, FindsTheVectorizerForRuntimeOnTheCpuMatmul) {
  if (which("clang++-19").empty()) GTEST_SKIP() << "clang++-19 not installed";
  const std::string dir = temp_dir("kb-passes");
  const std::string sw = write_tmp(dir, "s.yaml",
                                   sweep_text("cpu", "    params: {BM: 32, BN: 64, BK: 64, MR: 4, NR: 16}\n", "[256, 256, 256]"));
  const std::string tc = write_tmp(dir, "tc.yaml",
                                   "name: c19\nbackend: cpu\nkind: clang\ncompiler: clang++-19\nflags: [-O3, -march=x86-64-v3]\n");
  PassesOptions o;
  o.sweep_file = sw;
  o.toolchain = tc;
  o.metric = "time";
  o.probe_budget_s = 10;
  struct StderrLog : Log {
    void line(const std::string& s) override { std::fprintf(stderr, "%s\n", s.c_str()); }
  } log;
  o.log = &log;
  auto r = run_passes(o);
  ASSERT_EQ(r.size(), 1u);
  const auto& c = r[0];
  ASSERT_EQ(c.verdict, "found") << c.reason << "\n" << render_passes(r);
  EXPECT_GT(c.total, 100);
  EXPECT_TRUE(c.pass.find("LoopVectorize") != std::string::npos || c.pass.find("SLPVectorizer") != std::string::npos)
      << render_passes(r);
  EXPECT_FALSE(c.unit.empty());
  EXPECT_GT(c.n, 0);
  EXPECT_LE(c.n, c.total);
  EXPECT_GT(c.low, c.high);      // all passes beat none (the levels, not a timing target)
  EXPECT_GT(c.before, c.after);  // the crossing makes it faster: confirmed by the paired decision
  EXPECT_EQ(c.confirm.verdict, stats::Verdict::better);
  auto j = passes_to_json(r);
  EXPECT_EQ(j[0]["crossing"]["pass"], c.pass);
  remove_tree(dir);
}

TEST(Passes, FindsARegisterCrossingOnAGpuTarget) {
  std::string backend, toolchain;
  if (find_backend("cuda") && has_preset("clang19-cuda-sm90a")) {
    backend = "cuda";
    toolchain = "clang19-cuda-sm90a";
  } else if (find_backend("hip") && has_preset("clang19-hip-gfx90a")) {
    backend = "hip";
    toolchain = "clang19-hip-gfx90a";
  } else {
    GTEST_SKIP() << "neither the CUDA backend with clang-19 (clang19-cuda-sm90a) nor the HIP backend with "
                    "clang-19 (clang19-hip-gfx90a) is built here";
  }
  const std::string dir = temp_dir("kb-passes");
  const std::string sw = write_tmp(dir, "s.yaml", sweep_text(backend, "    config: best\n", "[1024, 1024, 1024]"));
  PassesOptions o;
  o.sweep_file = sw;
  o.toolchain = toolchain;
  o.metric = backend == "cuda" ? "registers" : "vgprs";
  auto r = run_passes(o);
  ASSERT_EQ(r.size(), 1u);
  const auto& c = r[0];
  std::fprintf(stderr, "%s", render_passes(r).c_str());
  ASSERT_EQ(c.verdict, "found") << c.reason;
  EXPECT_NE(c.before, c.after);
  EXPECT_NE(c.low, c.high);
  EXPECT_FALSE(c.pass.empty());
  // The placement is consistent: N-1 is below the cut, N at or above it.
  const double cut = o.cut;
  auto pos = [&](double v) { return (v - c.low) / (c.high - c.low); };
  EXPECT_LT(pos(c.before), cut);
  EXPECT_GE(pos(c.after), cut);
  remove_tree(dir);
}
