// kbisect tune: pruning reasons, racing on a synthetic lab, the tuned table and `config: tuned`, bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "harness/sweep.h"
#include "harness/tuned_table.h"
#include "tune/prune.h"
#include "tune/race.h"
#include "tune/space.h"
#include "tune/tuner.h"
#include "tests/common/test_tmp.h"

namespace kb::tune {
namespace {

const char* kRemarks =
    "x.cpp:1:1: remark: 9 virtual registers copies 3.4e+05 total copies cost generated in loop [-Rpass-missed=regalloc]\n"
    "x.cpp:1:1: remark: 2 reloads 9.3e+04 total reloads cost 2 folded reloads 1.2e+05 total folded reloads cost "
    "generated in loop [-Rpass-missed=regalloc]\n"
    "x.cpp:1:1: remark: 15 spills 6.7e+04 total spills cost 23 reloads 4.4e+05 total reloads cost 19 folded reloads "
    "4.6e+05 total folded reloads cost generated in loop [-Rpass-missed=regalloc]\n"
    "x.cpp:1:1: remark: 156 spills 3.5e+06 total spills cost 179 reloads 2.2e+07 total reloads cost generated in "
    "function [-Rpass-missed=regalloc]\n";

TEST(TunePrune, RegallocRemarksGiveTheInnermostSpillingLoop) {
  auto s = parse_regalloc_remarks(kRemarks);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->spills, 15);
  EXPECT_EQ(s->reloads, 23);
  EXPECT_EQ(s->fn_spills, 156);
  EXPECT_EQ(s->fn_reloads, 179);
  EXPECT_FALSE(parse_regalloc_remarks("no remarks here"));
}

TEST(TunePrune, ReasonsAreRecorded) {
  PruneRule rule;
  std::vector<std::optional<LoopSpills>> s = {LoopSpills{10, 17}, LoopSpills{15, 23}, LoopSpills{40, 60}, std::nullopt};
  auto why = cpu_spill_reasons(s, rule);
  EXPECT_EQ(why[0], "");
  EXPECT_EQ(why[1], "");  // 38 <= 1.5 * 27 + 8
  EXPECT_NE(why[2].find("40 spills + 60 reloads"), std::string::npos) << why[2];
  EXPECT_EQ(why[3], "");
}

// GPUs: only what cannot win is pruned. Occupancy never is (tensor-core GEMMs run one large block per SM by
// design: 128x256 tiles with 8 warps have 0.125); a spill only above the bound; a block over the device's
// limits always, naming the limit.
TEST(TunePrune, GpuPrunesOnlyWhatCannotWin) {
  PruneRule rule;
  const DeviceFacts* h100 = device_facts("sm_90a");
  ASSERT_TRUE(h100);
  EXPECT_EQ(gpu_static_reason({{"occupancy", 0.0625}, {"registers", 228}, {"threads_per_block", 128},
                               {"smem_bytes", 131072}, {"num_warps", 4}}, rule, h100), "");
  EXPECT_EQ(gpu_static_reason({{"spill_stores", 864}, {"spill_loads", 852}}, rule, h100), "");  // no bound by default
  EXPECT_EQ(gpu_static_reason({{"stack_bytes", 64}, {"scratch_bytes", 64}}, rule, h100), "");
  rule.max_spill_bytes = 1024;
  EXPECT_EQ(gpu_static_reason({{"spill_stores", 24}, {"spill_loads", 44}}, rule, h100), "");
  EXPECT_NE(gpu_static_reason({{"spill_stores", 864}, {"spill_loads", 852}}, rule, h100)
                .find("1716 B spilled per thread (stores + loads), above the bound 1024 B"), std::string::npos);
  rule.max_spill_bytes = 0;
  EXPECT_NE(gpu_static_reason({{"spill_stores", 4}}, rule, h100).find("above the bound 0 B"), std::string::npos);
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 256}, {"smem_bytes", 240000}, {"num_warps", 8}}, rule, h100)
                .find("cannot launch: 240000 B of shared memory per block, the H100 SXM5 allows 232448 B (227 KiB)"),
            std::string::npos);
  // A CUDA C++ kernel's dynamic shared memory counts with its static (a Triton build's smem_bytes holds both).
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 384}, {"smem_bytes", 1024}, {"dynamic_smem_bytes", 240000}}, rule,
                              h100).find("cannot launch"), std::string::npos);
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 2048}}, rule, h100).find("2048 threads per block"), std::string::npos);
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 1024}, {"registers", 128}}, rule, h100)
                .find("32 warps of 128 registers need 131072 registers, a block may use 65536"), std::string::npos);
  const DeviceFacts* mi300x = device_facts("gfx942");
  ASSERT_TRUE(mi300x);
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 256}, {"lds_bytes", 98304}, {"vgprs", 128}}, rule, mi300x)
                .find("98304 B of LDS per block, the MI300X allows 65536 B (64 KiB)"), std::string::npos);
  EXPECT_NE(gpu_static_reason({{"threads_per_block", 1024}, {"vgprs", 256}}, rule, mi300x)
                .find("16 waves of 256 VGPRs need 1024 per SIMD lane"), std::string::npos);
  rule.max_spill_bytes = 1024;
  EXPECT_NE(gpu_static_reason({{"vgpr_spills", 200}, {"vgprs", 256}}, rule, mi300x).find("1600 B spilled"), std::string::npos);
  // No facts for the target: the limits are not checked, the spill bound still is.
  EXPECT_EQ(gpu_static_reason({{"threads_per_block", 256}, {"smem_bytes", 240000}}, PruneRule{}, nullptr), "");
}

