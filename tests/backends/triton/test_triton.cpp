// The Triton toolchain kind on real Triton releases (scripts/install-deps makes their environments):
// ahead-of-time compiles for CUDA and HIP targets without a GPU, the releases' differences, the skip
// reasons, the spill figures against the release's own ptxas, the launch ABI read from the real PTX, and
// the errors for a missing or broken Triton. Nothing stands in for Triton.
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/triton/expr.h"
#include "backends/triton/triton_compile.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/backends/compile_request.h"
#include "tests/common/test_tmp.h"
#if KBISECT_WITH_CUDA
#include "backends/cuda/cubin_metrics.h"
#include "backends/cuda/triton_launch.h"
#endif

namespace kb {
namespace {

using nlohmann::json;
const std::vector<std::string> kReleases = {"3.2.0", "3.3.1", "3.5.1"};

TEST(TritonExpr, GridExpressions) {
  triton::Bindings b = {{"M", 1000}, {"N", 512}, {"BLOCK_M", 128}, {"BLOCK_N", 64}, {"NUM_SMS", 132}};
  EXPECT_EQ(triton::eval_int("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)", b), 8 * 8);
  EXPECT_EQ(triton::eval_int("min(NUM_SMS, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N))", b), 64);
  EXPECT_EQ(triton::eval_int("-7 // 2", b), -4);  // Python's floor division
  EXPECT_EQ(triton::eval_int("(M + 24) % 1000 + max(1, 2, 3)", b), 24 + 3);
  try {
    triton::eval_int("cdiv(M, BLOCK_Q)", b);
    FAIL() << "an unknown name must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown name 'BLOCK_Q'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cdiv(M, BLOCK_Q)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(triton::eval_int("M // 0", b), InputError);
  EXPECT_THROW(triton::eval_int("M +", b), InputError);
  EXPECT_EQ(triton::expr_names("cdiv(M, BLOCK_M)"), (std::vector<std::string>{"M", "BLOCK_M"}));
}

// The preset of a release for a target, identity resolved; the test fails (naming install-deps) when
// this machine has no environment for it.
Toolchain preset(Backend& be, const std::string& release, const std::string& target) {
  std::string t = target;
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  const std::string name = "triton-" + release + "-" + t;
  for (auto& tc : be.presets())
    if (tc.name == name) {
      resolve_identity(tc);
      return tc;
    }
  throw Error(name + " not found under " + triton::triton_env_root() + ": run scripts/install-deps");
}

const KernelDecl& kernel(Backend& be, const std::string& name) {
  for (const auto& k : be.kernels())
    if (k.name == name) return k;
  throw Error("no kernel " + name);
}

struct Compiled {
  std::optional<Artifact> art;
  std::string skipped, failed;
};

Compiled compile(Backend& be, const Toolchain& tc, const std::string& k, const std::string& dir, Params p = {},
                 DType d = DType::f16) {
  auto req = test::compile_request(kernel(be, k), tc, p, d);
  req.out_dir = dir;
  req.timeout_s = 300;
  make_dirs(dir);
  Compiled c;
  try {
    c.art = be.compile(req);
  } catch (const CompileSkipped& e) {
    c.skipped = e.what();
  } catch (const Error& e) {
    c.failed = e.what();
  }
  return c;
}

class TritonReleases : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!find_backend("cuda") || !find_backend("hip")) GTEST_SKIP() << "the cuda and hip backends are not built in";
  }
  kbtest::TestDir tmp{"kb-triton-test"};
};

// Every release compiles the tiled matmul for sm_90a and gfx942 with static metrics, and the releases
// emit different code for the same kernel.
TEST_F(TritonReleases, TiledCompilesUnderEveryReleaseWithDifferentCode) {
  for (const std::string backend : {"cuda", "hip"}) {
    Backend& be = *find_backend(backend);
    const std::string target = backend == "cuda" ? "sm_90a" : "gfx942";
    std::set<std::string> hashes;
    for (const auto& rel : kReleases) {
      Toolchain tc = preset(be, rel, target);
      EXPECT_NE(tc.version_text.find("triton " + rel), std::string::npos) << tc.version_text;
      Compiled c = compile(be, tc, "triton_matmul_tiled", tmp.path + "/" + tc.name);
      ASSERT_TRUE(c.art) << tc.name << ": " << c.skipped << c.failed;
      const Artifact& a = *c.art;
      EXPECT_FALSE(a.code_hash.empty());
      EXPECT_GT(a.code_bytes, 1000);
      if (backend == "cuda") {
        EXPECT_GT(a.metrics.at("registers"), 32) << tc.name;
        EXPECT_GT(a.metrics.at("dynamic_smem_bytes"), 0) << tc.name;  // Triton's pipelined shared memory
        EXPECT_EQ(a.metrics.at("threads_per_block"), 256);
      } else {
        EXPECT_GT(a.metrics.at("vgprs"), 32) << tc.name;
        EXPECT_GT(a.metrics.at("dynamic_lds_bytes"), 0) << tc.name;  // Triton's LDS is dynamic
        EXPECT_EQ(a.metrics.at("lds_bytes"), a.metrics.at("dynamic_lds_bytes")) << tc.name;
      }
      for (const char* f : {"kernel.ttir", "kernel.ttgir", "kernel.llir", "kernel.json", "launch.json"})
        EXPECT_TRUE(file_exists(tmp.path + "/" + tc.name + "/" + f)) << tc.name << " " << f;
      EXPECT_TRUE(file_exists(tmp.path + "/" + tc.name + (backend == "cuda" ? "/kernel.ptx" : "/kernel.amdgcn")));
      hashes.insert(a.code_hash);
    }
    EXPECT_GE(hashes.size(), 2u) << backend << ": three releases, one machine code";
  }
}

