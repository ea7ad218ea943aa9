// The correctness check (harness/check.h) against the bugs a GEMM check must catch.
// - The tolerance is safe: every declared config of every CPU kernel passes for f32 and bf16 at K from 1
//   to 16384 (real compiles and runs).
// - Real mutants: copies of the CPU kernel with one classic bug each (written here, never in kernels/)
//   are compiled, run and reported incorrect at small and odd shapes, by the full and the fast check.
// - Every mutant at the shapes users sweep (tritonbench square 256..4096, the llama (K, N) pairs at M=16
//   and M=4096, odd shapes): the mutant's arithmetic is emulated in fp32 at the elements the fast check
//   compares exactly; an error beyond the tolerance there fails the fast check, and, those elements
//   being a subset of all, the full one. NaN-producing mutants are checked on the whole output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>

#include <Eigen/Core>
#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/toolchain.h"
#include "core/fsutil.h"
#include "harness/check.h"
#include "harness/reference.h"
#include "tests/common/mutants.h"

using namespace kb;
namespace fs = std::filesystem;

namespace {

enum class Mutant { none, drop_first, drop_middle, drop_last, edge_rows, edge_cols, a_transposed, b_transposed,
                    tile_over_neighbour, input_dtype_acc, unwritten };
const std::vector<std::pair<Mutant, const char*>> kMutants = {
    {Mutant::drop_first, "K tile dropped (first)"}, {Mutant::drop_middle, "K tile dropped (middle)"},
    {Mutant::drop_last, "K tile dropped (last)"},   {Mutant::edge_rows, "last row tile not written"},
    {Mutant::edge_cols, "last column tile not written"}, {Mutant::a_transposed, "A read transposed"},
    {Mutant::b_transposed, "B read transposed"},    {Mutant::tile_over_neighbour, "tile written over its neighbour"},
    {Mutant::input_dtype_acc, "accumulation in the input dtype"}, {Mutant::unwritten, "output tile unwritten"}};

// The tiling the emulated kernel uses (a GPU-like 64-deep K tile, 32x64 output tiles).
constexpr int64_t BM = 32, BN = 64, BK = 64;

float to_bf16(float x) { return static_cast<float>(Eigen::bfloat16(x)); }

// Whether mutant m leaves C[i][j] unwritten (the output is poisoned with NaN before the run).
bool unwritten_at(const Shape& s, Mutant m, int64_t i, int64_t j) {
  if (m == Mutant::edge_rows) return i >= (s.M - 1) / BM * BM;
  if (m == Mutant::edge_cols) return j >= (s.N - 1) / BN * BN;
  if (m == Mutant::unwritten) return i < BM && j < BN;
  return false;
}

// What a BK-blocked fp32-accumulating kernel with mutant `m` writes at C[i][j] (NaN: never written).
float emulate(const GemmProblem& p, Mutant m, int64_t i, int64_t j) {
  const Shape& s = p.shape;
  const int64_t nb = (s.K + BK - 1) / BK;
  if (unwritten_at(s, m, i, j)) return NAN;
  // The first output tile is overwritten by its neighbour's values (along N, or along M when N is narrow).
  if (m == Mutant::tile_over_neighbour && i < BM && j < BN)
    return s.N >= 2 * BN ? emulate(p, Mutant::none, i, j + BN) : emulate(p, Mutant::none, std::min(i + BM, s.M - 1), j);
  int64_t skip = -1;
  if (m == Mutant::drop_first) skip = 0;
  if (m == Mutant::drop_middle) skip = nb / 2;
  if (m == Mutant::drop_last) skip = nb - 1;
  const bool low = m == Mutant::input_dtype_acc;
  float c = 0;
  bool first = true;
  for (int64_t b = 0; b < nb; ++b) {
    if (b == skip) continue;
    float acc = 0;
    for (int64_t k = b * BK; k < std::min(s.K, (b + 1) * BK); ++k) {
      const float a = m == Mutant::a_transposed ? p.A[size_t((k * s.M + i) % (s.M * s.K))] : p.A[size_t(i * s.K + k)];
      const float bv = m == Mutant::b_transposed ? p.B[size_t((j * s.K + k) % (s.K * s.N))] : p.B[size_t(k * s.N + j)];
      acc += a * bv;
      if (low) acc = to_bf16(acc);
    }
    c = first ? acc : c + acc;
    if (low) c = to_bf16(c);
    first = false;
  }
  return c;
}

}  // namespace

