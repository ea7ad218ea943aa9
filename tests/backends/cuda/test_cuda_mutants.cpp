// CUDA mutants: kernels/cuda/matmul_tiled.cu with one classic GEMM bug each, on both of its paths (the
// fp32 SIMT kernel and the bf16 tensor-core kernel).
// - Here (no GPU): every mutant compiles through NVRTC and nvcc for sm_90a, and its machine code differs
//   from the correct kernel's, so each edit reaches the code that would run.
// - On a GPU (scripts/gpu-check.sh runs this binary): every mutant runs at small, square and odd shapes
//   and is reported incorrect by the full check and by the fast device-side check, while the correct
//   kernel passes both at the same shapes.
#include <gtest/gtest.h>

#include "tests/backends/cuda/cuda_fixture.h"
#include "tests/common/gpu_mutants.h"

namespace kb {
namespace {

using test::Edit;
using test::GpuMutant;
using test::insert_after;
using test::insert_before;

const char* const kFile = "cuda/matmul_tiled.cu";
const char* const kMma = "cuda/kb_mma_sm80.h";  // "B read transposed" on the tensor-core path edits it

std::vector<GpuMutant> f32_mutants() {
  const std::string kloop = "  for (int k0 = 0; k0 < K; k0 += BK) {\n";
  auto drop = [&](const std::string& which) { return insert_after(kloop, "    if (k0 / BK == " + which + ") continue;\n"); };
  const std::string store = "if (col < N) C[(long long)row * N + col] = acc[i][j];";
  return test::tile_mutants(
      kFile, DType::f32, drop, "((K + BK - 1) / BK) / 2", "(K + BK - 1) / BK - 1",
      {"if (row >= M) continue;", "if (row >= M || (m0 > 0 && m0 + BM >= M)) continue;"},
      {"if (col < N) C[", "if (col < N && !(n0 > 0 && n0 + BN >= N)) C["}, {
      {"A read transposed", kFile, DType::f32, {{"A[(long long)gr * K + gk]", "A[(long long)gk * M + gr]"}}},
      {"B read transposed", kFile, DType::f32, {{"B[(long long)gk * N + gn]", "B[(long long)gn * K + gk]"}}},
      {"tile written over its neighbour", kFile, DType::f32,
       {{store, "if (col < N && kb_ctaid_x() != 0) C[(long long)row * N + col] = acc[i][j];\n"
                "      if (kb_ctaid_x() == 1) C[(long long)row * N + col - BN] = acc[i][j];"}}},
      {"output tile unwritten", kFile, DType::f32,
       {insert_before("    const int row = m0 + ty + i * TY;\n", "    if (m0 == 0 && n0 == 0) return;\n")}},
  });
}

std::vector<GpuMutant> bf16_mutants() {
  const std::string mma = "    kb_warp_mma_stage<BM, BN, BK, WM, WN>(acc,";
  auto drop = [&](const std::string& which) { return Edit{mma, "    if (kt != " + which + ")\n" + mma}; };
  const std::string st = "  kb_store_warp_tile<WM, WN>(C, acc, M, N, m0 + wm0, n0 + wn0, lane);";
  auto guard = [&](const std::string& cond) { return Edit{st, "  if (" + cond + ")\n  " + st}; };
  // The accumulators rounded to bf16 after every K tile: low-precision accumulation across tiles.
  const std::string round =
      "\n    for (int i_ = 0; i_ < WM / 16; ++i_)\n      for (int j_ = 0; j_ < WN / 8; ++j_)\n"
      "        for (int e_ = 0; e_ < 4; ++e_) {\n"
      "          unsigned u_ = __float_as_uint(acc[i_][j_][e_]);\n"
      "          acc[i_][j_][e_] = __uint_as_float((u_ + 0x7fffu + ((u_ >> 16) & 1u)) & 0xffff0000u);\n"
      "        }\n";
  return test::tile_mutants(kFile, DType::bf16, drop, "KT / 2", "KT - 1", guard("!(m0 > 0 && m0 + BM >= M)"),
                            guard("!(n0 > 0 && n0 + BN >= N)"), {
      // B's rows read with A's leading dimension (K for N), the classic swapped-ld bug. A transposed read
      // (B + gn * K + gk) cannot be a mutant here: its 16-byte cp.async chunks start at any k, and the
      // first one faulted on the H200 (CUDA_ERROR_MISALIGNED_ADDRESS ends the context for every later
      // mutant). With ld K the chunks stay aligned (K % 8 == 0) and inside B whenever K <= N, which
      // every bf16 shape below keeps, with K < N at least once (at K == N the bug is invisible).
      {"B read with leading dimension K", kMma, DType::bf16, {{"B + (long long)gk * N + gn", "B + (long long)gk * K + gn"}}},
      {"tile written over its neighbour", kFile, DType::bf16,
       {{st, "  if (kb_ctaid_x() != 0) " + st.substr(2) +
                 "\n  if (kb_ctaid_x() == 1) kb_store_warp_tile<WM, WN>(C, acc, M, N, m0 + wm0, n0 + wn0 - BN, lane);"}}},
      {"accumulation in the input dtype", kFile, DType::bf16, {insert_after(mma + " smem + (kt % STAGES) * Stage::BYTES, wm0, wn0, lane);", round)}},
      {"output tile unwritten", kFile, DType::bf16, {guard("!(m0 == 0 && n0 == 0)")}},
  });
}

std::vector<GpuMutant> all_mutants() {
  auto v = f32_mutants();
  for (auto& m : bf16_mutants()) v.push_back(std::move(m));
  return v;
}

Backend& cuda() { return cudatest::cuda_backend(); }

std::vector<Toolchain> toolchains() {
  std::vector<Toolchain> out;
  for (auto& t : cuda().presets())
    if (t.name == "nvrtc-sm90a" || t.name == "nvcc-sm90a") {
      resolve_identity(t);
      out.push_back(t);
    }
  return out;
}

test::MutantBuilds& builds() {
  static test::MutantBuilds b(cuda(), "matmul_tiled", all_mutants(), toolchains());
  return b;
}

TEST(CudaMutants, EveryMutantCompilesToOtherMachineCode) {
  test::MutantBuilds& b = builds();
  ASSERT_EQ(b.tcs.size(), 2u) << "the nvrtc-sm90a and nvcc-sm90a presets";
  EXPECT_EQ(b.mutants.size(), 18u);
  test::expect_mutants_change_code(b);
  if (HasFatalFailure()) return;
  for (const auto& per_tc : b.of_mutant)
    for (const auto& m : per_tc) EXPECT_EQ(m.art.entry, "kb_matmul") << m.what;
}

// Shapes the tensor-core path accepts (K % 8 == 0, N % 8 == 0) next to fully odd ones for fp32; each
// has a partial last row and column tile of the default 128 x 128 block, except the whole-tile one.
// bf16 keeps K <= N (the leading-dimension mutant reads inside B only then) and K < N everywhere.
std::vector<Shape> shapes_for(DType d) {
  if (d == DType::f32) return {{255, 257, 129}, {256, 256, 256}, {1000, 1024, 520}};
  return {{255, 264, 136}, {256, 384, 256}, {1000, 1024, 520}};
}

TEST(CudaMutants, EveryMutantIsIncorrectOnTheDevice) {
  if (!cudatest::driver_present()) GTEST_SKIP() << "no CUDA driver (libcuda.so.1): the mutants run in scripts/gpu-check.sh";
  if (!cuda().available().ok) GTEST_SKIP() << "no usable CUDA device: " << cuda().available().reason;
  test::expect_mutants_incorrect(cuda(), builds(), shapes_for);
}

}  // namespace
}  // namespace kb
