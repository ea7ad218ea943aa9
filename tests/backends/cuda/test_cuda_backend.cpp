// CUDA backend tests that need no GPU: every kernel config compiles through every compile path for the
// arches it claims, cubin metrics equal ptxas' own figures, spills show up under register starvation,
// code hashes track code, the no-driver reason is exact, and a sweep skips CUDA cases with static metrics.

#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/cuda/cubin_metrics.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_digest.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/check.h"
#include "harness/reference.h"
#include "tests/backends/compile_request.h"
#include "tests/backends/cuda/cuda_fixture.h"
#include "tests/common/two_threads.h"

namespace kb {
namespace {

namespace fs = std::filesystem;

using cudatest::compile;
using cudatest::Compiled;
using cudatest::cuda_backend;
using cudatest::driver_present;
using cudatest::has_preset;
using cudatest::preset;

// Cubin metrics must equal ptxas' -v figures in the compile log (nvcc's and clang's logs are ptxas
// output; NVRTC's log carries them with -Xptxas=-v).
void expect_matches_ptxas(const Artifact& a, const std::string& what) {
  auto p = cuda::parse_ptxas_log(a.log, a.entry);
  ASSERT_TRUE(p.registers.has_value()) << what << ": no ptxas -v lines in log:\n" << a.log;
  EXPECT_EQ(a.metrics.at("registers"), double(*p.registers)) << what;
  ASSERT_TRUE(p.stack_frame.has_value()) << what;
  EXPECT_EQ(a.metrics.count("frame_bytes") ? a.metrics.at("frame_bytes") : 0.0, double(*p.stack_frame)) << what;
  EXPECT_EQ(a.metrics.at("smem_bytes"), double(p.smem_bytes.value_or(0))) << what;
  EXPECT_EQ(a.metrics.at("spill_stores"), double(*p.spill_stores)) << what;
}

TEST(CudaBackend, NoDriverReasonIsExact) {
  if (driver_present()) GTEST_SKIP() << "libcuda.so.1 is present on this machine";
  auto av = cuda_backend().available();
  EXPECT_FALSE(av.ok);
  EXPECT_EQ(av.reason, "no CUDA driver (libcuda.so.1 not found)");
  // Loading an artifact must fail with the same reason, as an environment error.
  const auto& k = find_kernel("cuda", "matmul_tiled");
  auto tc = preset("nvrtc-sm80");
  auto c = compile(k, k.configs.at(1).second, DType::f32, tc);
  ASSERT_TRUE(c.error.empty()) << c.error;
  try {
    cuda_backend().load(c.art);
    FAIL() << "load succeeded without a driver";
  } catch (const EnvError& e) {
    EXPECT_EQ(std::string(e.what()), "no CUDA driver (libcuda.so.1 not found)");
  }
}

// A toolkit elsewhere than the build's (a carried bundle on a GPU machine) is found through
// KBISECT_CUDA_ROOT, then CUDA_HOME: the nvcc presets and clang's ptxas come from there.
TEST(CudaBackend, ToolkitRootFromTheEnvironment) {
  const std::string root = temp_dir("kb-cuda-root");
  make_dirs(root + "/bin");
  for (const char* tool : {"nvcc", "ptxas"})
    fs::create_symlink("/usr/local/cuda/bin/" + std::string(tool), root + "/bin/" + tool);
  auto nvcc_of = [] {
    for (auto& t : cuda_backend().presets())
      if (t.name == "nvcc-sm90a") return t.compiler;
    return std::string();
  };
  for (const char* var : {"KBISECT_CUDA_ROOT", "CUDA_HOME"}) {
    setenv(var, root.c_str(), 1);
    EXPECT_EQ(nvcc_of(), root + "/bin/nvcc") << var;
    unsetenv(var);
  }
  setenv("KBISECT_CUDA_ROOT", (root + "/missing").c_str(), 1);  // no bin/ptxas there: ignored
  EXPECT_NE(nvcc_of(), root + "/missing/bin/nvcc");
  unsetenv("KBISECT_CUDA_ROOT");
  remove_tree(root);
}

// The cold-mode flush overwrites twice the L2; a launch deadline comes from KBISECT_CUDA_TIMEOUT_S.
TEST(CudaBackend, FlushSizeAndLaunchDeadline) {
  EXPECT_EQ(cuda::l2_flush_bytes(60 << 20), size_t(120) << 20);  // H200: 60 MiB of L2
  EXPECT_EQ(cuda::l2_flush_bytes(0), size_t(2) << 20);           // unknown: at least 2 MiB
  unsetenv("KBISECT_CUDA_TIMEOUT_S");
  EXPECT_EQ(cuda::kernel_timeout_s(), 60);
  setenv("KBISECT_CUDA_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(cuda::kernel_timeout_s(), 2.5);
  for (const char* bad : {"0", "-1", "abc", "3s", "inf"}) {
    setenv("KBISECT_CUDA_TIMEOUT_S", bad, 1);
    EXPECT_THROW(cuda::kernel_timeout_s(), InputError) << bad;
  }
  unsetenv("KBISECT_CUDA_TIMEOUT_S");
}

TEST(CudaBackend, PresetsAndKinds) {
  auto kinds = cuda_backend().kinds();
  EXPECT_EQ(kinds, (std::vector<std::string>{"nvcc", "nvrtc", "clang-cuda", "triton"}));
  for (const char* n : {"nvcc-sm80", "nvcc-sm90a", "nvrtc-sm80", "nvrtc-sm90a"}) EXPECT_TRUE(has_preset(n)) << n;
  for (auto& t : cuda_backend().presets()) {
    EXPECT_EQ(t.backend, "cuda");
    EXPECT_NO_THROW(cuda::arch_limits(t.target)) << t.name;
    if (t.kind == "clang-cuda") EXPECT_TRUE(t.tools.count("ptxas")) << t.name;
  }
  auto a = preset("nvrtc-sm80"), b = preset("nvrtc-sm90a");
  EXPECT_FALSE(a.identity.empty());
  EXPECT_NE(a.identity, b.identity);  // target is part of the identity
  EXPECT_NE(a.version_text.find("NVRTC"), std::string::npos);
}

TEST(CudaBackend, CheckParamsRejectsWithReasons) {
  const auto& ws90 = find_kernel("cuda", "matmul_ws_sm90");
  auto why = ws90.check_params(ws90.complete({}), DType::bf16, "sm_80");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("sm_90a"), std::string::npos);
  EXPECT_FALSE(ws90.check_params(ws90.complete({}), DType::bf16, "sm_90a").has_value());
  EXPECT_TRUE(ws90.check_params(ws90.complete({{"BN", 96}}), DType::bf16, "sm_90a").has_value());
  const auto& tiled = find_kernel("cuda", "matmul_tiled");
  EXPECT_TRUE(tiled.check_params(tiled.complete({{"BK", 48}}), DType::bf16, "sm_80").has_value());
  EXPECT_TRUE(tiled.check_params(tiled.complete({{"TM", 3}}), DType::f32, "sm_80").has_value());
  // 6 stages of (128x64 + 64x256) bf16 = 288 KiB: over every arch's budget (4 stages, 192 KiB, fit sm_90).
  EXPECT_FALSE(tiled.check_params(tiled.complete({{"BK", 64}, {"BN", 256}, {"STAGES", 4}, {"WN", 64}}), DType::bf16,
                                  "sm_90a")
                   .has_value());
  EXPECT_TRUE(tiled.check_params(tiled.complete({{"BK", 64}, {"BN", 256}, {"STAGES", 4}, {"WN", 64}}), DType::bf16,
                                 "sm_80")
                  .has_value());
  EXPECT_TRUE(tiled.check_params(tiled.complete({{"BK", 64}, {"BN", 256}, {"STAGES", 6}, {"WN", 64}}), DType::bf16,
                                 "sm_90a")
                  .has_value());
  EXPECT_TRUE(tiled.check_shape(tiled.complete({}), DType::f32, Shape{64, 64, 0}).has_value());
  // matmul_tiled's 16-byte cp.async rows: bf16/f16 need K and N multiples of 8; fp32 takes any shape.
  EXPECT_FALSE(tiled.check_shape(tiled.complete({}), DType::f32, Shape{77, 45, 33}).has_value());
  EXPECT_EQ(tiled.check_shape(tiled.complete({}), DType::bf16, Shape{64, 64, 36}).value_or(""),
            "shape 64x64x36: K and N must be multiples of 8 (16-byte copies)");
  EXPECT_TRUE(tiled.check_shape(tiled.complete({}), DType::f16, Shape{64, 60, 64}).has_value());
  EXPECT_FALSE(tiled.check_shape(tiled.complete({}), DType::bf16, Shape{77, 64, 64}).has_value());
  const auto& ws80 = find_kernel("cuda", "matmul_ws_sm80");
  EXPECT_TRUE(ws80.check_shape(ws80.complete({}), DType::bf16, Shape{128, 100, 64}).has_value());  // N % 8
  EXPECT_FALSE(ws80.check_shape(ws80.complete({}), DType::bf16, Shape{100, 128, 64}).has_value());  // M is free
  EXPECT_THROW(cuda::arch_limits("gfx90a"), InputError);
}

TEST(CudaBackend, OccupancyCalculator) {
  auto a80 = cuda::arch_limits("sm_80");
  EXPECT_DOUBLE_EQ(cuda::theoretical_occupancy(a80, 32, 256, 0), 1.0);
  // 238 regs x 128 threads: 7680 regs per warp -> 2 warps per sub-partition -> 2 blocks of 4 warps.
  EXPECT_DOUBLE_EQ(cuda::theoretical_occupancy(a80, 238, 128, 48 * 1024), 8.0 / 64);
  // Shared memory bound: 100 KiB per block on sm_80 (164 KiB per SM) -> 1 block.
  EXPECT_DOUBLE_EQ(cuda::theoretical_occupancy(a80, 32, 256, 100 * 1024), 8.0 / 64);
  auto a90 = cuda::arch_limits("sm_90a");
  EXPECT_TRUE(a90.arch_specific);
  EXPECT_DOUBLE_EQ(cuda::theoretical_occupancy(a90, 168, 384, 140000), 12.0 / 64);
}

TEST(CudaBackend, PtxasLogParser) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_80'\n"
      "ptxas info    : Function properties for other\n"
      "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 388 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'kb_matmul' for 'sm_80'\n"
      "ptxas info    : Function properties for kb_matmul\n"
      "    96 bytes stack frame, 120 bytes spill stores, 88 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 388 bytes cmem[0]\n";
  auto f = cuda::parse_ptxas_log(log, "kb_matmul");
  EXPECT_EQ(f.registers, 32);
  EXPECT_EQ(f.stack_frame, 96);
  EXPECT_EQ(f.spill_stores, 120);
  EXPECT_EQ(f.spill_loads, 88);
  EXPECT_EQ(f.smem_bytes, 4096);
  EXPECT_FALSE(cuda::parse_ptxas_log("", "kb_matmul").registers.has_value());
  // Digits beyond int64 (fuzz_ptxas_log's first crash: std::stoll threw std::out_of_range) are bad input.
  try {
    cuda::parse_ptxas_log("ptxas info    : Used 99999999999999999999 registers\n", "");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ptxas log: registers: '99999999999999999999' is out of range"),
              std::string::npos)
        << e.what();
  }
}

