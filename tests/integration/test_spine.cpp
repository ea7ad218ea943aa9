// End to end on the CPU backend with real compilers: compile, load several builds in one process,
// sweep through the CLI, results schema, cache hits, and failures that stay contained.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/reference.h"

using namespace kb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kBin = std::string(KBISECT_BINARY_DIR) + "/kbisect";

struct Cli {
  RunResult r;
  explicit Cli(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), kBin);
    RunOptions o;
    o.timeout_s = 600;
    o.env_set = std::move(env);
    r = run_process(args, o);
  }
};

class Spine : public ::testing::Test {
 protected:
  void SetUp() override { dir = temp_dir("kbisect-spine-"); }
  void TearDown() override { remove_tree(dir); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir + "/" + name;
    write_file_atomic(p, text);
    return p;
  }
  // A copy of the kernel tree where one CPU kernel source is replaced.
  std::string kernels_with(const std::string& file, const std::string& text) {
    std::string k = dir + "/kernels";
    fs::copy(kernel_dir(), k, fs::copy_options::recursive);
    write_file_atomic(k + "/cpu/" + file, text);
    return k;
  }
  // Runs the tiny sweep (below) with one CPU kernel source replaced; returns results.json.
  json tiny_sweep_with(const std::string& file, const std::string& text, RunResult& r);
  std::string dir;
};

const char* kTinySweep = R"(
name: tiny
toolchains: [g++]
measure: {warmup_s: 0.005, min_samples: 5, max_time_s: 0.3}
benchmarks:
  - kernel: matmul_tiled
    config: small
    shapes: [[40, 72, 24]]
  - kernel: matmul_pipelined
    config: small
    shapes: [[40, 72, 24]]
)";

json Spine::tiny_sweep_with(const std::string& file, const std::string& text, RunResult& r) {
  std::string k = kernels_with(file, text);
  std::string sweep = write("tiny.yaml", kTinySweep);
  r = Cli({"sweep", sweep, "-o", dir + "/out", "--format", "json"},
          {{"KBISECT_KERNEL_DIR", k}, {"KBISECT_CACHE_DIR", dir + "/cache"}})
          .r;
  return json::parse(read_file(dir + "/out/results.json"));
}

}  // namespace

TEST_F(Spine, TwoKernelsFromTwoToolchainsLiveInOneProcess) {
  CompileCache cache(dir + "/cache");
  auto problem = make_problem({67, 45, 129}, DType::f32, 7);
  std::vector<std::unique_ptr<Executable>> exes;
  std::vector<std::string> hashes;
  for (const char* tcname : {"g++", "clang-19"}) {
    Toolchain tc = find_toolchain(tcname);
    resolve_identity(tc);
    for (const char* kname : {"matmul_tiled", "matmul_pipelined"}) {
      const KernelDecl& k = find_kernel("cpu", kname);
      CompileRequest req;
      req.kernel = &k;
      req.params = k.complete(k.configs.at(1).second);  // "small"
      req.dtype = DType::f32;
      req.toolchain = &tc;
      req.kernel_dir = kernel_dir();
      Artifact a = cache.compile(*find_backend("cpu"), req);
      hashes.push_back(a.code_hash);
      exes.push_back(find_backend("cpu")->load(a));
      exes.back()->prepare(problem->shape, problem->A, problem->B);
    }
  }
  // All four are loaded at once; each computes the right product.
  for (auto& e : exes) {
    EXPECT_GT(e->run(2).seconds, 0);
    auto chk = check_result(*problem, e->result());
    EXPECT_TRUE(chk.ok) << chk.detail;
  }
  EXPECT_NE(hashes[0], hashes[2]);  // g++ and clang-19 produce different code
}

TEST_F(Spine, SweepEndToEndSchemaAndCacheHit) {
  std::string sweep = write("tiny.yaml", kTinySweep);
  std::map<std::string, std::string> env{{"KBISECT_CACHE_DIR", dir + "/cache"}};
  Cli first({"sweep", sweep, "-o", dir + "/out1", "--format", "table,json,csv,gbench,md"}, env);
  ASSERT_EQ(first.r.exit_code, 0) << first.r.out << first.r.err;
  EXPECT_NE(first.r.out.find("matmul_pipelined"), std::string::npos) << first.r.out;
  for (const char* f : {"results.json", "results.csv", "results.gbench.json", "results.md"})
    EXPECT_TRUE(file_exists(dir + "/out1/" + f)) << f;
  json j = json::parse(read_file(dir + "/out1/results.json"));
  ASSERT_TRUE(j.contains("environment"));
  EXPECT_TRUE(j["environment"].contains("kbisect_sha"));
  ASSERT_EQ(j["environment"]["toolchains"].size(), 1u);
  EXPECT_EQ(j["environment"]["toolchains"][0]["identity"].get<std::string>().size(), 64u);
  ASSERT_EQ(j["cases"].size(), 2u);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["status"], "ok") << c.dump();
    EXPECT_EQ(c["backend"], "cpu");
    EXPECT_EQ(c["shape"]["M"], 40);
    EXPECT_EQ(c["dtype"], "f32");
    EXPECT_EQ(c["toolchain"]["name"], "g++");
    EXPECT_GT(c["static"]["code_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(c["static"]["code_hash"].get<std::string>().size(), 64u);
    EXPECT_FALSE(c["static"]["cache_hit"].get<bool>());
    EXPECT_GE(c["samples_s"].size(), 5u);
    EXPECT_GT(c["summary"]["median_s"].get<double>(), 0);
    EXPECT_GT(c["summary"]["tflops"].get<double>(), 0);
    EXPECT_TRUE(c["params"].contains("BM"));
  }
  Cli second({"sweep", sweep, "-o", dir + "/out2", "--format", "json"}, env);
  ASSERT_EQ(second.r.exit_code, 0) << second.r.err;
  json j2 = json::parse(read_file(dir + "/out2/results.json"));
  for (const auto& c : j2["cases"]) EXPECT_TRUE(c["static"]["cache_hit"].get<bool>()) << c.dump();
  EXPECT_EQ(j["cases"][0]["static"]["code_hash"], j2["cases"][0]["static"]["code_hash"]);
}

