// Sharding: parse_shard, the deterministic cost-balanced partition, shard metadata and merge_results;
// end to end through the kbisect binary (sweep --shard 1/2 + 2/2 -> merge == unsharded case set,
// a missing shard -> exit 2 naming it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/runner.h"
#include "harness/shard.h"

using namespace kb;

namespace {

const char* kSweep = R"(
name: shardtest
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    params: {BM: [32, 64], BN: 64, BK: 64, MR: 4, NR: 16}
    dtypes: [f32, bf16]
    shapes: [[64, 64, 64], [128, 64, 64], [32, 32, 32], [256, 128, 64], [96, 96, 96]]
)";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

CaseResult result_for(const PlannedCase& pc) {
  CaseResult r = blank_result(pc);
  r.status = CaseStatus::ok;
  r.samples_s = {1e-3, 1.1e-3, 0.9e-3};
  r.summary = summarize(r.samples_s, pc.c.shape.flops());
  return r;
}

// What `sweep --shard` writes, without measuring.
RunResults fake_shard(const Sweep& sw, ShardSpec spec) {
  auto picked = shard_cases(sw.cases, spec);
  RunResults r;
  r.name = sw.name;
  r.started = "2026-12-02T01:00:0" + std::to_string(spec.index) + "Z";
  r.finished = "2026-12-02T02:00:0" + std::to_string(spec.index) + "Z";
  r.wall_s = 10 + spec.index;
  r.environment = {{"host", "node" + std::to_string(spec.index)}};
  for (size_t p : picked) r.cases.push_back(result_for(sw.cases[p]));
  r.extra = {{"case_list_hash", case_list_hash(sw.cases)}, {"shard", make_shard_info(sw, spec, picked).to_json()}};
  return r;
}

}  // namespace

TEST(Shard, ParsesOneBasedIOfN) {
  auto s = parse_shard("2/4");
  EXPECT_EQ(s.index, 1);
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.str(), "2/4");
  EXPECT_EQ(parse_shard("1/1").index, 0);
  for (const char* bad : {"0/4", "5/4", "a/b", "2", "2/0", "-1/3", "1/2/3", "", "1 /2"}) {
    std::string msg = error_of([&] { parse_shard(bad); });
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
  }
}

TEST(Shard, PartitionCoversEveryCaseOnceDeterministicAndBalanced) {
  auto sw = parse_sweep(kSweep, "t.yaml");
  ASSERT_EQ(sw.cases.size(), 20u);
  for (int n : {1, 2, 3, 4, 7, 20, 25}) {
    std::vector<int> owner(sw.cases.size(), -1);
    std::vector<double> load(size_t(n), 0.0);
    for (int k = 0; k < n; ++k) {
      auto picked = shard_cases(sw.cases, ShardSpec{k, n});
      EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
      EXPECT_EQ(picked, shard_cases(sw.cases, ShardSpec{k, n}));  // deterministic
      for (size_t p : picked) {
        EXPECT_EQ(owner[p], -1) << "case " << p << " in two shards (n=" << n << ")";
        owner[p] = k;
        load[size_t(k)] += estimated_cost(sw.cases[p]);
      }
    }
    for (size_t p = 0; p < owner.size(); ++p) EXPECT_GE(owner[p], 0) << "case " << p << " in no shard (n=" << n << ")";
    // Greedy longest-first: the most loaded shard exceeds the least loaded by at most the largest case.
    double biggest = 0;
    for (const auto& pc : sw.cases) biggest = std::max(biggest, estimated_cost(pc));
    EXPECT_LE(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()),
              biggest + 1e-9)
        << "n=" << n;
  }
  // A bf16 case costs half an f32 case of the same shape.
  const PlannedCase *f32 = nullptr, *bf16 = nullptr;
  for (const auto& pc : sw.cases)
    if (pc.c.shape.M == 64 && pc.c.shape.N == 64 && pc.c.params.get_int("BM") == 32)
      (pc.c.dtype == DType::f32 ? f32 : bf16) = &pc;
  ASSERT_TRUE(f32 && bf16);
  EXPECT_DOUBLE_EQ(estimated_cost(*bf16) * 2, estimated_cost(*f32));
}

