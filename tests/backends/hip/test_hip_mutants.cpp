// HIP mutants: kernels/hip/matmul_tiled.hip with one classic GEMM bug each, on both of its paths (the
// fp32 SIMT kernel and the bf16 MFMA kernel).
// - Here (no GPU): every mutant compiles with hipcc for gfx90a and clang-19 for gfx942, and its code
//   object differs from the correct kernel's, so each edit reaches the code that would run.
// - On an AMD GPU: every mutant runs at small, square and odd shapes and is reported incorrect by the
//   full check and the fast check, while the correct kernel passes both at the same shapes.
// Transposed reads are not mutated here: both paths load 16-byte vectors along the contiguous
// dimension, and a transposed vector load would be misaligned or read outside the matrix, a fault
// rather than a wrong answer.
#include <gtest/gtest.h>

#include "tests/backends/hip/hip_fixture.h"
#include "tests/common/gpu_mutants.h"

namespace kb {
namespace {

using hiptest::hip;
using test::Edit;
using test::GpuMutant;
using test::insert_before;

const char* const kFile = "hip/matmul_tiled.hip";

std::vector<GpuMutant> f32_mutants() {
  const std::string compute = "    compute(As[cur], Bs[cur]);";
  auto drop = [&](const std::string& which) { return Edit{compute, "    if (kt != " + which + ") " + compute.substr(4)}; };
  const std::string store = "if (row < M && col < N) C[row * N + col] = acc[i][j];";
  auto guard = [&](const std::string& cond) {
    return Edit{store, "if (row < M && col < N && " + cond + ") C[row * N + col] = acc[i][j];"};
  };
  return test::tile_mutants(kFile, DType::f32, drop, "KT / 2", "KT - 1", guard("!(m0 > 0 && m0 + BM >= M)"),
                            guard("!(n0 > 0 && n0 + BN >= N)"), {
      {"tile written over its neighbour", kFile, DType::f32,
       {{store, "if (row < M && col < N && kb_block_x() != 0) C[row * N + col] = acc[i][j];\n"
                "      if (row < M && kb_block_x() == 1) C[row * N + col - BN] = acc[i][j];"}}},
      {"output tile unwritten", kFile, DType::f32,
       {insert_before("  KB_UNROLL for (int i = 0; i < TM; ++i) {\n    kb_i64 row", "  if (m0 == 0 && n0 == 0) return;\n")}},
  });
}

std::vector<GpuMutant> bf16_mutants() {
  const std::string mma = "    tile.template mma<BK>(As[cur], TileA::kLd, Bs[cur], TileB::kLd, wm * WTM, wn * WTN, lane);";
  auto drop = [&](const std::string& which) { return Edit{mma, "    if (kt != " + which + ") " + mma.substr(4)}; };
  const std::string st = "  tile.store(C, M, N, m0 + wm * WTM, n0 + wn * WTN, lane);";
  auto guard = [&](const std::string& cond) { return Edit{st, "  if (" + cond + ")\n  " + st}; };
  // The accumulators rounded to bf16 (round to nearest even) after every K tile.
  const std::string round =
      "\n    for (int i_ = 0; i_ < WTM / MF; ++i_)\n      for (int j_ = 0; j_ < WTN / MF; ++j_)\n"
      "        for (int r_ = 0; r_ < kbh::Mfma<MF>::kRegs; ++r_) {\n"
      "          unsigned u_ = __builtin_bit_cast(unsigned, float(tile.acc[i_][j_][r_]));\n"
      "          tile.acc[i_][j_][r_] = __builtin_bit_cast(float, (u_ + 0x7fffu + ((u_ >> 16) & 1u)) & 0xffff0000u);\n"
      "        }\n";
  return test::tile_mutants(kFile, DType::bf16, drop, "KT / 2", "KT - 1", guard("!(m0 > 0 && m0 + BM >= M)"),
                            guard("!(n0 > 0 && n0 + BN >= N)"), {
      {"tile written over its neighbour", kFile, DType::bf16,
       {{st, "  if (kb_block_x() != 0) " + st.substr(2) +
                 "\n  if (kb_block_x() == 1) tile.store(C, M, N, m0 + wm * WTM, n0 + wn * WTN - BN, lane);"}}},
      {"accumulation in the input dtype", kFile, DType::bf16, {test::insert_after(mma, round)}},
      {"output tile unwritten", kFile, DType::bf16, {guard("!(m0 == 0 && n0 == 0)")}},
  });
}

std::vector<GpuMutant> all_mutants() {
  auto v = f32_mutants();
  for (auto& m : bf16_mutants()) v.push_back(std::move(m));
  return v;
}

// hipcc (clang-15) for CDNA2 and clang-19 for CDNA3, where they are installed.
std::vector<Toolchain> toolchains() {
  std::vector<Toolchain> out;
  for (const char* n : {"hipcc-gfx90a", "clang19-hip-gfx942"})
    if (hiptest::have_preset(n)) out.push_back(hiptest::preset(n));
  return out;
}

// The default 128 x 128 x 32 double-buffered tiles are for 16-bit inputs: in fp32 they need 66 KiB of
// LDS, over CDNA's 64 KiB, so fp32 uses BK = 16.
Params params_for(DType d) {
  Params p;
  if (d == DType::f32) p.set("BK", int64_t(16));
  return p;
}

test::MutantBuilds& builds() {
  static test::MutantBuilds b(hip(), "matmul_tiled", all_mutants(), toolchains(), params_for);
  return b;
}

TEST(HipMutants, EveryMutantCompilesToOtherMachineCode) {
  if (toolchains().empty()) GTEST_SKIP() << "neither hipcc-gfx90a nor clang19-hip-gfx942 is installed";
  test::MutantBuilds& b = builds();
  EXPECT_EQ(b.mutants.size(), 15u);
  test::expect_mutants_change_code(b);
  if (HasFatalFailure()) return;
  for (const auto& per_tc : b.of_mutant)
    for (const auto& m : per_tc) EXPECT_EQ(m.art.entry, "kb_matmul_tiled") << m.what;
}

// Every dtype of the HIP kernels needs K % 8 == 0 and N % 8 == 0 (16-byte vector loads); M is odd, and
// each shape but the square one has a partial last row and column tile of the default 128 x 128 block.
std::vector<Shape> shapes_for(DType) { return {{255, 264, 136}, {256, 256, 256}, {1000, 1032, 520}}; }

TEST(HipMutants, EveryMutantIsIncorrectOnTheDevice) {
  const auto av = hip().available();
  if (!av.ok) GTEST_SKIP() << "no usable HIP device: " << av.reason;
  if (toolchains().empty()) GTEST_SKIP() << "neither hipcc-gfx90a nor clang19-hip-gfx942 is installed";
  test::expect_mutants_incorrect(hip(), builds(), shapes_for);
}

}  // namespace
}  // namespace kb
