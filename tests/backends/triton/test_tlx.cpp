// TLX on stock Triton (Triton 3.8.0 with the triton-utlx plugin, as scripts/install-deps installs it):
// kbisect's own TLX kernels compile ahead of time for sm_90a, sm_100a and gfx942 with the per-warp-group
// columns filled in, automatic warp specialization reads the same columns, a toolchain without the plugin
// skips them naming it, the plugin is part of a toolchain's identity, the plugin builds measured here give
// the same code, and the launch ABI of 3.8 and 3.9 is the one kbisect binds. Real releases only.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/warp_groups.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "passes/triton_dumps.h"
#include "tests/backends/triton/triton_fixture.h"
#include "tests/common/test_tmp.h"
#if KBISECT_WITH_CUDA
#include "backends/cuda/triton_launch.h"
#endif

namespace kb {
namespace {

using test::triton_compile;
using test::triton_preset;

class Tlx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!find_backend("cuda") || !find_backend("hip")) GTEST_SKIP() << "the cuda and hip backends are not built in";
  }
  // A toolchain file's toolchain on the Python of an environment under the Triton root.
  Toolchain on(const std::string& env, const std::string& target, const std::string& name) {
    const std::string yaml = tmp.path + "/" + name + ".yaml";
    write_file_atomic(yaml, "name: " + name + "\nbackend: cuda\nkind: triton\ncompiler: " +
                                test::triton_env_python(env) + "\ntarget: " + target + "\n");
    Toolchain tc = find_toolchain(yaml);
    resolve_identity(tc);
    return tc;
  }
  kbtest::TestDir tmp{"kb-tlx-test"};
};

double at(const Artifact& a, const std::string& metric) {
  auto it = a.metrics.find(metric);
  if (it == a.metrics.end()) throw Error(a.kernel + " has no metric " + metric);
  return it->second;
}

// The Hopper kernel: a producer warp group and two consumer warp groups, the register split they ask for
// (40 / 232 / 232, what Triton's setmaxnreg then sets), 2 mbarriers per ring slot, TMA both ways, wgmma.
TEST_F(Tlx, HopperKernelHasItsWarpGroupsInTheColumns) {
  Backend& cuda = *find_backend("cuda");
  Toolchain tc = triton_preset(cuda, "3.8.0-tlx", "sm_90a");
  EXPECT_NE(tc.name.find("-tlx-"), std::string::npos);
  for (int stages : {3, 4}) {
    auto c = triton_compile(cuda, tc, "tlx_matmul_ws", tmp.path + "/h" + std::to_string(stages),
                            {{{"NUM_STAGES", int64_t(stages)}, {"BLOCK_N", int64_t(stages == 3 ? 256 : 128)}}});
    ASSERT_TRUE(c.art) << c.skipped << c.failed;
    const Artifact& a = *c.art;
    EXPECT_EQ(at(a, "ws_partitions"), 3);
    EXPECT_EQ(at(a, "ws_p0_warps"), 4);
    EXPECT_EQ(at(a, "ws_p1_warps"), 4);
    EXPECT_EQ(at(a, "ws_p2_warps"), 4);
    EXPECT_EQ(at(a, "num_warps"), 12);
    EXPECT_EQ(at(a, "ws_p0_maxnreg"), 40);
    EXPECT_EQ(at(a, "ws_p1_maxnreg"), 232);
    EXPECT_EQ(at(a, "ws_p2_maxnreg"), 232);
    EXPECT_EQ(at(a, "mbarriers"), 2 * stages);  // a full and an empty barrier per slot
    EXPECT_GT(at(a, "wgmma"), 0);
    EXPECT_GT(at(a, "tma_loads"), 0);
    EXPECT_GT(at(a, "tma_stores"), 0);
    EXPECT_EQ(at(a, "tcgen05_ops"), 0);
    EXPECT_EQ(at(a, "spill_stores"), 0);
    if (stages == 3) EXPECT_EQ(at(a, "smem_bytes"), 213184);  // 3 x 48 KiB ring + 2 x 32 KiB staging + barriers
  }
}

