// Sharded sweeps: a deterministic, cost-balanced partition of a sweep's expanded case list into N
// shards (the same on every machine that expands the same sweep), the metadata a shard's results.json
// carries, and the merge that joins shard results into one document after checking that every shard
// of the same sweep (same case-list hash) is present exactly once.
//
// Conventions:
//   * ShardSpec::index is 0-based in code; the command line ("--shard I/N") and every message use the
//     1-based form I/N with 1 <= I <= N (as in "shard 3/4"), so a Slurm array --array=1-N maps 1:1.
//   * Partition: each case gets an estimated cost (shape FLOPs x dtype factor; skipped cases cost ~0);
//     cases are sorted by cost descending (ties: case id ascending) and assigned greedily to the least
//     loaded shard (ties: lowest shard index). Within a shard, cases keep the sweep's order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"
#include "harness/sweep.h"

namespace kb {

struct ShardSpec {
  int index = 0;  // 0-based
  int count = 1;
  std::string str() const;  // 1-based "I/N"
};

// "2/4" -> {index 1, count 4}. Throws InputError naming the value ("--shard '5/4': ...").
ShardSpec parse_shard(const std::string& text);

// SHA-256 over the expanded case list: every case id with its toolchain identity, in the sweep's
// order. Machines that expand the same sweep with the same toolchains agree on it.
std::string case_list_hash(const std::vector<PlannedCase>& cases);

// Estimated relative cost of a case (FLOPs x dtype factor: f32 1, f16/bf16 0.5 on the assumption of
// twice the throughput; a skipped case costs 1 FLOP, i.e. nothing).
double estimated_cost(const PlannedCase& pc);

// Indices (into `cases`, ascending) of the cases of shard `spec`. Deterministic, see above.
std::vector<size_t> shard_cases(const std::vector<PlannedCase>& cases, ShardSpec spec);

// What a shard's results.json records under extra["shard"].
struct ShardInfo {
  std::string sweep;            // sweep name
  std::string case_list_hash;   // of the full expanded case list
  ShardSpec spec;
  size_t total_cases = 0;       // in the full list
  std::vector<std::string> case_ids;  // this shard's cases (CaseResult::id()), in run order
  std::vector<size_t> case_index;     // their positions in the full list (to restore sweep order)
  // The whole partition, so a merge can name the cases of a missing shard: every case id of the full
  // list in sweep order and the (0-based) shard it belongs to (JSON: 1-based).
  std::vector<std::string> all_case_ids;
  std::vector<int> assignment;
  nlohmann::json to_json() const;
  static ShardInfo from_json(const nlohmann::json& j, const std::string& origin);  // InputError
};

// The shard metadata of a sweep about to run (for run_sweep's extra["shard"]).
ShardInfo make_shard_info(const Sweep& sweep, ShardSpec spec, const std::vector<size_t>& picked);

// extra["shard"] of a result, or nullopt for an unsharded result.
std::optional<ShardInfo> shard_info(const RunResults& r, const std::string& origin);

// The case-list hash a result belongs to: extra["case_list_hash"] (written by every sweep, sharded or
// not, and by merge), else "" for older files.
std::string result_case_list_hash(const RunResults& r);

// Joins shard results. Every input must carry shard metadata of the same sweep (same name, same
// case-list hash, same N); every shard 1..N must appear exactly once and hold all its cases. Otherwise
// throws InputError listing every problem, e.g. "shard 3/4 missing (cases: a, b, ...)", "shard 2/4 given
// twice (x/results.json, y/results.json)", "y/results.json: case-list hash 1a2b.. differs from 9f8e..",
// "shard 1/4 incomplete (x/results.json): 2 of 5 cases missing (...)".
// `origins` (same length as shards, optional) names the inputs in messages.
// The merged document: cases in the full list's order; environment of the first shard plus
// environment["shards"] = [{shard, host, started, finished, wall_s, origin}]; started = earliest,
// finished = latest, wall_s = the longest shard; extra = {"case_list_hash", "merged_shards": N}.
RunResults merge_results(const std::vector<RunResults>& shards, const std::vector<std::string>& origins = {});

}  // namespace kb