// ---- the tolerance -----------------------------------------------------------------------------------

TEST(Tolerance, DerivedFromTheArithmetic) {
  const double u = std::ldexp(1.0, -24);
  EXPECT_NEAR(tolerance_for(DType::f32, 1), 2 * u / (1 - 2 * u), 1e-20);  // one product rounding, one add
  EXPECT_NEAR(tolerance_for(DType::bf16, 11008), 11008 * u / (1 - 11008 * u), 1e-15);
  EXPECT_GT(tolerance_for(DType::f32, 64), tolerance_for(DType::bf16, 64));  // f32 products are rounded
  EXPECT_NEAR(tolerance_for(DType::bf16, 4096, {2, {}}) / tolerance_for(DType::bf16, 4096), 2.0, 1e-3);
  EXPECT_GT(tolerance_for(DType::bf16, 64, {1, DType::bf16}), std::ldexp(1.0, -8));  // bf16 output rounding
  // The dropped 64-deep K tile at 256x256x11008 bf16 has an error of about 4e-3: far above this.
  EXPECT_LT(tolerance_for(DType::bf16, 11008), 1e-3);
}

// ---- every mutant at the shapes users sweep (emulated) -------------------------------------------------

std::vector<Shape> swept_shapes() {
  std::vector<Shape> v;
  for (int64_t n = 256; n <= 4096; n += 128) v.push_back({n, n, n});
  const int64_t K[] = {4096, 4096, 4096, 11008, 8192, 1024, 8192, 3584, 16384, 2048, 16384, 6656};
  const int64_t N[] = {12288, 4096, 22016, 4096, 1280, 8192, 7168, 8192, 2304, 16384, 13312, 16384};
  for (int64_t m : {16, 4096})
    for (int t = 0; t < 12; ++t) v.push_back({m, N[t], K[t]});
  v.push_back({1000, 1024, 520});
  v.push_back({255, 257, 129});
  return v;
}

bool produces_nan(Mutant m) { return m == Mutant::edge_rows || m == Mutant::edge_cols || m == Mutant::unwritten; }

// Whether mutant m can change C[i][j] (so the search for a failing element looks only there).
bool affects(Mutant m, int64_t i, int64_t j) { return m != Mutant::tile_over_neighbour || (i < BM && j < BN); }

// Worst normalized error of the emulated mutant over the exactly checked elements (stops at the first
// element beyond `stop`; every `stride`-th element only).
double worst_exact_error(const GemmProblem& p, Mutant m, double stop, size_t stride = 1) {
  double worst = 0;
  for (size_t n = 0; n < p.exact.size(); n += stride) {
    const RefElement& e = p.exact[n];
    if (!affects(m, e.i, e.j)) continue;
    const float c = emulate(p, m, e.i, e.j);
    const double err = std::isfinite(c) ? std::fabs(double(c) - e.ref) / std::max(e.scale, 1e-300) : INFINITY;
    worst = std::max(worst, err);
    if (worst > stop) break;
  }
  return worst;
}

TEST(Mutants, EveryMutantIsCaughtAtTheSweptShapes) {
  ReferenceOptions fast;
  fast.full_max_flop = 0;  // the fast reference at every shape (the full check's elements are a superset)
  int caught = 0, total = 0;
  for (const Shape& s : swept_shapes()) {
    const auto p = make_problem(s, DType::bf16, 42, fast);
    const double tol = tolerance_for(DType::bf16, s.K);
    // A correct BK-blocked fp32 kernel is within the tolerance (at 2,000 of the exactly checked elements).
    EXPECT_LE(worst_exact_error(*p, Mutant::none, INFINITY, std::max<size_t>(1, p->exact.size() / 2000)), tol) << s.str();
    for (const auto& [m, name] : kMutants) {
      ++total;
      if (produces_nan(m)) {
        std::vector<float> C(size_t(s.M * s.N), 0.0f);
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t j = 0; j < s.N; ++j)
            if (unwritten_at(s, m, i, j)) C[size_t(i * s.N + j)] = NAN;
        const Check chk = check_result(*p, C);
        EXPECT_FALSE(chk.ok) << name << " at " << s.str();
        EXPECT_NE(chk.detail.find("non-finite"), std::string::npos) << chk.detail;
        caught += !chk.ok;
        continue;
      }
      const double worst = worst_exact_error(*p, m, 1.01 * tol);
      EXPECT_GT(worst, 1.01 * tol) << name << " at " << s.str() << " bf16: worst exact error " << worst
                                   << " vs tolerance " << tol;
      caught += worst > 1.01 * tol;
    }
  }
  std::cout << fmt::format("mutants caught: {} of {} (mutant x shape, bf16)\n", caught, total);
}

