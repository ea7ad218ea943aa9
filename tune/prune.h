// Pruning without running: static metrics of compiled candidates condemn some before any timing.
// CPU (clang): the spills and reloads the register allocator reports for the innermost loop that has
// any (-Rpass-missed=regalloc remarks; LLVM reports loops innermost first). GPUs: spills, local memory
// (stack/scratch bytes) and occupancy below a floor relative to the space, from the backend's own metrics.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::tune {

struct LoopSpills {
  int spills = 0, reloads = 0;     // the innermost loop that spills or reloads
  int fn_spills = 0, fn_reloads = 0;  // the whole function (largest "generated in function" remark)
};
// Reads clang's regalloc remarks in a compile log; nullopt when the log has none.
std::optional<LoopSpills> parse_regalloc_remarks(const std::string& log);

struct PruneRule {
  // CPU: pruned when loop spills + reloads > factor * (the fewest of any candidate) + slack.
  double spill_factor = 1.5;
  int spill_slack = 8;
  // GPU: pruned on any spill or local memory, or when occupancy (0..1) is below the floor: min_occupancy,
  // or occupancy_ratio x the best occupancy of the space when that is lower. Warp-specialized kernels run
  // one big block per SM by design (matmul_ws_sm90: 12 of 64 warps, 0.19, at 600+ TFLOP/s on an H200): an
  // absolute floor alone pruned its whole space.
  double min_occupancy = 0.25;
  double occupancy_ratio = 0.5;
};

// One reason per candidate ("" = keep), from the loop spills of each (nullopt: no remarks, kept).
std::vector<std::string> cpu_spill_reasons(const std::vector<std::optional<LoopSpills>>& spills, const PruneRule& rule);
// Why a GPU candidate's static metrics condemn it, or "". best_occupancy: the highest occupancy of any
// candidate of the space (sets the floor with the rule).
std::string gpu_static_reason(const std::map<std::string, double>& metrics, const PruneRule& rule,
                              double best_occupancy);
// For ranking without a device (lower = better): low occupancy, spills and local memory cost.
double gpu_static_score(const std::map<std::string, double>& metrics);

}  // namespace kb::tune
