// The CPU kernels compiled for real: matmul_tiled and matmul_pipelined, each built by two toolchains
// (g++ and clang-19 presets) through the CompileCache and the CPU backend, all loaded in one process,
// checked against a double-precision reference on odd shapes (edge tiles everywhere), fp32 and bf16,
// several tile / STAGES / CONSUMERS configurations. Plus the parameter checks' reasons.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <exception>
#include <fstream>
#include <thread>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/toolchain.h"
#include "core/error.h"

namespace kb {
namespace {

const std::vector<std::string> kToolchains = {"g++", "clang-19"};

// Shapes chosen so that M, N and K are never multiples of any tile size used below.
const std::vector<Shape> kShapes = {{1, 1, 1}, {7, 13, 5}, {130, 67, 259}};

struct Variant {
  std::string kernel;
  Params params;  // overrides on top of the kernel's defaults
  std::vector<DType> dtypes;
};

// Built-in configs by name, plus variations that put several blocks, ring wrap-around and short
// row groups (fewer row blocks than consumers) on the shapes above.
std::vector<Variant> variants() {
  const Params tiny = {{"BM", 8}, {"BN", 16}, {"BK", 8}, {"MR", 4}, {"NR", 8}};
  auto with = [](Params p, std::initializer_list<std::pair<const std::string, ParamValue>> more) {
    for (const auto& [k, v] : more) p.set(k, v);
    return p;
  };
  std::vector<Variant> v;
  for (const char* k : {"matmul_tiled", "matmul_pipelined"}) {
    const KernelDecl& decl = find_kernel("cpu", k);
    for (const auto& [name, p] : decl.configs)
      v.push_back({k, p, name == "best" ? std::vector<DType>{DType::f32, DType::bf16} : std::vector<DType>{DType::f32}});
  }
  v.push_back({"matmul_tiled", tiny, {DType::f32}});
  v.push_back({"matmul_tiled", {{"BM", 12}, {"BN", 48}, {"BK", 32}, {"MR", 3}, {"NR", 16}}, {DType::bf16}});
  v.push_back({"matmul_pipelined", with(tiny, {{"STAGES", 2}, {"CONSUMERS", 3}}), {DType::f32, DType::bf16}});
  v.push_back({"matmul_pipelined", with(tiny, {{"STAGES", 5}, {"CONSUMERS", 2}}), {DType::f32}});
  v.push_back({"matmul_pipelined",
               {{"STAGES", 4}, {"CONSUMERS", 4}, {"BM", 24}, {"BN", 64}, {"BK", 40}, {"MR", 6}, {"NR", 16}},
               {DType::f32}});
  return v;
}

// Rounds to the nearest bf16 value (ties to even), so bf16 kernels see exactly what the reference sees.
float round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Inputs {
  std::vector<float> A, B;
  std::vector<double> ref;  // C in double
  std::vector<double> bound;  // per element: sum_k |a_ik * b_kj|, for the fp32-accumulation bound
};

Inputs make_inputs(const Shape& s, DType d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Inputs in;
  in.A.resize(size_t(s.M * s.K));
  in.B.resize(size_t(s.K * s.N));
  for (auto& x : in.A) x = d == DType::bf16 ? round_bf16(dist(gen)) : dist(gen);
  for (auto& x : in.B) x = d == DType::bf16 ? round_bf16(dist(gen)) : dist(gen);
  in.ref.assign(size_t(s.M * s.N), 0.0);
  in.bound.assign(size_t(s.M * s.N), 0.0);
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t k = 0; k < s.K; ++k) {
      const double a = in.A[size_t(i * s.K + k)];
      for (int64_t j = 0; j < s.N; ++j) {
        const double p = a * double(in.B[size_t(k * s.N + j)]);
        in.ref[size_t(i * s.N + j)] += p;
        in.bound[size_t(i * s.N + j)] += std::abs(p);
      }
    }
  return in;
}

struct Built {
  std::string label;
  Artifact art;
  std::unique_ptr<Executable> exe;
};

class CpuKernels : public ::testing::Test {
 protected:
  // Compiles every variant with every toolchain (two compiles at a time: the cold-cache cost dominates
  // this suite), then loads all artifacts into this process.
  static void SetUpTestSuite() {
    built_ = new std::vector<Built>();
    static std::vector<Toolchain> tcs;  // CompileRequest points at these
    tcs.clear();
    for (const auto& name : kToolchains) {
      try {
        tcs.push_back(find_toolchain(name));
      } catch (const Error& e) {
        missing_ += fmt::format("{} ({}); ", name, e.what());
        continue;
      }
      resolve_identity(tcs.back());
    }
    std::vector<CompileRequest> reqs;
    std::vector<std::string> labels;
    for (const auto& tc : tcs)
      for (const auto& v : variants()) {
        const KernelDecl& decl = find_kernel("cpu", v.kernel);
        for (DType d : v.dtypes) {
          CompileRequest req;
          req.kernel = &decl;
          req.params = decl.complete(v.params);
          req.dtype = d;
          req.toolchain = &tc;
          req.kernel_dir = kernel_dir();
          labels.push_back(fmt::format("{}[{}]/{}/{}", v.kernel, req.params.str(), to_string(d), tc.name));
          reqs.push_back(std::move(req));
        }
      }
    std::vector<Artifact> arts(reqs.size());
    std::vector<std::exception_ptr> errs(reqs.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      CompileCache cache;
      for (size_t i; (i = next++) < reqs.size();) {
        try {
          arts[i] = cache.compile(backend_for(*reqs[i].toolchain), reqs[i]);
        } catch (...) {
          errs[i] = std::current_exception();
        }
      }
    };
    std::thread helper(worker);
    worker();
    helper.join();
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (errs[i]) std::rethrow_exception(errs[i]);
      Built b;
      b.label = labels[i];
      b.art = arts[i];
      b.exe = backend_for(*reqs[i].toolchain).load(b.art);
      built_->push_back(std::move(b));
    }
  }
  static void TearDownTestSuite() {
    delete built_;
    built_ = nullptr;
  }
  void SetUp() override {
    if (!missing_.empty()) GTEST_SKIP() << "toolchain missing: " << missing_;
  }