// The fast check on a whole emulated output agrees with the full one, on a correct and a mutated result.
TEST(Mutants, FastAndFullAgreeOnWholeOutputs) {
  const Shape s{255, 257, 129};
  ReferenceOptions fast;
  fast.full_max_flop = 0;
  const auto pf = make_problem(s, DType::bf16, 42);
  const auto pq = make_problem(s, DType::bf16, 42, fast);
  ASSERT_TRUE(pf->full);
  ASSERT_FALSE(pq->full);
  for (Mutant m : {Mutant::none, Mutant::drop_last, Mutant::tile_over_neighbour, Mutant::b_transposed}) {
    std::vector<float> C(size_t(s.M * s.N));
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) C[size_t(i * s.N + j)] = emulate(*pf, m, i, j);
    const Check full = check_result(*pf, C), quick = check_result(*pq, C);
    EXPECT_EQ(full.method, "full");
    EXPECT_EQ(quick.method, "fast");
    EXPECT_EQ(full.ok, m == Mutant::none) << full.detail;
    EXPECT_EQ(quick.ok, m == Mutant::none) << quick.detail;
    if (m == Mutant::none) EXPECT_LE(quick.projection_ratio, 1.0);
  }
}

// ---- real CPU kernels ------------------------------------------------------------------------------

namespace {

const Toolchain& cpu_toolchain() {
  static Toolchain tc = [] {
    Toolchain t = find_toolchain("clang-19");
    resolve_identity(t);
    return t;
  }();
  return tc;
}

// Compiles `kernel` with params from `kernel_root` (a kernel directory) and runs it once on problem p.
std::vector<float> run_cpu(const std::string& kernel_root, const std::string& kernel, const Params& params,
                           const GemmProblem& p) {
  static CompileCache cache(temp_dir("kb-correctness-cache"));
  const KernelDecl& k = find_kernel("cpu", kernel);
  CompileRequest req;
  req.kernel = &k;
  req.params = k.complete(params);
  req.dtype = p.dtype;
  req.toolchain = &cpu_toolchain();
  req.kernel_dir = kernel_root;
  Backend& be = *find_backend("cpu");
  auto exe = be.load(cache.compile(be, req));
  exe->prepare(p.shape, p.A, p.B);
  exe->run(1);
  return exe->result();
}

}  // namespace

// No correct kernel fails: every declared config of every CPU kernel, f32 and bf16, K from 1 to 16384,
// through the full check and the fast one.
TEST(ToleranceFloor, EveryCpuKernelConfigPassesAtEveryK) {
  ReferenceOptions fast;
  fast.full_max_flop = 0;
  int runs = 0;
  double worst_ratio = 0;
  for (const char* kname : {"matmul_tiled", "matmul_pipelined"}) {
    const KernelDecl& k = find_kernel("cpu", kname);
    for (const auto& [cname, params] : k.configs)
      for (DType d : {DType::f32, DType::bf16})
        for (int64_t K : {1, 2, 3, 7, 64, 129, 1000, 4096, 16384}) {
          const Shape s{19, 37, K};
          const auto full = make_problem(s, d, 42);
          const auto quick = make_problem(s, d, 42, fast);
          const auto C = run_cpu(kernel_dir(), kname, params, *full);
          const Check a = check_result(*full, C), b = check_result(*quick, C);
          EXPECT_TRUE(a.ok) << kname << "/" << cname << " " << to_string(d) << " K=" << K << ": " << a.detail;
          EXPECT_TRUE(b.ok) << kname << "/" << cname << " " << to_string(d) << " K=" << K << ": " << b.detail;
          worst_ratio = std::max(worst_ratio, a.max_error / a.tolerance);
          ++runs;
        }
  }
  std::cout << fmt::format("{} correct runs; worst error / tolerance = {:.3f}\n", runs, worst_ratio);
}

