// The static model that orders GPU candidates (docs/tune.md, "The static model"): a candidate read as a
// tiled GEMM (BM x BN x BK tiles, warps, pipeline stages) on a device of known facts (tune/target.h) gets an
// estimated time from four terms, each with its unit: the tile's bytes per flop against the L2 bandwidth
// of an SM, wave quantization of the tiles over the SMs, the pipeline's bytes in flight against the memory
// latency, and register and shared-memory pressure (blocks resident per SM, spills) from the compiled
// candidate's real metrics. It orders the race on a GPU and is printed as an estimate without one; it never
// removes a candidate.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "backends/kernel.h"
#include "tune/target.h"

namespace kb::tune {

using Metrics = std::map<std::string, double>;
// A compile's metric, 0 when the backend did not report it.
double metric(const Metrics& m, const char* name);

// The parameter that carries a compile option of a Triton kernel ("num_warps", "num_stages"): the one place
// that knows how compile options are named among a kernel's parameters.
std::string option_param(const std::string& option);

struct GemmView {
  int64_t M = 0, N = 0, K = 0;     // the problem
  int64_t bm = 0, bn = 0, bk = 0;  // one block's tile and K step
  int warps = 0;                   // warps (waves) per block
  int stages = 1;                  // K steps the pipeline holds in shared memory
  double in_bytes = 2, out_bytes = 2;
};
// The candidate as a tiled GEMM, or nullopt with `why`: the tile from parameters named BM / BLOCK_M /
// BLOCK_SIZE_M (N and K alike), M, N and K from the shape (a user kernel's shape values named M, N, K),
// warps from the num_warps option or the block's threads, stages from the num_stages option or STAGES.
std::optional<GemmView> gemm_view(const Params& p, const Shape& s, DType d, const Metrics& m, int warp_size,
                                  std::string* why);

struct Estimate {
  bool gemm = false;            // the GEMM model; false: the generic score (`note` says why)
  std::string note;
  double score = 0;             // the order, lower first: time_s for the GEMM model
  double time_s = 0, tflops = 0;
  std::string bound;            // what limits the busiest SM: tensor cores | FMA units | warps | L2 bandwidth | latency | HBM
  double bytes_per_flop = 0;    // B/flop: tile loads (and spills) per flop of the tile
  int64_t tiles = 0;            // blocks of the grid
  int64_t tiles_per_sm = 0;     // on the busiest SM
  double wave_efficiency = 0;   // tiles / (SMs x tiles_per_sm)
  int resident = 0;             // blocks per SM at once (registers, shared memory, warps)
  int stages_asked = 0;         // the pipeline depth asked for (num_stages, STAGES)
  int stages_held = 0;          // K steps shared memory holds (fewer than asked: the loop is not pipelined)
  double inflight_bytes = 0;    // B per block the pipeline keeps in flight
  double latency_cover = 0;     // <= 1: the bandwidth in-flight loads sustain over what the tile needs
  double latency_margin = 0;    // the same ratio unclamped (breaks ties: more headroom first)
  double spill_bytes = 0;       // B per thread (stores + loads)
};

// The model's order (a before b): the lower score; at equal scores (the same term binds, e.g. two stage counts
// that both hide the latency) more latency headroom, then fewer spilled bytes.
bool ranks_before(const Estimate& a, const Estimate& b);

// The estimate of one candidate from the device facts and its compiled metrics.
Estimate estimate_gemm(const DeviceFacts& d, const GemmView& g, DType dtype, const Metrics& m);
// For a GPU candidate the model cannot read as a GEMM (lower = better): higher occupancy, fewer registers,
// no spills. An order only; occupancy is never a reason to prune.
double generic_gpu_score(const Metrics& m);
// One line: "0.245 ms, 561 TFLOP/s, L2 bandwidth: 0.0156 B/flop, 256 tiles, 2 per SM (97%), ..."
std::string describe(const Estimate& e);

}  // namespace kb::tune