// Too old a release, or a target it does not specialize for, is a skip that names both.
TEST_F(TritonReleases, SkipReasonsNameReleaseAndTarget) {
  Backend& cuda = *find_backend("cuda");
  Compiled old = compile(cuda, preset(cuda, "3.2.0", "sm_90a"), "triton_matmul_persistent", tmp.path + "/p32");
  EXPECT_NE(old.skipped.find("triton 3.2.0 has no device-side tensor descriptors"), std::string::npos) << old.skipped << old.failed;
  Compiled ws_old = compile(cuda, preset(cuda, "3.3.1", "sm_90a"), "triton_matmul_ws", tmp.path + "/w33");
  EXPECT_NE(ws_old.skipped.find("triton 3.3.1 has no tl.range(..., warp_specialize=True)"), std::string::npos)
      << ws_old.skipped << ws_old.failed;
  Compiled ws90 = compile(cuda, preset(cuda, "3.5.1", "sm_90a"), "triton_matmul_ws", tmp.path + "/w35");
  EXPECT_NE(ws90.skipped.find("triton 3.5.1 on sm_90a: the loop compiled without warp specialization"),
            std::string::npos) << ws90.skipped << ws90.failed;
  Compiled p80 = compile(cuda, preset(cuda, "3.3.1", "sm_80"), "triton_matmul_persistent", tmp.path + "/p80");
  EXPECT_NE(p80.skipped.find("triton 3.3.1 on sm_80"), std::string::npos) << p80.skipped << p80.failed;
  // Where the release does specialize (Blackwell), the same source gives warp-specialized code.
  Compiled ws100 = compile(cuda, preset(cuda, "3.5.1", "sm_100a"), "triton_matmul_ws", tmp.path + "/w100");
  ASSERT_TRUE(ws100.art) << ws100.skipped << ws100.failed;
  EXPECT_NE(read_file(tmp.path + "/w100/kernel.ptx").find("setmaxnreg"), std::string::npos);
}

#if KBISECT_WITH_CUDA
// The spills kbisect reports are what the release's bundled ptxas -v prints for the same PTX and options.
TEST_F(TritonReleases, SpillsMatchTheBundledPtxas) {
  Backend& cuda = *find_backend("cuda");
  Toolchain tc = preset(cuda, "3.5.1", "sm_90a");
  // A 256x128 fp32 accumulator on one warpgroup is 256 floats a thread: more than registers, so ptxas spills
  // (1800 bytes of spill stores with 3.5.1, 2 s; a 256x256 fp32-operand tile spilled too but took 220 s).
  Params p = {{"BLOCK_M", 256}, {"BLOCK_N", 128}, {"BLOCK_K", 32}, {"opt.num_warps", 4}, {"opt.num_stages", 2}};
  const std::string dir = tmp.path + "/spill";
  Compiled c = compile(cuda, tc, "triton_matmul_tiled", dir, p, DType::f16);
  ASSERT_TRUE(c.art) << c.skipped << c.failed;
  std::vector<std::string> argv = json::parse(read_file(dir + "/ptxas.argv")).get<std::vector<std::string>>();
  ASSERT_GE(argv.size(), 3u);
  // The same ptxas, options and PTX, run again by the test, into a cubin of its own.
  std::vector<std::string> again;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "-o") {
      again.insert(again.end(), {"-o", dir + "/again.cubin"});
      ++i;
    } else if (argv[i].size() > 4 && argv[i].substr(argv[i].size() - 4) == ".ptx") {
      again.push_back(dir + "/kernel.ptx");
    } else {
      again.push_back(argv[i]);
    }
  }
  RunResult r = run_process(again);
  ASSERT_TRUE(r.ok()) << argv_to_display(again) << "\n" << r.err;
  auto figures = cuda::parse_ptxas_log(r.out + r.err, c.art->entry);
  ASSERT_TRUE(figures.spill_stores.has_value()) << r.err;
  EXPECT_GT(*figures.spill_stores, 0) << "the test kernel should spill";
  EXPECT_EQ(c.art->metrics.at("spill_stores"), double(*figures.spill_stores));
  EXPECT_EQ(c.art->metrics.at("spill_loads"), double(figures.spill_loads.value_or(0)));
  EXPECT_EQ(c.art->metrics.at("registers"), double(figures.registers.value_or(-1)));
}