// The Blackwell kernel: the epilogue warp group, an MMA warp and a load warp; tcgen05 MMAs into tensor
// memory, no wgmma.
TEST_F(Tlx, BlackwellKernelHasLoadMmaAndEpiloguePartitions) {
  Backend& cuda = *find_backend("cuda");
  auto c = triton_compile(cuda, triton_preset(cuda, "3.8.0-tlx", "sm_100a"), "tlx_matmul_ws", tmp.path + "/b");
  ASSERT_TRUE(c.art) << c.skipped << c.failed;
  const Artifact& a = *c.art;
  EXPECT_EQ(at(a, "ws_partitions"), 3);
  EXPECT_EQ(at(a, "ws_p0_warps"), 4);
  EXPECT_EQ(at(a, "ws_p1_warps"), 1);
  EXPECT_EQ(at(a, "ws_p2_warps"), 1);
  EXPECT_EQ(at(a, "ws_p1_maxnreg"), 24);
  EXPECT_EQ(at(a, "ws_p2_maxnreg"), 24);
  EXPECT_GT(at(a, "tcgen05_mma"), 0);
  EXPECT_GT(at(a, "tcgen05_ops"), at(a, "tcgen05_mma"));  // alloc, ld, commit too
  EXPECT_EQ(at(a, "wgmma"), 0);
  EXPECT_GE(at(a, "mbarriers"), 10);  // 2 per ring slot and 2 per accumulator, at least
  EXPECT_LE(at(a, "smem_bytes"), 232448);
}

// The gfx942 kernel: LDS double buffering, one partition, no spills at 8 wavefronts.
TEST_F(Tlx, Gfx942KernelCompilesWithTwoLdsBuffers) {
  Backend& hip = *find_backend("hip");
  auto c = triton_compile(hip, triton_preset(hip, "3.8.0-tlx", "gfx942"), "tlx_matmul", tmp.path + "/a");
  ASSERT_TRUE(c.art) << c.skipped << c.failed;
  const Artifact& a = *c.art;
  EXPECT_EQ(at(a, "ws_partitions"), 1);
  EXPECT_EQ(at(a, "ws_p0_warps"), 8);
  EXPECT_EQ(at(a, "lds_bytes"), 65536);  // 2 x (256 x 32 + 32 x 256) x 2 B
  EXPECT_EQ(at(a, "vgpr_spills"), 0);
  EXPECT_EQ(a.metrics.count("wgmma"), 0u);  // no PTX: the PTX counts are CUDA's
}

// Automatic warp specialization fills the same columns: on sm_90a the same 4 + 4 + 4 split and register
// limits as the TLX kernel's, on sm_100a a 1-warp and a 2-warp partition.
TEST_F(Tlx, AutomaticWarpSpecializationReadsSideBySide) {
  Backend& cuda = *find_backend("cuda");
  for (const std::string target : {"sm_90a", "sm_100a"}) {
    auto c = triton_compile(cuda, triton_preset(cuda, "3.8.0-tlx", target), "triton_matmul_ws_tma",
                            tmp.path + "/auto" + target);
    ASSERT_TRUE(c.art) << c.skipped << c.failed;
    const Artifact& a = *c.art;
    EXPECT_EQ(at(a, "ws_partitions"), 3) << target;
    EXPECT_EQ(at(a, "ws_p0_warps"), 4) << target;
    if (target == "sm_90a") {
      EXPECT_EQ(at(a, "ws_p1_warps"), 4);
      EXPECT_EQ(at(a, "ws_p0_maxnreg"), 40);
      EXPECT_EQ(at(a, "ws_p1_maxnreg"), 232);
      EXPECT_GT(at(a, "wgmma"), 0);
    } else {
      EXPECT_EQ(at(a, "ws_p1_warps"), 1);
      EXPECT_EQ(at(a, "ws_p2_warps"), 2);
      EXPECT_GT(at(a, "tcgen05_mma"), 0);
    }
  }
  // Not specialized: one partition of all the warps.
  auto t = triton_compile(cuda, triton_preset(cuda, "3.8.0-tlx", "sm_90a"), "triton_matmul_tiled", tmp.path + "/tiled");
  ASSERT_TRUE(t.art) << t.failed;
  EXPECT_EQ(at(*t.art, "ws_partitions"), 1);
  EXPECT_EQ(at(*t.art, "ws_p0_warps"), 8);
  EXPECT_EQ(t.art->metrics.count("ws_p0_maxnreg"), 0u);
}

