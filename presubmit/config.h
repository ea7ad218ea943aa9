// The presubmit config (YAML; errors name file:line:col and the field; paths relative to the file). The
// grammar is in docs/presubmit.md:
//
//   name: demo-presubmit
//   compiler: {repo: ../compiler, provider: {in_tree: kernel-compiler.yaml}}   # for --base / --change:
//                                   # exactly the nightly's `compiler:` grammar (the bisector's providers)
//   cases: {sweep: ../sweeps/smoke.yaml, tier: l1, filter: f32}     # or a list of them: what to cover
//   threshold: 5%                   # the A/B decisions' threshold (default 0.5%)
//   budget: {cpu_minutes: 1, gpu_minutes: 10}   # device time for timing, per kind of device
//   gate: {spills: new, registers: 10%, smem: 4096}   # static rules that fail the diff without a GPU
//   weights: {"/4096x4096x4096$": 5}  # case-key regex -> weight (the largest match; default 1)
//   history: {db: ../nightly/history.sqlite, last: 30}   # the nightly history (optional)
//   measure: {block_pairs: 16, min_blocks: 10, max_blocks: 160, alpha: 0.05, placement: process, seed: 1,
//             pilot_blocks: 4, block_overhead_s: 0.02, placement_sd: 0.4%}
#pragma once
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "bisect/config.h"
#include "nightly/nightly.h"
#include "stats/changepoint.h"

namespace kb::presubmit {

// One sweep to cover (after its tier and filter), as `kbisect sweep FILE --tier T --filter F` would.
struct CaseSet {
  std::string sweep;  // absolute
  std::string tier, filter;
};

// A static rule: fail the diff when `metric` (bisect's static metrics: registers, spills, stack, smem,
// code_bytes) moves up past it. new: from 0 to more than 0; any: any increase; relative: by more than
// `amount` (a fraction of the base value); absolute: by more than `amount`.
struct GateRule {
  enum class Kind { new_nonzero, any_increase, relative, absolute };
  bisect::Metric metric = bisect::Metric::spills;
  Kind kind = Kind::new_nonzero;
  double amount = 0;
  std::string text;  // as written ("10%", "new")
};

struct Weight {
  std::string pattern;  // searched in the case key (backend/kernel[params]/dtype/MxNxK)
  std::regex re;
  double weight = 1;
};

// How the chosen cases are measured (the interleaved A/B of harness/ab.h) and how their cost is predicted.
struct MeasurePlan {
  int block_pairs = 16;       // pairs per block; both sides loaded afresh per block
  int min_blocks = 10;        // first look of the sequential decision
  int max_blocks = 160;       // last planned look
  double alpha = 0.05;
  std::string placement = "process";
  uint64_t seed = 1;
  int pilot_blocks = 4;       // a case without history: blocks of a first short measurement that price it
  double block_overhead_s = 0.02;  // cost model: seconds a block costs besides its pairs (loads, warmup)
  double placement_sd = 0.004;     // cost model: spread of block medians from where loads land (docs/bisect.md)
};

struct PresubmitConfig {
  std::string file, name;
  std::optional<nightly::CompilerSpec> compiler;  // needed by --base / --change
  std::vector<CaseSet> cases;
  double threshold = 0.005;
  std::optional<double> cpu_budget_s, gpu_budget_s;  // budget.cpu_minutes / gpu_minutes, in seconds
  std::vector<GateRule> gate;
  std::vector<Weight> weights;
  std::string history;   // absolute; "" none
  int history_last = 30;
  ChangePointConfig cp;  // history.changepoints: how a case's change points are found
  MeasurePlan measure;
};

PresubmitConfig load_presubmit_config(const std::string& path);
PresubmitConfig parse_presubmit_config(const std::string& text, const std::string& origin);

// The bisect config the provider of `compiler` needs (repo + provider, validated by the bisector's parser).
bisect::BisectConfig provider_config(const PresubmitConfig& c);

// The config's weight of a case key: the largest weight whose pattern the key contains a match of; 1 if none.
double weight_of(const PresubmitConfig& c, const std::string& key);

}  // namespace kb::presubmit