TEST(TuneSpace, InvalidPointsKeepTheKernelsReason) {
  const KernelDecl& k = find_kernel("cpu", "matmul_tiled");
  auto pts = enumerate_space(k, DType::f32, "", {256, 256, 256}, cpu_vector_info());
  size_t n = 1;
  for (const auto& t : k.space) n *= t.values.size();
  EXPECT_EQ(pts.size(), n);
  // A space through a value the checks refuse keeps the point with the kernel's reason.
  KernelDecl odd = k;
  odd.space = {{"MR", {int64_t(4), int64_t(5)}}};
  auto odd_pts = enumerate_space(odd, DType::f32, "", {256, 256, 256}, cpu_vector_info());
  ASSERT_EQ(odd_pts.size(), 2u);
  int refused = 0;
  for (const auto& p : odd_pts) refused += p.invalid.find("MR=5 does not divide BM=96") != std::string::npos;
  EXPECT_EQ(refused, 1);
  Params bad = k.complete({{"MR", int64_t(5)}, {"BM", int64_t(96)}});
  ASSERT_TRUE(k.check_params(bad, DType::f32, ""));
  EXPECT_NE(k.check_params(bad, DType::f32, "")->find("does not divide"), std::string::npos);
  // The prior orders but never drops: every combination is still there.
  EXPECT_LE(pts.front().prior, pts.back().prior);
}

// A synthetic lab: candidate i's times are lognormal around means[i] with `noise` (2%) relative noise.
RaceResult race_lab(const std::vector<double>& means, uint64_t seed, double alpha, double noise = 0.02,
                    int max_rounds = 320) {
  Rng rng(seed * 7919 + 1);
  RaceConfig cfg;
  cfg.alpha = alpha;
  cfg.seed = seed;
  cfg.max_rounds = max_rounds;
  cfg.budget_s = 1e9;
  return race(means.size(), [&](size_t i) {
    double t = means[i] * std::exp(noise * rng.normal());
    return Sample{t, t};
  }, cfg);
}

TEST(TuneRace, PicksTheTrueBestAtTheStatedErrorRate) {
  const std::vector<double> means = {1.10, 1.04, 1.00, 1.30, 1.02, 1.50, 1.08, 1.20};
  const double alpha = 0.05;
  const int trials = 40;
  int wrong = 0;
  double rounds = 0;
  for (int t = 0; t < trials; ++t) {
    RaceResult r = race_lab(means, uint64_t(t + 1), alpha);
    wrong += r.winner != 2;
    rounds += r.rounds;
    EXPECT_EQ(r.entries[2].dropped_at, 0) << "true best dropped in trial " << t;
  }
  // At most alpha of the trials, with binomial slack (P(X > 6 | n=40, p=0.05) < 0.01).
  EXPECT_LE(wrong, 6);
  EXPECT_LT(rounds / trials, 320);  // the race stops early: candidates are dropped
}