// The matrix: every kernel config x dtype through nvcc and NVRTC for each arch it claims, and clang-19
// (+ptxas) where present (f16 through NVRTC only). Compiles run two at a time; each is checked against ptxas' figures.
TEST(CudaBackend, EveryConfigCompilesOnEveryClaimedArch) {
  std::vector<std::string> tcs = {"nvcc-sm80", "nvcc-sm90a", "nvrtc-sm80", "nvrtc-sm90a"};
  for (const char* n : {"clang19-cuda-sm80", "clang19-cuda-sm90a"})
    if (has_preset(n)) tcs.push_back(n);
  std::vector<Toolchain> toolchains;
  for (auto& n : tcs) toolchains.push_back(preset(n));

  struct Job {
    const KernelDecl* k;
    std::string config;
    Params params;
    DType dtype;
    const Toolchain* tc;
  };
  std::vector<Job> jobs;
  std::map<std::string, int> per_kernel;
  for (const auto* k : all_kernels()) {
    if (k->backend != "cuda" || cuda::is_library_kernel(k->name)) continue;  // cublas: no compiler (below)
    if (k->language == "triton") continue;  // Triton toolchains compile these (tests/backends/triton)
    for (const auto& [cname, p] : k->configs)
      for (DType d : k->dtypes)
        for (const auto& tc : toolchains) {
          Params full = k->complete(p);
          if (k->check_params(full, d, tc.target)) continue;  // not claimed for this arch
          // f16 differs from bf16 only in the mma/wgmma type suffix: NVRTC (in-process, cheapest)
          // covers it, keeping the test within CI's time budget.
          if (d == DType::f16 && tc.kind != "nvrtc") continue;
          jobs.push_back({k, cname, full, d, &tc});
          per_kernel[k->name]++;
        }
  }
  // Each kernel is claimed somewhere; ws_sm90 only on sm_90a.
  EXPECT_GT(per_kernel["matmul_tiled"], 0);
  EXPECT_GT(per_kernel["matmul_ws_sm80"], 0);
  EXPECT_GT(per_kernel["matmul_ws_sm90"], 0);

  std::vector<Compiled> results(jobs.size());
  test::on_two_threads(jobs.size(), [&](size_t i) {
    results[i] = compile(*jobs[i].k, jobs[i].params, jobs[i].dtype, *jobs[i].tc);
  });

  std::set<std::string> cross_checked;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    std::string what = fmt::format("{}[{}]/{}/{}", j.k->name, j.config, to_string(j.dtype), j.tc->name);
    const auto& c = results[i];
    ASSERT_TRUE(c.error.empty()) << what << ": " << c.error;
    const auto& a = c.art;
    EXPECT_TRUE(fs::exists(a.binary_path)) << what;
    EXPECT_EQ(a.entry, "kb_matmul");
    EXPECT_GT(a.code_bytes, 0) << what;
    EXPECT_EQ(a.code_hash.size(), 64u) << what;
    EXPECT_GT(a.metrics.at("registers"), 0) << what;
    EXPECT_LE(a.metrics.at("registers"), 255) << what;
    EXPECT_GT(a.metrics.at("occupancy"), 0) << what;
    EXPECT_LE(a.metrics.at("occupancy"), 1) << what;
    EXPECT_EQ(a.metrics.at("threads_per_block"),
              cuda::launch_shape(a.kernel, a.params, a.dtype).threads) << what;
    expect_matches_ptxas(a, what);
    cross_checked.insert(a.kernel);
    if (a.kernel == "matmul_tiled" && a.dtype == DType::f32) EXPECT_GT(a.metrics.at("smem_bytes"), 0) << what;
    if (a.kernel == "matmul_ws_sm90") EXPECT_EQ(a.metrics.at("tmap_by_value"), j.tc->kind == "clang-cuda" ? 0 : 1);
  }
  EXPECT_GE(cross_checked.size(), 3u);  // cubin metrics == ptxas -v for all three kernels
}

