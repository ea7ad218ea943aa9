#include "tune/model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "backends/triton/triton_kernels.h"
#include "tune/prune.h"

namespace kb::tune {

double metric(const Metrics& m, const char* name) {
  auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}

namespace {

std::optional<int64_t> int_param(const Params& p, const std::string& name) {
  if (!p.has(name)) return std::nullopt;
  const auto& v = p.values().at(name);
  if (!std::holds_alternative<int64_t>(v)) return std::nullopt;
  return std::get<int64_t>(v);
}

// The tile extent along one GEMM axis ("M", "N" or "K") under the names kernels give it.
std::optional<int64_t> tile(const Params& p, const std::string& axis) {
  for (const std::string& n : {"B" + axis, "BLOCK_" + axis, "BLOCK_SIZE_" + axis, "TILE_" + axis})
    if (auto v = int_param(p, n); v && *v > 0) return v;
  return std::nullopt;
}

std::optional<int64_t> extent(const Shape& s, const std::string& axis) {
  if (s.label.empty()) return axis == "M" ? s.M : axis == "N" ? s.N : s.K;
  for (const std::string& n : {axis, std::string(1, char(axis[0] - 'A' + 'a'))})
    if (auto it = s.values.find(n); it != s.values.end() && it->second > 0) return it->second;
  return std::nullopt;
}

double ceil_div_d(double a, double b) { return std::ceil(a / b); }

}  // namespace

std::string option_param(const std::string& option) {
  return std::string(triton::kOptionPrefix) + option;  // num_warps -> opt.num_warps (backends/triton/triton_kernels.h)
}

std::optional<GemmView> gemm_view(const Params& p, const Shape& s, DType d, const Metrics& m, int warp_size,
                                  std::string* why) {
  GemmView g;
  const auto bm = tile(p, "M"), bn = tile(p, "N"), bk = tile(p, "K");
  if (!bm || !bn || !bk) {
    if (why) *why = "no tile parameters (BM, BN, BK or BLOCK_M, BLOCK_N, BLOCK_K)";
    return std::nullopt;
  }
  const auto M = extent(s, "M"), N = extent(s, "N"), K = extent(s, "K");
  if (!M || !N || !K || *M <= 0 || *N <= 0 || *K <= 0) {
    if (why) *why = fmt::format("shape {} does not name M, N and K", s.str());
    return std::nullopt;
  }
  g.M = *M, g.N = *N, g.K = *K, g.bm = *bm, g.bn = *bn, g.bk = *bk;
  if (auto w = int_param(p, option_param("num_warps"))) g.warps = int(*w);
  else if (m.count("num_warps")) g.warps = int(metric(m, "num_warps"));
  else g.warps = int(metric(m, "threads_per_block")) / std::max(1, warp_size);
  if (g.warps <= 0) {
    if (why) *why = "the warps per block are not known (no num_warps and no threads_per_block metric)";
    return std::nullopt;
  }
  if (auto st = int_param(p, option_param("num_stages"))) g.stages = int(*st);
  else if (auto st2 = int_param(p, "STAGES")) g.stages = int(*st2);
  g.stages = std::max(1, g.stages);
  g.in_bytes = g.out_bytes = double(dtype_bytes(d));
  return g;
}

// Why one function: the four terms share the tile's byte and flop counts, and splitting them apart would
// pass a dozen intermediate quantities around; each term is one commented block.
Estimate estimate_gemm(const DeviceFacts& d, const GemmView& g, DType dtype, const Metrics& m) {
  Estimate e;
  e.gemm = true;
  const double bm = double(g.bm), bn = double(g.bn), bk = double(g.bk);
  // (1) Arithmetic intensity of the tile: per K step a block loads its A and B slices (rows past M and
  // columns past N are masked, never loaded) and the tensor cores multiply the whole tile.
  const double stage_bytes = (std::min(bm, double(g.M)) + std::min(bn, double(g.N))) * bk * g.in_bytes;
  const double flops_step = 2 * bm * bn * bk;
  const double threads = double(g.warps) * d.warp_size;
  e.spill_bytes = spill_bytes(m, d.amd);
  e.bytes_per_flop = (stage_bytes + e.spill_bytes * threads) / flops_step;  // spills assumed in the K loop
  // (4) Register and shared-memory pressure: blocks resident per SM, as the backend computed them from
  // registers, shared memory (LDS) and warps.
  if (m.count("workgroups_per_cu")) e.resident = int(metric(m, "workgroups_per_cu"));
  else if (m.count("occupancy")) e.resident = int(std::lround(metric(m, "occupancy") * d.max_warps_per_sm / g.warps));
  e.resident = std::max(1, e.resident);
  // (3) Pipeline depth against latency: the stages shared memory really holds (a loop Triton did not
  // pipeline holds one), of which all but the one being multiplied are loads in flight.
  // On AMD, Triton's stream pipeliner keeps the next K step's loads in registers and num_stages - 1 steps in
  // LDS: one more than LDS holds.
  const double full_stage = (bm + bn) * bk * g.in_bytes;
  const double smem = block_smem_bytes(m, d.amd);
  e.stages_asked = g.stages;
  e.stages_held = g.stages;
  if (smem > 0) e.stages_held = std::clamp(int(std::floor(smem / full_stage + 1e-9)) + (d.amd ? 1 : 0), 1, g.stages);
  e.inflight_bytes = std::max(1, e.stages_held - 1) * stage_bytes;
  // The rate of one SM running c blocks, flop/s: the least of its tensor cores (with enough warps to
  // issue to each), its share of L2 bandwidth over the bytes each flop needs, and what c blocks' loads in
  // flight sustain over the latency (Little's law).
  const double peak_sm = d.flops(dtype) / d.sms, bw_sm = d.l2_bytes_per_s_per_sm(), lat = d.mem_latency_s;
  auto caps = [&](double c) {
    const double compute = peak_sm * std::min(1.0, c * g.warps / d.mma_units_per_sm);
    return std::array<double, 3>{compute, bw_sm / e.bytes_per_flop, c * e.inflight_bytes / (lat * e.bytes_per_flop)};
  };
  auto rate = [&](double c) {
    auto r = caps(c);
    return *std::min_element(r.begin(), r.end());
  };
  // (2) Wave quantization: the tiles spread over the SMs; the busiest SM runs ceil(tiles / SMs) of them,
  // `resident` at a time, each round paying one latency to fill its pipeline.
  e.tiles = int64_t(ceil_div_d(double(g.M), bm) * ceil_div_d(double(g.N), bn));
  e.tiles_per_sm = int64_t(ceil_div_d(double(e.tiles), d.sms));
  e.wave_efficiency = double(e.tiles) / (double(d.sms) * double(e.tiles_per_sm));
  const double tile_flops = flops_step * ceil_div_d(double(g.K), bk);
  const int64_t full = e.tiles_per_sm / e.resident, rest = e.tiles_per_sm % e.resident;
  double t_sm = double(full) * e.resident * tile_flops / rate(e.resident) + double(full + (rest > 0)) * lat;
  if (rest > 0) t_sm += double(rest) * tile_flops / rate(double(rest));
  // The whole kernel cannot beat device memory: A and B read once (L2 serves the reuse), C written once.
  const double dram = (double(g.M) * g.K + double(g.K) * g.N) * g.in_bytes + double(g.M) * g.N * g.out_bytes;
  const double t_dram = dram / d.hbm_bytes_per_s;
  e.time_s = std::max(t_sm, t_dram);
  e.score = e.time_s;
  e.tflops = 2.0 * double(g.M) * double(g.N) * double(g.K) / e.time_s * 1e-12;
  const double c0 = double(std::min<int64_t>(e.resident, e.tiles_per_sm));
  const auto c = caps(c0);
  e.latency_margin = c[2] / std::min(c[0], c[1]);
  e.latency_cover = std::min(1.0, e.latency_margin);
  if (t_dram >= t_sm) e.bound = "HBM";
  else if (c[2] < std::min(c[0], c[1])) e.bound = "latency";
  else if (c[1] < c[0]) e.bound = "L2 bandwidth";
  else if (c[0] < peak_sm) e.bound = "warps";
  else e.bound = dtype == DType::f32 ? "FMA units" : "tensor cores";
  return e;
}

bool ranks_before(const Estimate& a, const Estimate& b) {
  if (a.score != b.score) return a.score < b.score;
  if (a.latency_margin != b.latency_margin) return a.latency_margin > b.latency_margin;
  return a.spill_bytes < b.spill_bytes;
}

double generic_gpu_score(const Metrics& m) {
  const double occ = m.count("occupancy") ? metric(m, "occupancy") : 0.5;
  const double regs = std::max(metric(m, "registers"), metric(m, "vgprs"));
  return -occ + regs / 1024.0 + (metric(m, "spill_stores") + metric(m, "spill_loads") + metric(m, "vgpr_spills")) / 64.0;
}

std::string describe(const Estimate& e) {
  if (!e.gemm) return fmt::format("generic order ({}): score {:.3f}", e.note, e.score);
  std::string s = fmt::format("{:.3f} ms, {:.0f} TFLOP/s, {}: {:.4f} B/flop, {} tiles, {} per SM ({:.0f}%), {} block{}/SM, "
                              "{:.0f} KiB in flight ({:.0f}% of latency)",
                              1e3 * e.time_s, e.tflops, e.bound, e.bytes_per_flop, e.tiles, e.tiles_per_sm,
                              100 * e.wave_efficiency, e.resident, e.resident == 1 ? "" : "s", e.inflight_bytes / 1024,
                              100 * e.latency_cover);
  if (e.spill_bytes > 0) s += fmt::format(", {:.0f} B spilled/thread", e.spill_bytes);
  if (e.stages_held < e.stages_asked)
    s += fmt::format(", shared memory holds {} of {} stages{}", e.stages_held, e.stages_asked,
                     e.stages_held == 1 ? " (the K loop is not pipelined)" : "");
  return s;
}

}  // namespace kb::tune