// Successive halving: the first rung (8 rounds, everyone) drops the clearly slow at once; of the four
// near-equal candidates that are neither slower nor yet within 1% of the leader, only the better half
// goes on with the leader, the other two are parked (kept, not sampled in the second rung).
TEST(TuneRace, HalvingDropsTheClearlySlowAfterTheFirstRung) {
  const std::vector<double> means = {1.000, 1.002, 1.004, 1.006, 1.008, 1.50, 1.60, 2.00};
  RaceResult r = race_lab(means, 3, 0.05, 0.02, 160);
  ASSERT_GE(r.history.size(), 2u);
  const RaceLook& first = r.history[0];
  EXPECT_EQ(first.round, 8);
  EXPECT_EQ(first.dropped, (std::vector<size_t>{5, 6, 7}));
  for (size_t i : {5, 6, 7}) {
    EXPECT_EQ(r.entries[i].dropped_at, 8) << i;
    EXPECT_EQ(r.entries[i].samples_s.size(), 8u) << i;
  }
  EXPECT_EQ(first.alive.size(), 5u);
  ASSERT_EQ(first.sampled.size(), 3u);  // the leader and ceil(0.5 * 4) of the unresolved
  EXPECT_NE(std::find(first.sampled.begin(), first.sampled.end(), first.leader), first.sampled.end());
  int parked = 0;
  for (size_t i : first.alive) {
    if (std::find(first.sampled.begin(), first.sampled.end(), i) != first.sampled.end()) continue;
    ++parked;
    // Parked: no sample between the first look and the second.
    for (int round : r.entries[i].rounds)
      EXPECT_FALSE(round > first.round && round <= r.history[1].round) << i << " sampled in round " << round;
    // The sampled ones ran up to 16 samples by the second look.
  }
  EXPECT_EQ(parked, 2);
  for (size_t i : first.sampled) {
    int upto = 0;
    for (int round : r.entries[i].rounds) upto += round <= r.history[1].round;
    EXPECT_EQ(upto, 16) << i;
  }
  EXPECT_EQ(r.history[1].round, 16);
  EXPECT_EQ(r.entries[0].dropped_at, 0);  // the true best is never dropped here
}

// The leader is clear (every other candidate significantly slower) long before the last planned look.
TEST(TuneRace, StopsEarlyWhenTheLeaderIsClear) {
  const std::vector<double> means = {1.00, 1.10, 1.30, 1.45};
  RaceResult r = race_lab(means, 5, 0.05, 0.02, 160);
  EXPECT_EQ(r.stop, "leader clear");
  EXPECT_EQ(r.winner, 0u);
  EXPECT_TRUE(r.tied.empty());
  EXPECT_EQ(r.looks, 5);  // 8, 16, 32, 64, 128
  EXPECT_LT(r.looks_taken, r.looks);
  EXPECT_LT(r.rounds, 160);
  EXPECT_EQ(r.entries[2].dropped_at, 8);
  EXPECT_EQ(r.entries[3].dropped_at, 8);
  EXPECT_GT(r.entries[1].dropped_at, 0);
  // Fewer samples than the old race (every candidate every round to the last look: 4 x 160).
  EXPECT_LT(r.samples, 4 * 160 / 4);
}

// Two equal candidates never separate; the race stops once the other is not faster than the leader by
// more than 1% (its difference CI's lower end above -1%), and picks one of the two.
TEST(TuneRace, TiedWithinOnePercentStopsWithThatReason) {
  const std::vector<double> means = {1.0, 1.0, 1.3};
  RaceResult r = race_lab(means, 7, 0.05, 0.005, 160);
  EXPECT_EQ(r.stop, "tied within 1%");
  EXPECT_TRUE(r.winner == 0 || r.winner == 1) << r.winner;
  ASSERT_EQ(r.tied.size(), 1u);
  EXPECT_EQ(r.tied[0], 1 - r.winner);
  EXPECT_TRUE(r.entries[r.tied[0]].within_band);
  EXPECT_GT(r.entries[r.tied[0]].shift_lo, std::log(1 / 1.01));
  EXPECT_EQ(r.entries[2].dropped_at, 8);
  EXPECT_LT(r.rounds, 160);
}