// A register-starved build: 16x16 fp32 accumulators per thread cannot fit in 255 registers, so ptxas
// spills to the stack. (-maxrregcount does not starve these kernels: their __launch_bounds__ take
// precedence over it.)
TEST(CudaBackend, RegisterStarvedBuildSpills) {
  const auto& k = find_kernel("cuda", "matmul_tiled");
  auto tc = preset("nvrtc-sm80");
  auto normal = compile(k, k.configs.at(1).second, DType::f32, tc);
  ASSERT_TRUE(normal.error.empty()) << normal.error;
  EXPECT_EQ(normal.art.metrics.at("spill_stores"), 0);
  EXPECT_EQ(normal.art.metrics.at("frame_bytes"), 0);
  auto s = compile(k, {{"BM", 128}, {"BN", 128}, {"BK", 8}, {"TM", 16}, {"TN", 16}}, DType::f32, tc);
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.art.metrics.at("registers"), 255);
  EXPECT_GT(s.art.metrics.at("spill_stores"), 0);
  EXPECT_GT(s.art.metrics.at("spill_loads"), 0);
  EXPECT_GT(s.art.metrics.at("frame_bytes"), 0);
  EXPECT_GT(s.art.metrics.at("stack_bytes"), 0);
  EXPECT_NE(s.art.code_hash, normal.art.code_hash);
  expect_matches_ptxas(s.art, "starved");
}

