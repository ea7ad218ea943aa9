#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "harness/sweep.h"

using namespace kb;

namespace {

std::string expect_input_error(const std::string& yaml) {
  try {
    parse_sweep(yaml, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for:\n" << yaml;
  return "";
}

}  // namespace

TEST(Sweep, ExpandsParamAxesDtypesShapesAndToolchains) {
  auto sw = parse_sweep(R"(
name: t
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    params: {BM: [32, 64], BK: {range: [64, 192, 64]}, NR: {pow2: [16, 32]}, MR: 4, BN: 128}
    dtypes: [f32, bf16]
    shapes: [[64, 64, 64], {M: 32, N: 48, K: 16}]
)",
                        "t.yaml");
  // 2 BM x 3 BK x 2 NR x 2 dtypes x 2 shapes
  ASSERT_EQ(sw.cases.size(), 2u * 3 * 2 * 2 * 2);
  std::set<int64_t> bks;
  for (const auto& c : sw.cases) {
    bks.insert(c.c.params.get_int("BK"));
    EXPECT_EQ(c.c.params.get_int("MR"), 4);
    EXPECT_FALSE(c.skip_reason) << *c.skip_reason;
    EXPECT_EQ(c.toolchain->name, "g++");
    EXPECT_FALSE(c.toolchain->identity.empty());
  }
  EXPECT_EQ(bks, (std::set<int64_t>{64, 128, 192}));
}

TEST(Sweep, ZipShapesAndParams) {
  auto sw = parse_sweep(R"(
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    zip: {MR: [4, 8], NR: [16, 32]}
    params: {BM: 32, BN: 64}
    shapes: {zip: {M: [16, 32, 48], N: 64, K: [8, 16, 24]}}
)",
                        "t.yaml");
  ASSERT_EQ(sw.cases.size(), 2u * 3);
  EXPECT_EQ(sw.cases[0].c.params.get_int("MR"), 4);
  EXPECT_EQ(sw.cases[0].c.params.get_int("NR"), 16);
  EXPECT_EQ(sw.cases[3].c.params.get_int("MR"), 8);
  EXPECT_EQ(sw.cases[3].c.params.get_int("NR"), 32);
  EXPECT_EQ(sw.cases[1].c.shape.M, 32);
  EXPECT_EQ(sw.cases[1].c.shape.N, 64);
  EXPECT_EQ(sw.cases[1].c.shape.K, 16);
}

TEST(Sweep, BuiltInShapeSets) {
  auto sq = load_shape_set("tritonbench-square", sweeps_dir());
  ASSERT_EQ(sq.size(), 31u);  // 256, 384, ..., 4096
  EXPECT_EQ(sq.front().M, 256);
  EXPECT_EQ(sq.back().K, 4096);
  auto llama = load_shape_set("llama", sweeps_dir());
  ASSERT_EQ(llama.size(), 17u * 12);  // M = 2^0..2^16 times 12 (K, N) pairs
  EXPECT_EQ(llama[0].M, 1);
  EXPECT_EQ(llama[0].K, 4096);
  EXPECT_EQ(llama[0].N, 12288);
  EXPECT_EQ(llama.back().M, 65536);
  EXPECT_EQ(llama.back().K, 6656);
  EXPECT_EQ(llama.back().N, 16384);
}

TEST(Sweep, UnsupportedCombinationsAreSkippedWithReason) {
  auto sw = parse_sweep(R"(
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    params: {BM: 30, MR: 4}
    shapes: [[16, 16, 16]]
)",
                        "t.yaml");
  ASSERT_EQ(sw.cases.size(), 1u);
  ASSERT_TRUE(sw.cases[0].skip_reason);
  EXPECT_NE(sw.cases[0].skip_reason->find("MR=4 does not divide BM=30"), std::string::npos);
}

TEST(Sweep, FilterAndTier) {
  const char* y = R"(
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    tier: l1
    shapes: [[16, 16, 16], [32, 32, 32]]
  - kernel: matmul_pipelined
    tier: l2
    shapes: [[16, 16, 16]]
)";
  EXPECT_EQ(parse_sweep(y, "t.yaml").cases.size(), 3u);
  EXPECT_EQ(parse_sweep(y, "t.yaml", {{}, "32x32x32", ""}).cases.size(), 1u);
  EXPECT_EQ(parse_sweep(y, "t.yaml", {{}, "", "l2"}).cases.size(), 1u);
  EXPECT_EQ(parse_sweep(y, "t.yaml", {{"clang-19"}, "", ""}).cases.at(0).toolchain->name, "clang-19");
  EXPECT_THROW(parse_sweep(y, "t.yaml", {{}, "([", ""}), InputError);
}

TEST(Sweep, ErrorsNameFileLineAndField) {
  EXPECT_NE(expect_input_error("benchmarks: [\n  {kernel: matmul_tiled,\n"), "");  // syntax
  std::string e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: nope\n    shapes: [[1,1,1]]\n");
  EXPECT_NE(e.find("t.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown kernel 'nope'"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[64, 64, 0]]\n");
  EXPECT_NE(e.find("t.yaml:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("K = 0 must be positive"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[-8, 64, 8]]\n");
  EXPECT_NE(e.find("M = -8 must be positive"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[8, 8, 8]]\n    parms: {}\n");
  EXPECT_NE(e.find("unknown field 'parms'"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    params: {XX: 1}\n    shapes: [[8, 8, 8]]\n");
  EXPECT_NE(e.find("no parameter 'XX'"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    dtypes: [int4]\n    shapes: [[8, 8, 8]]\n");
  EXPECT_NE(e.find("unknown dtype 'int4'"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nbenchmarks:\n  - kernel: matmul_tiled\n    params: {BM: {range: [64, 32]}}\n    shapes: [[8, 8, 8]]\n");
  EXPECT_NE(e.find("below start"), std::string::npos) << e;
  e = expect_input_error("toolchains: [g++]\nmeasure: {noise: lots}\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[8, 8, 8]]\n");
  EXPECT_NE(e.find("t.yaml:2:"), std::string::npos) << e;
  e = expect_input_error("toolchains: [no-such-compiler]\nbenchmarks:\n  - kernel: matmul_tiled\n    shapes: [[8, 8, 8]]\n");
  EXPECT_NE(e.find("unknown toolchain 'no-such-compiler'"), std::string::npos) << e;
  EXPECT_NE(expect_input_error("benchmarks: []\n").find("non-empty"), std::string::npos);
}

TEST(Sweep, ParseFraction) {
  EXPECT_DOUBLE_EQ(parse_fraction("0.5%", "x"), 0.005);
  EXPECT_DOUBLE_EQ(parse_fraction("0.02", "x"), 0.02);
  EXPECT_THROW(parse_fraction("abc", "x"), InputError);
  EXPECT_THROW(parse_fraction("-1%", "x"), InputError);
}