TEST(TuneRace, BadConfigNamesTheField) {
  RaceConfig cfg;
  cfg.budget_s = 0;
  try {
    race(2, [](size_t) { return Sample{1, 1}; }, cfg);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("budget_s"), std::string::npos);
  }
  cfg.budget_s = 1;
  cfg.keep_fraction = 0;
  try {
    race(2, [](size_t) { return Sample{1, 1}; }, cfg);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("keep_fraction"), std::string::npos);
  }
}

TEST(TuneRace, OneCandidateIsNotRaced) {
  int calls = 0;
  RaceResult r = race(1, [&](size_t) { ++calls; return Sample{1, 1}; }, RaceConfig{});
  EXPECT_EQ(r.stop, "one candidate");
  EXPECT_EQ(r.winner, 0u);
  EXPECT_EQ(calls, 0);
}

TunedEntry entry(const std::string& machine, const std::string& identity, Shape sh, int64_t mr) {
  TunedEntry e;
  e.machine = machine;
  e.backend = "cpu";
  e.kernel = "matmul_tiled";
  e.toolchain = "clang-19";
  e.toolchain_identity = identity;
  e.shape = sh;
  e.params = find_kernel("cpu", "matmul_tiled").complete({{"MR", mr}});
  e.gain_pct = 12.5, e.gain_lo_pct = 10, e.gain_hi_pct = 15;
  e.verdict = "better";
  return e;
}

TEST(TunedTable, RoundTripsThroughItsFile) {
  TunedTable t;
  t.put(entry("cpu X avx2", "abc", {1024, 1024, 1024}, 4));
  t.put(entry("cpu X avx2", "abc", {256, 256, 256}, 8));
  t.put(entry("cpu X avx2", "abc", {1024, 1024, 1024}, 2));  // replaces the first
  const std::string dir = temp_dir("kb-tuned");
  t.save(dir + "/tuned.json");
  TunedTable back = TunedTable::load(dir + "/tuned.json");
  ASSERT_EQ(back.entries().size(), 2u);
  EXPECT_EQ(back.dump(), t.dump());
  EXPECT_EQ(back.entries()[1].params.get_int("MR"), 2);
  EXPECT_DOUBLE_EQ(back.entries()[1].gain_hi_pct, 15);
  EXPECT_THROW(TunedTable::parse("{\"format\": \"other\"}", "t.json"), InputError);
  remove_tree(dir);
}

TEST(TunedTable, ResolvesExactNearestAndFallback) {
  TunedTable t;
  t.put(entry("cpu X avx2", "abc", {1024, 1024, 1024}, 4));
  t.put(entry("cpu X avx2", "abc", {256, 256, 256}, 8));
  TunedQuery q{"cpu X avx2", "cpu", "matmul_tiled", "abc", DType::f32, {1024, 1024, 1024}};
  auto r = t.resolve(q);
  EXPECT_EQ(r.how, "exact");
  EXPECT_EQ(r.params.get_int("MR"), 4);
  q.shape = {300, 300, 200};
  r = t.resolve(q);
  EXPECT_EQ(r.how, "nearest");
  EXPECT_EQ(r.params.get_int("MR"), 8);
  EXPECT_NE(r.reason.find("256x256x256"), std::string::npos);
  q.toolchain_identity = "other";
  r = t.resolve(q);
  EXPECT_EQ(r.how, "fallback");
  EXPECT_NE(r.reason.find("other toolchain builds"), std::string::npos);
  q.machine = "cpu Y avx512f";
  EXPECT_NE(t.resolve(q).reason.find("no tuned entry"), std::string::npos);
}