TEST(CudaBackend, CodeHashTracksCodeOnly) {
  const auto& k = find_kernel("cuda", "matmul_tiled");
  auto tc = preset("nvcc-sm80");
  const auto& small = k.configs.at(1).second;
  auto a = compile(k, small, DType::f32, tc);
  auto b = compile(k, small, DType::f32, tc);
  ASSERT_TRUE(a.error.empty() && b.error.empty()) << a.error << b.error;
  EXPECT_EQ(a.art.code_hash, b.art.code_hash);
  EXPECT_EQ(a.art.code_bytes, b.art.code_bytes);
  Toolchain other = tc;
  other.name = "nvcc-sm80-O1";
  other.flags = {"-Xptxas", "-O1"};
  other.identity.clear();
  resolve_identity(other);
  EXPECT_NE(other.identity, tc.identity);
  auto c = compile(k, small, DType::f32, other);
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_NE(c.art.code_hash, a.art.code_hash);
}

TEST(CudaBackend, SweepSkipsCudaCasesWithStaticMetrics) {
  if (driver_present()) GTEST_SKIP() << "a CUDA driver is present: cases would run, not skip";
  const std::string exe = KBISECT_BINARY_DIR "/kbisect";
  ASSERT_TRUE(fs::exists(exe)) << exe;
  std::string dir = temp_dir("kb-cuda-sweep");
  std::string yaml = dir + "/cuda-mini.yaml";
  write_file_atomic(yaml,
                    "name: cuda-mini\n"
                    "tier: l1\n"
                    "toolchains: [nvrtc-sm80, nvrtc-sm90a]\n"
                    "benchmarks:\n"
                    "  - kernel: matmul_tiled\n"
                    "    backend: cuda\n"
                    "    config: small\n"
                    "    dtypes: [f32, bf16]\n"
                    "    shapes: [[256, 256, 256]]\n"
                    "  - kernel: matmul_ws_sm90\n"
                    "    backend: cuda\n"
                    "    dtypes: [bf16]\n"
                    "    shapes: [[256, 256, 256]]\n");
  RunOptions o;
  o.timeout_s = 300;
  auto r = run_process({exe, "sweep", yaml, "-o", dir + "/out", "--format", "json"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(read_file(dir + "/out/results.json"));
  ASSERT_TRUE(j.contains("cases"));
  int skipped_with_static = 0, not_claimed = 0;
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["status"], "skipped") << c.dump();
    if (c["static"].is_object()) {
      EXPECT_EQ(c["reason"], "no CUDA driver (libcuda.so.1 not found)") << c.dump();
      EXPECT_GT(c["static"]["code_bytes"].get<int64_t>(), 0);
      EXPECT_EQ(c["static"]["code_hash"].get<std::string>().size(), 64u);
      EXPECT_GT(c["static"]["registers"].get<double>(), 0);
      EXPECT_TRUE(c["static"].contains("occupancy"));
      ++skipped_with_static;
    } else {
      // matmul_ws_sm90 on sm_80: not compiled at all, skipped with the check_params reason.
      EXPECT_NE(c["reason"].get<std::string>().find("sm_90a"), std::string::npos) << c.dump();
      ++not_claimed;
    }
  }
  EXPECT_EQ(skipped_with_static, 5);  // tiled f32+bf16 on two arches, ws_sm90 on sm_90a
  EXPECT_EQ(not_claimed, 1);
  remove_tree(dir);
}