// The launch ABI of each release, read from its real PTX: user arguments, then the scratch pointers.
TEST_F(TritonReleases, LaunchAbiMatchesThePtxOfEachRelease) {
  Backend& cuda = *find_backend("cuda");
  const std::map<std::string, int> hidden = {{"3.2.0", 0}, {"3.3.1", 1}, {"3.5.1", 2}};
  for (const auto& rel : kReleases) {
    Compiled c = compile(cuda, preset(cuda, rel, "sm_90a"), "triton_matmul_tiled", tmp.path + "/abi" + rel);
    ASSERT_TRUE(c.art) << c.failed;
    cuda::TritonLaunch t = cuda::TritonLaunch::read(*c.art);
    EXPECT_EQ(t.ptx_params, 9 + hidden.at(rel)) << rel;
    EXPECT_EQ(t.num_warps, 8);
    auto b = t.plan(Shape{4096, 4096, 4096}, 132);
    EXPECT_EQ(b.grid[0], 32u * 32u);
    cuda::DevicePtr A = 0x1000, B = 0x2000, C = 0x3000, g = 0, p = 0;
    t.bind(b, Shape{4096, 2048, 1024}, 132, &A, &B, &C, &g, &p);
    ASSERT_EQ(b.argv.size(), size_t(t.ptx_params));
    EXPECT_EQ(*static_cast<int32_t*>(b.argv[6]), 1024);  // stride_am = K
    EXPECT_EQ(*static_cast<int32_t*>(b.argv[7]), 2048);  // stride_bk = N
  }
  // A persistent kernel on 3.5.1 makes its descriptors on the device: it needs global scratch.
  Compiled p = compile(cuda, preset(cuda, "3.5.1", "sm_90a"), "triton_matmul_persistent", tmp.path + "/abi-p");
  ASSERT_TRUE(p.art) << p.failed;
  cuda::TritonLaunch t = cuda::TritonLaunch::read(*p.art);
  EXPECT_GT(t.global_scratch_size, 0);
  auto b = t.plan(Shape{4096, 4096, 4096}, 132);
  EXPECT_EQ(b.grid[0], 132u);
  EXPECT_EQ(b.global_scratch_bytes, size_t(132) * size_t(t.global_scratch_size));
  // A launch.json that disagrees with the PTX fails loudly.
  json lj = json::parse(read_file(tmp.path + "/abi-p/launch.json"));
  lj["profile_scratch"] = false;
  write_file_atomic(tmp.path + "/abi-p/launch.json", lj.dump());
  try {
    cuda::TritonLaunch::read(*p.art);
    FAIL() << "a wrong ABI must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("launch ABI"), std::string::npos) << e.what();
  }
}
#endif

// A Python without Triton, and a Python that does not exist: one clear line each.
TEST_F(TritonReleases, MissingOrBrokenTritonIsAClearError) {
  const std::string py = which("python3");
  ASSERT_FALSE(py.empty());
  const std::string yaml = tmp.path + "/tc.yaml";
  write_file_atomic(yaml, "toolchains:\n  - {name: no-triton, backend: cuda, kind: triton, compiler: " + py +
                              ", target: sm_90a, env: {PYTHONNOUSERSITE: '1', PYTHONPATH: ''}}\n"
                              "  - {name: gone, backend: cuda, kind: triton, compiler: /nonexistent/bin/python, "
                              "target: sm_90a}\n");
  Toolchain none = find_toolchain(yaml + ":no-triton");
  const RunResult has = run_process({py, "-c", "import triton"});
  if (has.ok()) GTEST_SKIP() << py << " has a triton of its own";
  try {
    resolve_identity(none);
    FAIL() << "a Python without Triton must be refused";
  } catch (const EnvError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot import triton"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no-triton"), std::string::npos) << e.what();
  }
  Toolchain gone = find_toolchain(yaml + ":gone");
  try {
    resolve_identity(gone);
    FAIL() << "a missing Python must be refused";
  } catch (const EnvError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/bin/python"), std::string::npos) << e.what();
  }
}

// Triton kernels and C++ kernels do not mix: each is refused by the other's toolchains with the reason.
TEST_F(TritonReleases, KernelLanguageAndToolchainKindMustAgree) {
  Backend& cuda = *find_backend("cuda");
  const KernelDecl& tk = kernel(cuda, "triton_matmul_tiled");
  EXPECT_NE(tk.language_mismatch("nvcc-sm90a", "nvcc").value_or("").find("needs a toolchain of kind 'triton'"),
            std::string::npos);
  const KernelDecl& ck = kernel(cuda, "matmul_tiled");
  EXPECT_TRUE(ck.language_mismatch("triton-3.5.1-sm90a", "triton").has_value());
  EXPECT_FALSE(tk.language_mismatch("triton-3.5.1-sm90a", "triton").has_value());
}

}  // namespace
}  // namespace kb
