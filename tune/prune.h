// Pruning without running: static metrics of compiled candidates condemn some before any timing.
// CPU (clang): the spills and reloads the register allocator reports for the innermost loop that has
// any (-Rpass-missed=regalloc remarks; LLVM reports loops innermost first). GPUs: only what cannot win,
// that is what cannot launch on the device (shared memory or LDS, threads or registers of a block over the
// device's limits) and spills above a bound the user sets; never occupancy (tensor-core GEMMs run one
// large block per SM by design).
#pragma once
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tune/model.h"
#include "tune/target.h"

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
  // GPU: pruned when a thread spills more than this many bytes (spill stores + loads as ptxas counts them;
  // on AMD 8 B per spilled VGPR, one store and one load of 4 B); `kbisect tune --max-spill-bytes`. No bound by
  // default: how much a spill costs depends on where it is (a spill outside the K loop costs nearly nothing),
  // which the metrics do not say; the static model orders spilling candidates later instead, and on a GPU
  // the screen drops what runs 1.5x slower than the fastest.
  double max_spill_bytes = std::numeric_limits<double>::infinity();
};

// One reason per candidate ("" = keep), from the loop spills of each (nullopt: no remarks, kept).
std::vector<std::string> cpu_spill_reasons(const std::vector<std::optional<LoopSpills>>& spills, const PruneRule& rule);
// Why a GPU candidate cannot win, or "": it cannot launch on `device` (nullptr: no facts for the target,
// the limits are not checked) or spills more than the rule's bound.
std::string gpu_static_reason(const Metrics& metrics, const PruneRule& rule, const DeviceFacts* device);
// Bytes spilled per thread (stores + loads; AMD: 8 B per spilled VGPR).
double spill_bytes(const Metrics& metrics, bool amd);
// Shared memory (LDS) of one block, static + dynamic, from a compile's metrics.
double block_smem_bytes(const Metrics& metrics, bool amd);

}  // namespace kb::tune