// `cublas` is a library call: compiling it through any CUDA toolchain runs no compiler (one whose compiler
// does not exist compiles it as well), writes a marker file as its binary, and takes the SHA-256 of the
// libcublas it loads as its code hash; it has no static metrics. The compile cache keys it on its source.
TEST(CudaBackend, CublasCompilesWithoutACompiler) {
  const std::string lib = "/usr/local/cuda/lib64/libcublas.so.13";
  if (!fs::exists(lib)) GTEST_SKIP() << lib << " is not installed";
  const KernelDecl& k = find_kernel("cuda", "cublas");
  EXPECT_TRUE(k.params.empty());
  EXPECT_EQ(k.dtypes, (std::vector<DType>{DType::bf16, DType::f16, DType::f32}));
  ASSERT_EQ(k.configs.size(), 1u);
  EXPECT_EQ(cuda::launch_shape(k.name, k.complete({}), DType::bf16).args, cuda::ArgStyle::Library);
  EXPECT_TRUE(cuda::is_library_kernel(k.name));
  EXPECT_TRUE(fs::exists(kernel_dir() + "/" + k.source)) << k.source << ": the compile cache keys on it";
  EXPECT_FALSE(k.check_params(k.complete({}), DType::bf16, "sm_80").has_value());
  EXPECT_FALSE(k.check_shape(k.complete({}), DType::bf16, Shape{77, 45, 33}).has_value());  // any shape
  const std::string want = sha256_resolved(lib);

  Toolchain missing;  // a compiler that does not exist: any attempt to run it fails the compile
  missing.name = "nvcc-missing";
  missing.backend = "cuda";
  missing.kind = "nvcc";
  missing.compiler = "/nonexistent/bin/nvcc";
  missing.target = "sm_90a";
  for (const Toolchain& tc : {preset("nvrtc-sm90a"), missing})
    for (DType d : k.dtypes) {
      const std::string what = fmt::format("{}/{}", tc.name, to_string(d));
      Compiled c = compile(k, {}, d, tc);
      ASSERT_TRUE(c.error.empty()) << what << ": " << c.error;
      EXPECT_EQ(c.art.code_hash, want) << what;
      EXPECT_EQ(c.art.entry, "cublasGemmEx") << what;
      EXPECT_EQ(c.art.target, "sm_90a") << what;
      EXPECT_TRUE(c.art.metrics.empty()) << what;
      EXPECT_EQ(c.art.code_bytes, 0) << what;
      EXPECT_NE(c.art.log.find("no compiler run"), std::string::npos) << what << ": " << c.art.log;
      ASSERT_TRUE(fs::exists(c.art.binary_path)) << what;
      EXPECT_NE(read_file(c.art.binary_path).find(want), std::string::npos) << what;
      remove_tree(fs::path(c.art.binary_path).parent_path().string());
    }

  const std::string dir = temp_dir("kb-cublas-cache");
  CompileCache cache(dir);
  const Toolchain tc = preset("nvrtc-sm90a");
  const CompileRequest req = test::compile_request(k, tc, {}, DType::bf16);
  const Artifact first = cache.compile(cuda_backend(), req), again = cache.compile(cuda_backend(), req);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.code_hash, want);
  EXPECT_EQ(again.binary_path, first.binary_path);
  remove_tree(dir);
}