  static std::vector<Built>* built_;
  static std::string missing_;
};
std::vector<Built>* CpuKernels::built_ = nullptr;
std::string CpuKernels::missing_;

TEST_F(CpuKernels, AllBuildsMatchDoubleReferenceOnOddShapes) {
  ASSERT_FALSE(built_->empty());
  uint32_t seed = 1;
  for (const auto& s : kShapes) {
    for (DType d : {DType::f32, DType::bf16}) {
      const Inputs in = make_inputs(s, d, seed++);
      for (auto& b : *built_) {
        if (b.art.dtype != d) continue;
        SCOPED_TRACE(b.label + " on " + s.str());
        b.exe->prepare(s, in.A, in.B);  // C starts poisoned with NaN
        b.exe->run(1);
        const auto C = b.exe->result();
        ASSERT_EQ(C.size(), in.ref.size());
        int bad = 0;
        for (size_t e = 0; e < C.size() && bad < 3; ++e) {
          // fp32 accumulation of K products: error <= ~K * 2^-24 * sum|a*b|; allow 4x that plus slack.
          const double tol = 4.0 * double(s.K + 2) * 0x1p-24 * in.bound[e] + 1e-30;
          if (!(std::abs(double(C[e]) - in.ref[e]) <= tol)) {
            ++bad;
            ADD_FAILURE() << fmt::format("C[{},{}] = {} but reference {} (tolerance {:.3g})", e / size_t(s.N),
                                         e % size_t(s.N), C[e], in.ref[e], tol);
          }
        }
      }
    }
  }
}

TEST_F(CpuKernels, TwoToolchainsLiveInOneProcessWithTheirOwnCode) {
  // Both toolchains' builds of the same kernel+config are loaded at once and produce distinct code.
  for (const auto& a : *built_) {
    for (const auto& b : *built_) {
      if (a.art.kernel != b.art.kernel || !(a.art.params == b.art.params) || a.art.dtype != b.art.dtype ||
          a.art.toolchain == b.art.toolchain)
        continue;
      EXPECT_NE(a.art.toolchain_identity, b.art.toolchain_identity);
      EXPECT_NE(a.art.binary_path, b.art.binary_path);
      EXPECT_NE(a.art.code_hash, b.art.code_hash) << a.label << " vs " << b.label;
      EXPECT_GT(a.art.code_bytes, 0);
    }
  }
  // Interleaved calls into the two loaded builds give the same answer (to fp32 rounding).
  const Shape s{33, 45, 70};
  const Inputs in = make_inputs(s, DType::f32, 99);
  std::vector<std::vector<float>> outs;
  for (auto& b : *built_)
    if (b.art.kernel == "matmul_pipelined" && b.art.dtype == DType::f32) {
      b.exe->prepare(s, in.A, in.B);
      b.exe->run(2);
      outs.push_back(b.exe->result());
    }
  ASSERT_GE(outs.size(), 2u);
  for (size_t e = 0; e < outs[0].size(); ++e)
    for (size_t o = 1; o < outs.size(); ++o) ASSERT_NEAR(outs[o][e], outs[0][e], 1e-4 * (1 + in.bound[e]));
}

TEST_F(CpuKernels, RepeatedCallsDoNotAccumulateIntoC) {
  // The first K slice overwrites C: running twice must give the same result, not twice the result.
  const Shape s{50, 70, 300};
  const Inputs in = make_inputs(s, DType::f32, 7);
  for (auto& b : *built_) {
    if (b.art.dtype != DType::f32) continue;
    SCOPED_TRACE(b.label);
    b.exe->prepare(s, in.A, in.B);
    b.exe->run(3);
    const auto C = b.exe->result();
    for (size_t e = 0; e < C.size(); e += 97) ASSERT_NEAR(C[e], in.ref[e], 1e-4 * (1 + in.bound[e]));
  }
}