// Without the plugin (3.9.0, 3.5.1) the TLX kernels are skipped naming the release and the plugin; with it,
// a target the kernel is not written for is skipped naming the target.
TEST_F(Tlx, ToolchainWithoutThePluginSkipsNamingIt) {
  Backend& cuda = *find_backend("cuda");
  for (const std::string rel : {"3.9.0", "3.5.1"}) {
    auto c = triton_compile(cuda, triton_preset(cuda, rel, "sm_90a"), "tlx_matmul_ws", tmp.path + "/no" + rel);
    EXPECT_FALSE(c.art);
    EXPECT_NE(c.skipped.find("triton " + rel + " has no TLX"), std::string::npos) << c.skipped << c.failed;
    EXPECT_NE(c.skipped.find("triton-utlx"), std::string::npos) << c.skipped;
  }
  Backend& hip = *find_backend("hip");
  auto g = triton_compile(hip, triton_preset(hip, "3.9.0", "gfx942"), "tlx_matmul", tmp.path + "/nogfx");
  EXPECT_NE(g.skipped.find("triton 3.9.0 has no TLX"), std::string::npos) << g.skipped << g.failed;
  auto s = triton_compile(cuda, triton_preset(cuda, "3.8.0-tlx", "sm_80"), "tlx_matmul_ws", tmp.path + "/sm80");
  EXPECT_NE(s.skipped.find("on sm_80"), std::string::npos) << s.skipped << s.failed;
}

// The plugin is part of the identity: the same Triton with another build of the plugin (an environment
// holding only triton-utlx 3.8.0.post14) is another toolchain, and says which build it has.
TEST_F(Tlx, IdentityHashesThePluginBuild) {
  Toolchain post16 = on("triton-3.8.0-tlx", "sm_90a", "tlx16");
  Toolchain post14 = on("utlx-builds/triton-utlx-3.8.0.post14", "sm_90a", "tlx14");
  Toolchain plain = on("triton-3.9.0", "sm_90a", "plain");
  EXPECT_NE(post16.identity, post14.identity);
  EXPECT_NE(post16.version_text.find("triton 3.8.0 + triton-utlx 3.8.0.post16"), std::string::npos) << post16.version_text;
  EXPECT_NE(post14.version_text.find("triton-utlx 3.8.0.post14"), std::string::npos) << post14.version_text;
  EXPECT_EQ(plain.version_text.find("utlx"), std::string::npos) << plain.version_text;
  EXPECT_EQ(triton::triton_release(post14), "3.8.0");
}

// Measured here (docs/triton.md, TLX): the plugin builds 3.8.0.post14, .post15 and .post16 compile the
// TLX kernels to the same machine code on sm_90a and sm_100a (the earlier builds from post3 agree on
// sm_100a too; the Hopper kernel needs post14).
TEST_F(Tlx, PluginBuildsGiveTheSameCode) {
  Backend& cuda = *find_backend("cuda");
  for (const std::string target : {"sm_90a", "sm_100a"}) {
    std::set<std::string> hashes;
    for (const std::string env : {"triton-3.8.0-tlx", "utlx-builds/triton-utlx-3.8.0.post14",
                                  "utlx-builds/triton-utlx-3.8.0.post15"}) {
      Toolchain tc = on(env, target, "b" + std::to_string(hashes.size()) + target);
      auto c = triton_compile(cuda, tc, "tlx_matmul_ws", tmp.path + "/" + tc.name);
      ASSERT_TRUE(c.art) << env << ": " << c.skipped << c.failed;
      hashes.insert(c.art->code_hash);
    }
    EXPECT_EQ(hashes.size(), 1u) << target;
  }
}

// The plugin's own passes are among the passes `explain` aligns: MLIR_ENABLE_DUMP shows them by name.
TEST_F(Tlx, PluginPassesAppearInTheDumps) {
  Backend& cuda = *find_backend("cuda");
  Toolchain tc = triton_preset(cuda, "3.8.0-tlx", "sm_90a");
  tc.env["MLIR_ENABLE_DUMP"] = "1";
  tc.identity.clear();
  resolve_identity(tc);
  auto req = test::compile_request(test::kernel_named(cuda, "tlx_matmul_ws"), tc, {}, DType::f16);
  req.out_dir = tmp.path + "/dump";
  req.timeout_s = 300;
  req.log_limit = size_t(256) << 20;
  make_dirs(req.out_dir);
  const Artifact a = cuda.compile(req);
  std::set<std::string> tlx_passes;
  for (const auto& d : split_triton_dumps(a.log))
    if (d.pass.rfind("TLX", 0) == 0) tlx_passes.insert(d.pass.substr(0, d.pass.find(':')));
  EXPECT_TRUE(tlx_passes.count("TLXStorageAliasLowering")) << a.log.size();
  EXPECT_TRUE(tlx_passes.count("TLXRewriteLocalAlias"));
}

