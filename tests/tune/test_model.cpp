// The static model of `kbisect tune` (tune/model.h, tune/target.h): its terms on known numbers (the worked
// example of docs/tune.md), and on real Triton 3.5.1 compiles for sm_90a: Triton's published matmul-tutorial
// configurations over the LLaMA shapes, and a user's GEMM with a bias and leaky-ReLU epilogue
// (examples/tune), whose big tiles must be kept and ranked first.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/sweep.h"
#include "tune/model.h"
#include "tune/prune.h"
#include "tune/target.h"
#include "tune/tuner.h"
#include "tests/common/test_tmp.h"

namespace kb::tune {
namespace {

using nlohmann::json;

TEST(TuneTarget, FactsPerTargetAndDevice) {
  ASSERT_TRUE(device_facts("sm_90a"));
  EXPECT_EQ(device_facts("sm_90a")->device, "H100 SXM5");
  EXPECT_EQ(device_facts("sm_90")->device, "H100 SXM5");
  ASSERT_TRUE(device_facts("sm_90a", "h200"));
  EXPECT_EQ(device_facts("sm_90a", "H200")->hbm_bytes_per_s, 4.8e12);
  EXPECT_EQ(device_facts("sm_80")->sms, 108);
  EXPECT_EQ(device_facts("sm_100a")->sms, 148);
  EXPECT_EQ(device_facts("gfx942")->sms, 304);
  EXPECT_EQ(device_facts("gfx942")->max_smem_per_block, 65536);
  EXPECT_FALSE(device_facts("sm_75"));
  EXPECT_FALSE(device_facts("sm_90a", "MI300X"));  // a device of another target
  // The published peak rates agree with SMs x flop per clock x clock, within 1%.
  for (const auto& d : all_device_facts()) {
    const double per_clk = d.tensor_f16_flops / (d.sms * d.clock_hz);
    EXPECT_NEAR(per_clk / std::exp2(std::round(std::log2(per_clk))), 1.0, 0.01) << d.device << ": " << per_clk;
  }
}

TEST(TuneModel, CompileOptionsAreReadThroughOneAccessor) {
  EXPECT_EQ(option_param("num_warps"), "opt.num_warps");
  EXPECT_EQ(option_param("num_stages"), "opt.num_stages");
  Params p{{"BM", int64_t(128)}, {"BN", int64_t(256)}, {"BK", int64_t(64)}};
  p.set(option_param("num_warps"), int64_t(8));
  p.set(option_param("num_stages"), int64_t(3));
  std::string why;
  auto g = gemm_view(p, Shape{4096, 4096, 4096}, DType::f16, {}, 32, &why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->warps, 8);
  EXPECT_EQ(g->stages, 3);
  // The same through the other names kernels use; warps from the block's threads when no option says.
  auto g2 = gemm_view({{"BLOCK_SIZE_M", int64_t(64)}, {"BLOCK_SIZE_N", int64_t(32)}, {"BLOCK_SIZE_K", int64_t(32)},
                       {"STAGES", int64_t(5)}}, Shape{1, 4096, 4096}, DType::bf16, {{"threads_per_block", 64}}, 32, &why);
  ASSERT_TRUE(g2) << why;
  EXPECT_EQ(g2->bm * g2->bn * g2->bk, 64 * 32 * 32);
  EXPECT_EQ(g2->warps, 2);
  EXPECT_EQ(g2->stages, 5);
  // A user kernel's shape: M, N and K are its values.
  Shape user;
  user.label = "big";
  user.values = {{"M", 2048}, {"N", 2048}, {"K", 1024}};
  ASSERT_TRUE(gemm_view(p, user, DType::f16, {}, 32, &why));
  user.values = {{"n_rows", 2048}};
  EXPECT_FALSE(gemm_view(p, user, DType::f16, {}, 32, &why));
  EXPECT_EQ(why, "shape big does not name M, N and K");
  EXPECT_FALSE(gemm_view({{"BLOCK", int64_t(1024)}}, Shape{64, 64, 64}, DType::f16, {}, 32, &why));
  EXPECT_NE(why.find("no tile parameters"), std::string::npos);
}

// docs/tune.md's worked example: the example GEMM's default config (128x128x64, 8 warps, 3 stages) at 4096^3
// f16 on an H100 SXM5, with its real sm_90a metrics (Triton 3.5.1: 110 registers, 96 KiB of shared memory,
// occupancy 0.25 = 2 blocks of 8 warps).
TEST(TuneModel, WorkedExample) {
  const DeviceFacts& h100 = *device_facts("sm_90a");
  GemmView g{4096, 4096, 4096, 128, 128, 64, 8, 3, 2, 2};
  Metrics m{{"registers", 110}, {"smem_bytes", 98304}, {"occupancy", 0.25}, {"threads_per_block", 256}, {"num_warps", 8}};
  Estimate e = estimate_gemm(h100, g, DType::f16, m);
  EXPECT_DOUBLE_EQ(e.bytes_per_flop, 1.0 / 64);           // (128 + 128) x 64 x 2 B over 2 x 128 x 128 x 64 flop
  EXPECT_EQ(e.tiles, 1024);                               // 32 x 32
  EXPECT_EQ(e.tiles_per_sm, 8);                           // ceil(1024 / 132)
  EXPECT_NEAR(e.wave_efficiency, 1024.0 / (132 * 8), 1e-12);
  EXPECT_EQ(e.resident, 2);                               // 0.25 x 64 warps / 8
  EXPECT_EQ(e.stages_held, 3);                            // 98304 B = 3 x 32 KiB
  EXPECT_DOUBLE_EQ(e.inflight_bytes, 2 * 32768);          // the 2 stages ahead of the one multiplied
  EXPECT_EQ(e.bound, "L2 bandwidth");                     // 47.4 B/clk x 1.83 GHz / (1/64 B/flop) = 74% of 7.50 TFLOP/s
  EXPECT_NEAR(e.time_s, 196.0e-6, 0.5e-6);                // 4 rounds x 2 tiles x 134.2 Mflop / 5.55 TFLOP/s + 4 x 656 ns
  EXPECT_NEAR(e.tflops, 701, 2);
  EXPECT_DOUBLE_EQ(e.latency_cover, 1.0);
  // Two stages (16 KiB of BK = 32 in flight per block) no longer hide the latency: latency-bound, slower.
  GemmView shallow = g;
  shallow.bk = 32, shallow.stages = 2;
  Estimate s = estimate_gemm(h100, shallow, DType::f16, {{"smem_bytes", 32768}, {"occupancy", 0.25}});
  EXPECT_EQ(s.bound, "latency");
  EXPECT_LT(s.latency_cover, 0.6);
  EXPECT_GT(s.time_s, e.time_s * 1.5);
  // A loop Triton did not pipeline holds one stage in shared memory whatever num_stages says.
  Estimate flat = estimate_gemm(h100, g, DType::f16, {{"smem_bytes", 32768}, {"occupancy", 0.25}});
  EXPECT_EQ(flat.stages_held, 1);
  EXPECT_NE(describe(flat).find("shared memory holds 1 of 3 stages (the K loop is not pipelined)"), std::string::npos)
      << describe(flat);
  // Spilling moves bytes per flop: 276 B per thread of 256 threads per K step.
  Estimate spilled = estimate_gemm(h100, g, DType::f16, {{"smem_bytes", 98304}, {"occupancy", 0.25},
                                                         {"spill_stores", 156}, {"spill_loads", 120}});
  EXPECT_NEAR(spilled.bytes_per_flop, (32768 + 276.0 * 256) / (2.0 * 128 * 128 * 64), 1e-12);
  EXPECT_GT(spilled.time_s, 2 * e.time_s);
}

// Wave quantization: 2048^2 in 128x128 tiles is 256 tiles, 2 on the busiest SM of 132 (97% used); in
// 128x256 tiles 128 tiles leave 4 SMs idle but each SM runs one. With a thin K, writing C to device memory
// takes longer than the multiplications: device memory is the bound.
TEST(TuneModel, WavesAndDeviceMemory) {
  const DeviceFacts& h100 = *device_facts("sm_90a");
  Metrics one{{"occupancy", 0.125}};
  Estimate a = estimate_gemm(h100, {2048, 2048, 1024, 128, 128, 64, 8, 3, 2, 2}, DType::f16, one);
  EXPECT_EQ(a.tiles, 256);
  EXPECT_EQ(a.tiles_per_sm, 2);
  Estimate b = estimate_gemm(h100, {2048, 2048, 1024, 128, 256, 64, 8, 3, 2, 2}, DType::f16, one);
  EXPECT_EQ(b.tiles, 128);
  EXPECT_EQ(b.tiles_per_sm, 1);
  EXPECT_NEAR(b.wave_efficiency, 128.0 / 132, 1e-12);
  Estimate thin = estimate_gemm(h100, {16384, 16384, 32, 128, 128, 64, 8, 3, 2, 2}, DType::f16, {{"occupancy", 0.25}});
  EXPECT_EQ(thin.bound, "HBM");
  EXPECT_NEAR(thin.time_s, (16384.0 * 32 * 2 + 16384.0 * 16384) * 2 / 3.35e12, 1e-9);
}

bool triton_351() {
  return file_exists(triton::triton_env_root() + "/triton-3.5.1/bin/python");
}

TuneOptions sm90a_f16(const std::string& kernel) {
  TuneOptions o;
  o.kernel = kernel;
  o.toolchain = "triton-3.5.1-sm90a";
  o.dtype = DType::f16;
  o.jobs = 2;
  return o;
}

const std::string kExample = KBISECT_SOURCE_DIR "/examples/tune/gemm_bias_leaky_relu.yaml";

std::string tile_of(const Params& p) {
  return fmt::format("{}x{}x{} w{} s{}", p.get_int("BM"), p.get_int("BN"), p.get_int("BK"),
                     p.get_int(option_param("num_warps")), p.get_int(option_param("num_stages")));
}

// Triton's matmul tutorial (python/tutorials/03-matrix-multiplication.py) lists 8 CUDA autotune configs
// (GROUP_SIZE_M 8 each). Compiled for sm_90a in the tutorial's kernel with the epilogue the tutorial suggests
// fusing (examples/tune: one program per tile in grouped order, leaky ReLU, here with a bias), and estimated
// for every LLaMA shape and 4096^3: none is pruned (none breaks a hard limit), each is a GEMM the model reads,
// and at 4096^3 the tutorial's first, 128x256x64 with 8 warps and 3 stages, comes first.
TEST(TuneEvidence, TritonTutorialConfigsOnLlamaShapes) {
  if (!triton_351()) GTEST_SKIP() << "Triton 3.5.1 is not installed: run scripts/install-deps";
  const std::vector<std::array<int64_t, 5>> tutorial = {{128, 256, 64, 3, 8}, {64, 256, 32, 4, 4}, {128, 128, 32, 4, 4},
                                                        {128, 64, 32, 4, 4},  {64, 128, 32, 4, 4}, {128, 32, 32, 4, 4},
                                                        {64, 32, 32, 5, 2},   {32, 64, 32, 5, 2}};
  std::vector<Params> points;
  for (const auto& [m, n, k, stages, warps] : tutorial)
    points.push_back({{"BM", m}, {"BN", n}, {"BK", k}, {"GROUP_M", int64_t(8)}, {option_param("num_stages"), stages},
                      {option_param("num_warps"), warps}});
  TuneOptions o = sm90a_f16(triton::load_user_kernel(kExample).name);
  // The user kernel's shapes are named, with M, N and K among their values.
  auto named = [](const Shape& s) {
    Shape u;
    u.label = s.str();
    u.values = {{"M", s.M}, {"N", s.N}, {"K", s.K}};
    return u;
  };
  for (const auto& sh : load_shape_set("llama", KBISECT_SOURCE_DIR "/sweeps")) o.shapes.push_back(named(sh));
  ASSERT_EQ(o.shapes.size(), 17u * 12u);
  o.shapes.push_back(named({4096, 4096, 4096}));
  TuneRun run = rank_points(o, points);
  std::map<std::string, int> firsts;
  for (const auto& st : run.shapes) {
    ASSERT_EQ(st.candidates.size(), 8u);
    for (const auto& c : st.candidates) {
      EXPECT_EQ(c.status, "ranked") << st.shape.str() << " " << tile_of(c.params) << ": " << c.reason;
      ASSERT_TRUE(c.estimate) << st.shape.str();
      EXPECT_TRUE(c.estimate->gemm) << c.estimate->note;
      EXPECT_GT(c.estimate->tflops, 0);
      EXPECT_LE(c.estimate->tflops, 989.4 * 1.0001);
      EXPECT_GE(c.estimate->stages_held, 2) << tile_of(c.params) << ": the K loop is not pipelined";
    }
    ASSERT_TRUE(st.winner);
    ++firsts[tile_of(st.candidates[*st.winner].params)];
  }
  const ShapeTune& big = run.shapes.back();
  EXPECT_EQ(tile_of(big.candidates[*big.winner].params), "128x256x64 w8 s3");
  // What the model picks across the 205 shapes (for docs/tune.md).
  for (const auto& [tile, n] : firsts) std::cout << "first for " << n << " shapes: " << tile << "\n";
  for (const auto& c : big.candidates)
    std::cout << "4096^3 " << tile_of(c.params) << ": " << c.reason << ": " << describe(*c.estimate) << "\n";
}

// The example of issue #48 (examples/tune): the user's GEMM with bias and leaky ReLU, f16, Triton 3.5.1, sm_90a,
// over BM in {64, 128}, BN in {64, 128, 256}, BK in {32, 64}, 4 or 8 warps, 2 to 4 stages. Every 128x128 and
// 128x256 configuration with 8 warps fits an H100 and is kept, and the static order puts a tile of at least
// 128x128 in its top 3, at 4096^3 and at the 2048x2048x1024.
TEST(TuneEvidence, ExampleKeepsBigTilesAndRanksThemFirst) {
  if (!triton_351()) GTEST_SKIP() << "Triton 3.5.1 is not installed: run scripts/install-deps";
  kbtest::TestDir tmp("kb-tune-example");
  for (const std::string shape : {"4096x4096x4096", "2048x2048x1024"}) {
    const std::string out = tmp.path + "/" + shape + ".json";
    RunOptions ro;
    ro.timeout_s = 900;
    RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "tune", kExample,
                               "--toolchain", "triton-3.5.1-sm90a", "--shape", shape, "--dtype", "f16", "--space",
                               "BN=64,128,256", "--static-only", "--jobs", "2", "--json", out}, ro);
    ASSERT_TRUE(r.ok()) << r.status_text() << r.out << r.err;
    EXPECT_NE(r.out.find("the order is a static estimate, not a measurement"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ranked by: the static model with the H100 SXM5's facts"), std::string::npos) << r.out;
    const json j = json::parse(read_file(out));
    const json& cands = j["shapes"][0]["candidates"];
    ASSERT_EQ(cands.size(), 72u);
    int big_w8 = 0, rank = 0;
    for (const auto& c : cands) {
      const auto& p = c["params"];
      const bool big = p["BM"] == 128 && p["BN"].get<int>() >= 128;
      if (big && p[option_param("num_warps")] == 8) {
        ++big_w8;
        EXPECT_EQ(c["status"], "ranked") << shape << " " << p.dump() << ": " << c["reason"];
      }
      EXPECT_NE(c["status"], "pruned") << shape << " " << p.dump() << ": " << c["reason"];
      if (c["status"] == "ranked" && ++rank <= 3)
        EXPECT_GE(p["BM"].get<int>() * p["BN"].get<int>(), 128 * 128) << shape << " rank " << rank << ": " << p.dump();
    }
    EXPECT_EQ(big_w8, 12);  // 128x128 and 128x256, BK 32 or 64, 2 to 4 stages
  }
}

}  // namespace
}  // namespace kb::tune