// How many private object copies this process has mapped (/proc/self/maps): every CPU load maps its own
// "kb-load-..." copy, removed from the disk once mapped.
size_t private_code_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> files;
  for (std::string line; std::getline(maps, line);)
    if (const size_t at = line.find("/kb-load-"); at != std::string::npos) files.insert(line.substr(at));
  return files.size();
}

TEST_F(CpuKernels, EveryLoadHasItsOwnCodeMappingAndBuffers) {
  // ab and the bisector's blocks replicate over loads (placement luck): a second load of the same artifact
  // must not share the first one's code pages (dlopen of one path returns one mapping) nor its buffers.
  const Artifact& art = built_->front().art;
  Backend* be = find_backend("cpu");
  ASSERT_NE(be, nullptr);
  const size_t before = private_code_mappings();
  auto one = be->load(art);
  auto two = be->load(art);
  EXPECT_EQ(private_code_mappings(), before + 2);
  const Shape s{20, 30, 40};
  const Inputs in = make_inputs(s, art.dtype, 5);
  one->prepare(s, in.A, in.B);
  two->prepare(s, in.A, in.B);
  one->run(1);
  two->run(1);
  EXPECT_EQ(one->result(), two->result());
  one.reset();
  EXPECT_EQ(private_code_mappings(), before + 1);  // unloading unmaps that copy only
  EXPECT_EQ(two->result().size(), size_t(s.M * s.N));
}

TEST_F(CpuKernels, EmptyShapeIsRejectedByTheKernel) {
  const Shape s{0, 4, 4};
  for (auto& b : *built_) {
    SCOPED_TRACE(b.label);
    EXPECT_THROW(b.exe->prepare(s, {}, std::vector<float>(16, 1.0f)), Error);
  }
}

// --- parameter checks (no compiler needed) ---

std::string why(const char* kernel, const Params& overrides) {
  const KernelDecl& k = find_kernel("cpu", kernel);
  auto r = k.check_params(k.complete(overrides), DType::f32, "");
  return r ? *r : std::string();
}

TEST(CpuKernelParams, BuiltInConfigsPass) {
  for (const char* name : {"matmul_tiled", "matmul_pipelined"}) {
    const KernelDecl& k = find_kernel("cpu", name);
    ASSERT_FALSE(k.configs.empty());
    EXPECT_EQ(k.configs.front().first, "best");
    for (const auto& [cfg, p] : k.configs) EXPECT_EQ(why(name, p), "") << name << " config " << cfg;
    EXPECT_EQ(why(name, {}), "") << name << " defaults";
  }
}

TEST(CpuKernelParams, RejectionsNameTheParameter) {
  EXPECT_NE(why("matmul_tiled", {{"BM", 96}, {"MR", 5}}).find("MR=5 does not divide BM=96"), std::string::npos);
  EXPECT_NE(why("matmul_tiled", {{"BN", 100}, {"NR", 32}}).find("NR=32 does not divide BN=100"), std::string::npos);
  EXPECT_NE(why("matmul_tiled", {{"BK", 0}}).find("BK=0"), std::string::npos);
  EXPECT_NE(why("matmul_tiled", {{"MR", 16}, {"NR", 64}, {"BM", 64}, {"BN", 64}}).find("16x64"), std::string::npos);
  EXPECT_NE(why("matmul_tiled", {{"BM", 4096}, {"BK", 4096}, {"MR", 4}}).find("packed panels"), std::string::npos);
  EXPECT_NE(why("matmul_pipelined", {{"STAGES", 1}}).find("STAGES=1"), std::string::npos);
  EXPECT_NE(why("matmul_pipelined", {{"CONSUMERS", 0}}).find("CONSUMERS=0"), std::string::npos);
  EXPECT_NE(why("matmul_pipelined", {{"CONSUMERS", 64}}).find("CONSUMERS=64"), std::string::npos);
  EXPECT_NE(why("matmul_pipelined", {{"BM", 96}, {"MR", 7}}).find("MR=7"), std::string::npos);
  EXPECT_NE(why("matmul_pipelined", {{"STAGES", 8}, {"CONSUMERS", 8}, {"BM", 960}, {"BK", 1024}, {"BN", 1024}})
                .find("ring"),
            std::string::npos);
}

TEST(CpuKernelParams, BackendRefusesToCompileRejectedParams) {
  Toolchain tc;
  try {
    tc = find_toolchain("g++");
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  resolve_identity(tc);
  const KernelDecl& k = find_kernel("cpu", "matmul_pipelined");
  CompileRequest req;
  req.kernel = &k;
  req.params = k.complete({{"STAGES", 1}});
  req.toolchain = &tc;
  req.kernel_dir = kernel_dir();
  CompileCache cache;
  try {
    cache.compile(backend_for(tc), req);
    FAIL() << "compiled STAGES=1";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("STAGES=1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kb