TEST(TunedTable, ConfigTunedInASweep) {
  Toolchain tc = find_toolchain("g++");
  resolve_identity(tc);
  const std::string dir = temp_dir("kb-tuned-sweep");
  TunedTable t;
  t.put(entry(machine_key(tc), tc.identity, {64, 64, 64}, 4));
  t.save(dir + "/tuned.json");
  const std::string sweep = "toolchains: [g++]\ntuned_table: tuned.json\nbenchmarks:\n"
                            "  - {kernel: matmul_tiled, config: tuned, shapes: [[64, 64, 64], [96, 96, 64]]}\n";
  write_file_atomic(dir + "/s.yaml", sweep);
  Sweep sw = load_sweep(dir + "/s.yaml");
  ASSERT_EQ(sw.cases.size(), 2u);
  EXPECT_EQ(sw.cases[0].tuned, "exact");
  EXPECT_EQ(sw.cases[0].c.params.get_int("MR"), 4);
  EXPECT_EQ(sw.cases[1].tuned.rfind("nearest", 0), 0u) << sw.cases[1].tuned;
  write_file_atomic(dir + "/s2.yaml", "toolchains: [g++]\nbenchmarks:\n"
                                      "  - {kernel: matmul_tiled, config: tuned, shapes: [[64, 64, 64]]}\n");
  unsetenv("KBISECT_TUNED_TABLE");
  Sweep fb = load_sweep(dir + "/s2.yaml");
  EXPECT_EQ(fb.cases[0].tuned.rfind("fallback: no tuned table", 0), 0u) << fb.cases[0].tuned;
  EXPECT_EQ(fb.cases[0].c.params, find_kernel("cpu", "matmul_tiled").configs.front().second);
  remove_tree(dir);
}

// Bad input: the CLI's exit code 2 with the field named.
int run_cli(const std::string& args, std::string& err) {
  kbtest::TestDir dir("kb-tune-cli");
  const std::string out = dir.path + "/err.txt";
  int rc = std::system((std::string(KBISECT_BINARY_DIR) + "/kbisect tune " + args + " 2>" + out + " >/dev/null").c_str());
  err = read_file(out);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(TuneCli, BadInputExitsTwoNamingTheField) {
  std::string err;
  EXPECT_EQ(run_cli("matmul_tiled --toolchain g++ --shape 64x64x64 --space XX=1", err), 2);
  EXPECT_NE(err.find("unknown parameter 'XX'"), std::string::npos) << err;
  EXPECT_EQ(run_cli("matmul_tiled --toolchain g++ --shape 64x64x64 --space MR=", err), 2);
  EXPECT_NE(err.find("'MR' is given an empty space"), std::string::npos) << err;
  EXPECT_EQ(run_cli("matmul_tiled --toolchain g++ --shape 64x64x64 --budget-s 0.1", err), 2);
  EXPECT_NE(err.find("--budget-s 0.1 is too small"), std::string::npos) << err;
  EXPECT_EQ(run_cli("matmul_tiled --toolchain g++ --shape 64x64", err), 2);
  EXPECT_NE(err.find("--shape"), std::string::npos) << err;
  EXPECT_EQ(run_cli("matmul_tiled --toolchain g++ --shape 64x64x64 --max-spill-bytes -1", err), 2);
  EXPECT_NE(err.find("--max-spill-bytes -1 must be 0 or more"), std::string::npos) << err;
}

// A device kbisect has no facts for on the toolchain's target: exit 2 listing those it has, before compiling.
TEST(TuneCli, UnknownDeviceNamesTheTargetsDevices) {
  if (!file_exists(triton::triton_env_root() + "/triton-3.5.1/bin/python"))
    GTEST_SKIP() << "Triton 3.5.1 is not installed: run scripts/install-deps";
  std::string err;
  EXPECT_EQ(run_cli("triton_matmul_tiled --toolchain triton-3.5.1-sm90a --shape 64x64x64 --dtype f16 --device MI300X",
                    err), 2);
  EXPECT_NE(err.find("--device 'MI300X': no facts for it on target sm_90a (known: H100 SXM5, H200 SXM)"),
            std::string::npos) << err;
}

}  // namespace
}  // namespace kb::tune