namespace {

using test::Edit;
using test::mutant_tree;

struct RealMutant {
  const char* name;
  const char* file;
  std::vector<Edit> edits;
  bool square_only = false;  // reads out of bounds unless M == K (A read transposed)
  bool bf16_only = false;    // a bug only in low precision (f32 accumulating in f32 is right)
};

std::vector<RealMutant> real_mutants() {
  const std::string kloop = "        const int64_t kc = std::min(BK, K - k0);\n";
  const std::string call =
      "          block_multiply(pa.data(), pb.data(), C, N, i0, j0, mc, nc, kc, /*accumulate=*/k0 > 0);";
  auto drop = [&](const char* which) {
    return Edit{kloop, kloop + "        if (k0 / BK == " + which + ") continue;\n"};
  };
  const Edit row_tile{"          const int64_t mc = std::min(BM, M - i0);\n",
                      "          const int64_t mc = std::min(BM, M - i0);\n          if (i0 > 0 && i0 + BM >= M) continue;\n"};
  const Edit col_tile{"      const int64_t nc = std::min(BN, N - j0);\n",
                      "      const int64_t nc = std::min(BN, N - j0);\n      if (j0 > 0 && j0 + BN >= N) continue;\n"};
  const Edit bf16_acc{"acc[r][c] += av * bk[c];",
                      "{ float t_ = acc[r][c] + av * bk[c]; uint32_t u_; memcpy(&u_, &t_, 4); "
                      "u_ = (u_ + 0x7fffu + ((u_ >> 16) & 1u)) & 0xffff0000u; memcpy(&t_, &u_, 4); acc[r][c] = t_; }"};
  return {
      // The first tile is skipped and accumulation starts one tile late (not on NaN-poisoned C).
      {"K tile dropped (first)", "cpu/matmul_tiled.cpp", {drop("0"), {"/*accumulate=*/k0 > 0", "/*accumulate=*/k0 > BK"}}},
      {"K tile dropped (middle)", "cpu/matmul_tiled.cpp", {drop("((K + BK - 1) / BK) / 2")}},
      {"K tile dropped (last)", "cpu/matmul_tiled.cpp", {drop("(K + BK - 1) / BK - 1")}},
      {"last row tile not written", "cpu/matmul_tiled.cpp", {row_tile}},
      {"last column tile not written", "cpu/matmul_tiled.cpp", {col_tile}},
      {"A read transposed", "cpu/gemm_common.h", {{"load(A, (i0 + s + r) * lda + k0 + k)", "load(A, (k0 + k) * lda + i0 + s + r)"}},
       true},
      {"tile written over its neighbour", "cpu/matmul_tiled.cpp",
       {{call, call + "\n          if (j0 == BN) block_multiply(pa.data(), pb.data(), C, N, i0, 0, mc, std::min(nc, BN), kc, "
                      "k0 > 0);"}}},
      {"accumulation in the input dtype", "cpu/gemm_common.h", {bf16_acc}, false, true},
      {"output tile unwritten", "cpu/matmul_tiled.cpp", {{call, "          if (!(i0 == 0 && j0 == 0))\n  " + call}}},
  };
}

}  // namespace

// Real mutants, compiled and run: each is reported incorrect by the full and the fast check.
TEST(Mutants, RealCpuMutantsAreIncorrect) {
  const std::string dir = temp_dir("kb-mutants");
  const Params small = {{"BM", 32}, {"BN", 64}, {"BK", 64}, {"MR", 4}, {"NR", 16}};
  ReferenceOptions fast;
  fast.full_max_flop = 0;
  for (const auto& m : real_mutants()) {
    const std::string root = mutant_tree(dir, m.file, m.edits);
    for (const Shape& s : std::vector<Shape>{{255, 257, 129}, {256, 256, 256}, {1000, 1024, 520}}) {
      if (m.square_only && s.M != s.K) continue;
      const DType d = m.bf16_only ? DType::bf16 : DType::f32;
      const auto full = make_problem(s, d, 42);
      const auto quick = make_problem(s, d, 42, fast);
      const auto C = run_cpu(root, "matmul_tiled", small, *full);
      const Check a = check_result(*full, C), b = check_result(*quick, C);
      EXPECT_FALSE(a.ok) << m.name << " at " << s.str() << " passed the full check";
      EXPECT_FALSE(b.ok) << m.name << " at " << s.str() << " passed the fast check";
      std::cout << fmt::format("{:34} {:>14} full: {} fast: {}\n", m.name, s.str(), a.detail.substr(0, 60),
                               b.detail.substr(0, 60));
    }
  }
  remove_tree(dir);
}