TEST_F(Spine, BadInputGivesOneLineErrorsAndExitCodes) {
  std::string bad = write("bad.yaml", "name: x\nbenchmarks:\n  - kernel: [unclosed\n");
  Cli a({"sweep", bad});
  EXPECT_EQ(a.r.exit_code, 2);
  EXPECT_NE(a.r.err.find("bad.yaml:"), std::string::npos) << a.r.err;

  std::string unknown = write("unknown.yaml", "toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_magic\n    shapes: [[8,8,8]]\n");
  Cli b({"sweep", unknown});
  EXPECT_EQ(b.r.exit_code, 2);
  EXPECT_NE(b.r.err.find("unknown.yaml:3:"), std::string::npos) << b.r.err;
  EXPECT_NE(b.r.err.find("unknown kernel 'matmul_magic'"), std::string::npos) << b.r.err;

  std::string zero = write("zero.yaml", "toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[8, 8, 0]]\n");
  Cli c({"sweep", zero});
  EXPECT_EQ(c.r.exit_code, 2);
  EXPECT_NE(c.r.err.find("K = 0 must be positive"), std::string::npos) << c.r.err;

  std::string tc = write("gone.yaml", "name: gone\nbackend: cpu\nkind: clang\ncompiler: /nonexistent/bin/clang++\n");
  std::string uses = write("uses.yaml", "toolchains: [gone.yaml]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[8,8,8]]\n");
  Cli d({"sweep", uses});
  EXPECT_EQ(d.r.exit_code, 3) << d.r.err;
  EXPECT_NE(d.r.err.find("/nonexistent/bin/clang++"), std::string::npos) << d.r.err;

  Cli e({"sweep", dir + "/missing.yaml"});
  EXPECT_EQ(e.r.exit_code, 2);
  Cli f({"inspect", "matmul_tiled", "--toolchain", "g++", "--param", "BM=oops"});
  EXPECT_EQ(f.r.exit_code, 2);
  EXPECT_NE(f.r.err.find("BM"), std::string::npos) << f.r.err;
}

TEST_F(Spine, CompileFailureFailsOnlyThatCase) {
  RunResult r;
  json j = tiny_sweep_with("matmul_tiled.cpp", "this is not C++;\n", r);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_EQ(j["cases"].size(), 2u);
  EXPECT_EQ(j["cases"][0]["status"], "failed");
  EXPECT_NE(j["cases"][0]["reason"].get<std::string>().find("compile failed"), std::string::npos);
  EXPECT_NE(j["cases"][0]["reason"].get<std::string>().find("error"), std::string::npos);  // compiler stderr tail
  EXPECT_EQ(j["cases"][1]["status"], "ok");
}

TEST_F(Spine, CrashingKernelFailsOnlyThatCase) {
  RunResult r;
  json j = tiny_sweep_with("matmul_pipelined.cpp", R"(
#include "kb_cpu_kernel.h"
extern "C" int kb_gemm(const kb_gemm_args* a) {
  volatile float* p = nullptr;
  *p = a->C[0];
  return 0;
}
)", r);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_EQ(j["cases"].size(), 2u);
  EXPECT_EQ(j["cases"][0]["status"], "ok");
  EXPECT_GT(j["cases"][0]["samples_s"].size(), 0u);  // measured before the crash: kept
  EXPECT_EQ(j["cases"][1]["status"], "failed");
  EXPECT_NE(j["cases"][1]["reason"].get<std::string>().find("signal 11"), std::string::npos) << j["cases"][1].dump();
}

TEST_F(Spine, IncorrectKernelIsNeverTimed) {
  RunResult r;
  json j = tiny_sweep_with("matmul_pipelined.cpp", R"(
#include "kb_cpu_kernel.h"
extern "C" int kb_gemm(const kb_gemm_args* a) {
  for (long i = 0; i < a->M * a->N; ++i) a->C[i] = 1.0f;
  return 0;
}
)", r);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(j["cases"][1]["status"], "incorrect");
  EXPECT_EQ(j["cases"][1]["samples_s"].size(), 0u);
  EXPECT_NE(j["cases"][1]["reason"].get<std::string>().find("tolerance"), std::string::npos);
}

TEST_F(Spine, ListShowsBackendsKernelsAndToolchains) {
  Cli r({"list"});
  ASSERT_EQ(r.r.exit_code, 0);
  EXPECT_NE(r.r.out.find("cpu    available"), std::string::npos) << r.r.out;
  EXPECT_NE(r.r.out.find("matmul_pipelined"), std::string::npos);
  EXPECT_NE(r.r.out.find("clang-19"), std::string::npos);
}