// ---- the fast check's digest on the device (backends/cuda/device_digest.h) -------------------------

TEST(CudaDigest, KernelsCompileForEveryArchTheBackendClaims) {
  for (int sm : {80, 90}) {
    const std::string& cubin = cuda::digest_cubin(sm);
    ASSERT_GT(cubin.size(), 64u) << "sm_" << sm;
    EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF")) << "sm_" << sm;
    for (const char* entry : {"kb_digest_rows", "kb_digest_cols", "kb_digest_cells"})
      EXPECT_NE(cubin.find(entry), std::string::npos) << entry << " missing for sm_" << sm;
  }
  EXPECT_THROW(cuda::digest_cubin(7), Error);  // no such arch: NVRTC's error, not a crash
}

// On a GPU: the device digest of a real kernel's result equals the host digest of the same result, the
// fast check passes on it, and an unwritten (NaN-poisoned) C is counted element by element.
TEST(CudaDigest, DeviceDigestEqualsHostDigest) {
  if (!driver_present()) GTEST_SKIP() << "no CUDA driver (libcuda.so.1): the device digest runs in scripts/gpu-check.sh";
  if (!cuda_backend().available().ok) GTEST_SKIP() << "no usable CUDA device: " << cuda_backend().available().reason;
  const Toolchain tc = preset("nvrtc-sm90");
  const KernelDecl& k = find_kernel("cuda", "matmul_tiled");
  Compiled c = compile(k, k.complete({}), DType::f32, tc);
  ASSERT_TRUE(c.error.empty()) << c.error;
  auto exe = cuda_backend().load(c.art);
  for (Shape s : {Shape{1000, 1024, 520}, Shape{2048, 2048, 2048}}) {
    ReferenceOptions ro;
    ro.full_max_flop = 0;  // the fast check at every size
    auto p = make_problem(s, DType::f32, 7, ro);
    exe->prepare(s, p->A, p->B);
    const DigestRequest req = digest_request(*p);
    const ResultDigest poisoned = exe->digest(s, req);
    EXPECT_EQ(poisoned.non_finite, s.M * s.N) << s.str();
    EXPECT_EQ(poisoned.first_non_finite, 0) << s.str();
    exe->run(1);
    const ResultDigest dev = exe->digest(s, req), host = host_digest(exe->result(), s, req);
    EXPECT_NE(dev.where, "host");
    EXPECT_EQ(dev.non_finite, 0);
    EXPECT_EQ(dev.cells, host.cells) << s.str();
    ASSERT_EQ(dev.rows.size(), host.rows.size());
    ASSERT_EQ(dev.cols.size(), host.cols.size());
    for (size_t r = 0; r < dev.rows.size(); ++r)
      for (size_t i = 0; i < dev.rows[r].size(); ++i)
        ASSERT_NEAR(dev.rows[r][i], host.rows[r][i], 1e-9 * (1 + std::fabs(host.rows[r][i]))) << s.str() << " row " << i;
    for (size_t q = 0; q < dev.cols.size(); ++q)
      for (size_t j = 0; j < dev.cols[q].size(); ++j)
        ASSERT_NEAR(dev.cols[q][j], host.cols[q][j], 1e-9 * (1 + std::fabs(host.cols[q][j]))) << s.str() << " col " << j;
    const Check chk = check_executable(*p, *exe, k.tolerance);
    EXPECT_TRUE(chk.ok) << s.str() << ": " << chk.detail;
    EXPECT_EQ(chk.method, "fast");
  }
}

}  // namespace
}  // namespace kb
