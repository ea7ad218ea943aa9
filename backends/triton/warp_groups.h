// Static metrics per warp group of a Triton kernel (docs/triton.md, "TLX"): how the kernel is split into
// warp-specialized partitions and what each runs with, read from the compiler's own output, the same way
// for TLX kernels (explicit async tasks) and for automatic warp specialization (tl.range(...,
// warp_specialize=True)), so that the two read side by side and a bisection can use any of them.
//
// From the final TTGIR: the partitions of the first `ttg.warp_specialize` op and the warps of each
// (partition 0 is the default region, which runs on the kernel's num_warps). From the PTX: the register
// limit each partition sets with `setmaxnreg` (found by following the worker warps' dispatch on their
// partition state, a compare chain or a jump table, and the default warps' path from the entry), and, for
// the whole kernel, the static count of mbarrier inits and of TMA, wgmma and tcgen05 instructions.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::triton {

struct WarpGroups {
  std::vector<int> warps;                  // per partition, the default first; one entry when not specialized
  std::vector<std::optional<int>> maxnreg; // per partition, the setmaxnreg value its warps run with
  int mbarriers = 0;     // mbarrier.init instructions (Triton unrolls the init of a barrier array)
  int tma_loads = 0;     // cp.async.bulk.tensor global -> shared
  int tma_stores = 0;    // cp.async.bulk.tensor shared -> global
  int wgmma = 0;         // wgmma.mma_async
  int tcgen05_mma = 0;   // tcgen05.mma (and .mma.ws)
  int tcgen05_ops = 0;   // every tcgen05.* instruction (alloc, ld, st, cp, commit, mma, ...)
};

// The partitions and warps of `ttgir` (empty text: one partition of `default_warps`).
std::vector<int> ttgir_partition_warps(const std::string& ttgir, int default_warps);
// The register limit per partition in `ptx` (entry `entry`) for a kernel of `partitions` partitions; a
// partition whose limit the PTX does not set (or whose dispatch is not recognised) has none.
std::vector<std::optional<int>> ptx_partition_maxnreg(const std::string& ptx, const std::string& entry,
                                                      int partitions);
// Everything above, from the TTGIR and (CUDA) the PTX; `ptx` may be empty (AMD targets).
WarpGroups read_warp_groups(const std::string& ttgir, const std::string& ptx, const std::string& entry,
                            int default_warps);
// As static metric columns: ws_partitions, ws_p<i>_warps, ws_p<i>_maxnreg (where set), and with a PTX
// mbarriers, tma_loads, tma_stores, wgmma, tcgen05_mma, tcgen05_ops.
std::map<std::string, double> warp_group_metrics(const WarpGroups& w, bool have_ptx);
// The columns of a compiled Triton kernel, from the kernel.ttgir and kernel.ptx beside its binary
// (backends/triton/triton_compile.h writes them); `num_warps` stands for the default partition's warps
// when there is no TTGIR.
std::map<std::string, double> compiled_warp_group_metrics(const std::string& binary_path, const std::string& entry,
                                                          int num_warps);

}  // namespace kb::triton