TEST(Shard, CaseListHashFollowsTheExpandedList) {
  auto a = parse_sweep(kSweep, "t.yaml");
  auto b = parse_sweep(kSweep, "other-name.yaml");
  EXPECT_EQ(case_list_hash(a.cases), case_list_hash(b.cases));
  auto c = a;
  c.cases.pop_back();
  EXPECT_NE(case_list_hash(a.cases), case_list_hash(c.cases));
  auto d = a;
  auto tc = std::make_shared<Toolchain>(*d.cases[0].toolchain);
  tc->identity = "different";
  d.cases[0].toolchain = tc;
  EXPECT_NE(case_list_hash(a.cases), case_list_hash(d.cases));
  EXPECT_EQ(case_list_hash(a.cases).size(), 64u);
}

TEST(Shard, MergeRestoresTheUnshardedCaseListInOrder) {
  auto sw = parse_sweep(kSweep, "t.yaml");
  std::vector<RunResults> shards;
  for (int k : {2, 0, 3, 1}) shards.push_back(fake_shard(sw, ShardSpec{k, 4}));
  RunResults m = merge_results(shards, {"s3", "s1", "s4", "s2"});
  ASSERT_EQ(m.cases.size(), sw.cases.size());
  for (size_t i = 0; i < sw.cases.size(); ++i)
    EXPECT_EQ(m.cases[i].id(), sw.cases[i].c.kernel->backend + "/" + sw.cases[i].c.id());
  EXPECT_EQ(m.name, "shardtest");
  EXPECT_EQ(m.extra["case_list_hash"], case_list_hash(sw.cases));
  EXPECT_EQ(m.extra["merged_shards"], 4);
  EXPECT_EQ(result_case_list_hash(m), case_list_hash(sw.cases));
  EXPECT_EQ(m.environment["shards"].size(), 4u);
  EXPECT_EQ(m.started, "2026-12-02T01:00:00Z");
  EXPECT_EQ(m.finished, "2026-12-02T02:00:03Z");
  EXPECT_DOUBLE_EQ(m.wall_s, 13);
  // Round trip of the metadata through JSON.
  auto si = shard_info(shards[0], "s3");
  ASSERT_TRUE(si);
  EXPECT_EQ(si->spec.str(), "3/4");
  EXPECT_EQ(si->total_cases, sw.cases.size());
}

TEST(Shard, MergeNamesMissingDuplicateIncompleteAndForeignShards) {
  auto sw = parse_sweep(kSweep, "t.yaml");
  auto s1 = fake_shard(sw, {0, 4}), s2 = fake_shard(sw, {1, 4}), s3 = fake_shard(sw, {2, 4}), s4 = fake_shard(sw, {3, 4});

  std::string missing = error_of([&] { merge_results({s1, s2, s4}, {"a", "b", "d"}); });
  EXPECT_NE(missing.find("shard 3/4 missing"), std::string::npos) << missing;
  auto picked = shard_cases(sw.cases, {2, 4});
  ASSERT_FALSE(picked.empty());
  EXPECT_NE(missing.find(sw.cases[picked[0]].c.id()), std::string::npos) << missing;

  std::string dup = error_of([&] { merge_results({s1, s2, s2, s3, s4}, {"a", "b", "b2", "c", "d"}); });
  EXPECT_NE(dup.find("shard 2/4 given 2 times (b, b2)"), std::string::npos) << dup;

  auto partial = s2;
  std::string dropped = partial.cases.back().id();
  partial.cases.pop_back();
  std::string inc = error_of([&] { merge_results({s1, partial, s3, s4}, {"a", "b", "c", "d"}); });
  EXPECT_NE(inc.find("shard 2/4 incomplete (b): 1 of"), std::string::npos) << inc;
  EXPECT_NE(inc.find(dropped), std::string::npos) << inc;

  auto other = sw;
  other.cases.pop_back();
  auto foreign = fake_shard(other, {3, 4});
  std::string mism = error_of([&] { merge_results({s1, s2, s3, foreign}, {"a", "b", "c", "x"}); });
  EXPECT_NE(mism.find("x: case-list hash"), std::string::npos) << mism;
  EXPECT_NE(mism.find("shard 4/4 missing"), std::string::npos) << mism;

  RunResults plain = s1;
  plain.extra = nullptr;
  std::string nometa = error_of([&] { merge_results({plain, s2, s3, s4}, {"p", "b", "c", "d"}); });
  EXPECT_NE(nometa.find("p: no shard metadata"), std::string::npos) << nometa;
  EXPECT_NE(nometa.find("shard 1/4 missing"), std::string::npos) << nometa;
}