// The TLX sweep (sweeps/tlx.yaml) as a user runs it: every TLX kernel for sm_90a, sm_100a and gfx942 and
// automatic warp specialization beside it; the table shows each case's warp groups, results.json the columns.
TEST_F(Tlx, TheTlxSweepShowsTheWarpGroups) {
  const std::string out = tmp.path + "/sweep";
  const RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "sweep", KBISECT_SOURCE_DIR "/sweeps/tlx.yaml", "-o", out});
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  EXPECT_NE(r.out.find("warp groups"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4w/40r 4w/232r 4w/232r"), std::string::npos) << r.out;  // sm_90a: TLX and autoWS alike
  EXPECT_NE(r.out.find("4w/256r 1w/24r 1w/24r"), std::string::npos) << r.out;   // sm_100a TLX
  const auto res = nlohmann::json::parse(read_file(out + "/results.json"));
  int tlx = 0;
  for (const auto& c : res["cases"]) {
    ASSERT_TRUE(c.contains("static")) << c.dump();
    EXPECT_TRUE(c["static"].contains("ws_partitions")) << c["kernel"];
    if (c["kernel"] == "tlx_matmul_ws") {
      ++tlx;
      EXPECT_EQ(c["static"]["ws_partitions"], 3);
    }
  }
  EXPECT_EQ(tlx, 4);
}

#if KBISECT_WITH_CUDA
// 3.8 and 3.9 append the global and the profile scratch pointers as 3.5 does: the tiled kernel's 9
// arguments + 2, the TLX kernel's 6 + 2, each as wide as kbisect binds it (TritonLaunch::read checks the
// widths against the PTX too).
TEST_F(Tlx, LaunchAbiOf38And39MatchesTheirPtx) {
  Backend& cuda = *find_backend("cuda");
  for (const std::string rel : {"3.8.0-tlx", "3.9.0"}) {
    auto c = triton_compile(cuda, triton_preset(cuda, rel, "sm_90a"), "triton_matmul_tiled", tmp.path + "/abi" + rel);
    ASSERT_TRUE(c.art) << c.failed;
    cuda::TritonLaunch t = cuda::TritonLaunch::read(*c.art);
    EXPECT_EQ(t.ptx_params, 11) << rel;
    EXPECT_EQ(t.ptx_param_bytes, (std::vector<int>{8, 8, 8, 4, 4, 4, 4, 4, 4, 8, 8})) << rel;
    auto b = t.plan(Shape{4096, 4096, 4096}, 132);
    EXPECT_EQ(b.grid[0], 32u * 32u);
  }
  auto w = triton_compile(cuda, triton_preset(cuda, "3.8.0-tlx", "sm_90a"), "tlx_matmul_ws", tmp.path + "/abi-tlx");
  ASSERT_TRUE(w.art) << w.failed;
  cuda::TritonLaunch t = cuda::TritonLaunch::read(*w.art);
  EXPECT_EQ(t.ptx_params, 8);
  EXPECT_EQ(t.num_warps, 12);
  EXPECT_GT(t.global_scratch_size, 0);  // the device-side descriptors
  auto b = t.plan(Shape{8192, 8192, 8192}, 132);
  EXPECT_EQ(b.grid[0], 132u);  // persistent: min(SMs, 64 x 32 tiles)
  cuda::DevicePtr A = 0x1000, B = 0x2000, C = 0x3000, g = 0x4000, p = 0;
  t.bind(b, Shape{8192, 4096, 2048}, 132, &A, &B, &C, &g, &p);
  ASSERT_EQ(b.argv.size(), 8u);
  EXPECT_EQ(*static_cast<int32_t*>(b.argv[5]), 2048);  // K
}
#endif

}  // namespace
}  // namespace kb