TEST(Shard, SweepShardsMergeToTheUnshardedCaseSetThroughTheCli) {
  std::string dir = temp_dir("kbisect-shard-test");
  write_file_atomic(dir + "/s.yaml", R"(
name: clishard
toolchains: [g++]
measure: {min_samples: 3, max_samples: 5, min_time_s: 0, max_time_s: 0.05, warmup_s: 0}
benchmarks:
  - kernel: matmul_tiled
    params: {BM: 32, BN: 64, BK: 64, MR: 4, NR: 16}
    shapes: [[32, 32, 32], [64, 32, 32], [32, 64, 32]]
)");
  const std::string kb = KBISECT_BINARY_DIR "/kbisect";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), kb);
    RunOptions po;
    po.timeout_s = 600;
    return run_process(args, po);
  };
  auto full = run({"sweep", dir + "/s.yaml", "-o", dir + "/full", "--format", "json"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto a = run({"sweep", dir + "/s.yaml", "--shard", "1/2", "-o", dir + "/a", "--format", "json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = run({"sweep", dir + "/s.yaml", "--shard", "2/2", "-o", dir + "/b", "--format", "json"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(file_exists(dir + "/a/shard.json"));

  auto m = run({"merge", dir + "/b", dir + "/a/results.json", "-o", dir + "/m", "--format", "json"});
  ASSERT_EQ(m.exit_code, 0) << m.err << m.out;
  EXPECT_NE(m.out.find("merged 2 shards of sweep 'clishard' (3 cases)"), std::string::npos) << m.out;
  auto fr = load_results(dir + "/full/results.json");
  auto mr = load_results(dir + "/m/results.json");
  std::vector<std::string> fids, mids;
  for (const auto& c : fr.cases) fids.push_back(c.id());
  for (const auto& c : mr.cases) mids.push_back(c.id());
  EXPECT_EQ(fids, mids);
  EXPECT_EQ(result_case_list_hash(fr), result_case_list_hash(mr));
  EXPECT_EQ(load_results(dir + "/a/results.json").cases.size() + load_results(dir + "/b/results.json").cases.size(), 3u);

  auto miss = run({"merge", dir + "/a", "-o", dir + "/m2"});
  EXPECT_EQ(miss.exit_code, 2);
  EXPECT_NE(miss.err.find("shard 2/2 missing"), std::string::npos) << miss.err;

  // A shard that started (shard.json written) but left no results: incomplete, with its cases named.
  std::remove((dir + "/b/results.json").c_str());
  auto inc = run({"merge", dir + "/a", dir + "/b", "-o", dir + "/m3"});
  EXPECT_EQ(inc.exit_code, 2);
  EXPECT_NE(inc.err.find("shard 2/2 incomplete"), std::string::npos) << inc.err;

  auto bad = run({"sweep", dir + "/s.yaml", "--shard", "3/2"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--shard '3/2'"), std::string::npos) << bad.err;
  remove_tree(dir);
}
