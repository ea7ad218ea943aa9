#include "tune/target.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace kb::tune {

namespace {

constexpr int64_t kKiB = 1024;
constexpr double kNvidiaL2PerSm = 5120.0 / 108;  // B/clk per SM
constexpr double kLoadedLatencyClk = 1200;       // cycles

// Published figures (vendor data sheets and whitepapers; docs/tune.md cites each). Rates are dense (no
// sparsity). Two are not published per part: the L2 bandwidth an SM gets (NVIDIA's one published figure,
// A100's 5120 B/clk over 108 SMs = 47.4 B/clk, is used for every NVIDIA part) and the latency of a load
// while every SM streams (taken as 1200 cycles, twice the ~600 cycles microbenchmarks report for an idle
// H100; 1500 cycles on MI300X). docs/tune.md says how the order depends on them.
std::vector<DeviceFacts> table() {
  std::vector<DeviceFacts> v;
  DeviceFacts h100;
  h100.device = "H100 SXM5";
  h100.targets = {"sm_90a", "sm_90"};
  h100.sms = 132;
  h100.clock_hz = 1.83e9;            // 132 SMs x 4096 flop/clk (dense FP16) x 1.83 GHz = 989 TFLOP/s
  h100.tensor_f16_flops = 989.4e12;
  h100.fp32_flops = 66.9e12;
  h100.hbm_bytes_per_s = 3.35e12;    // HBM3
  h100.l2_bytes_per_clk_per_sm = kNvidiaL2PerSm;
  h100.mem_latency_s = kLoadedLatencyClk / h100.clock_hz;
  h100.max_smem_per_block = 227 * kKiB;
  v.push_back(h100);

  DeviceFacts h200 = h100;           // the same GH100 compute, HBM3e
  h200.device = "H200 SXM";
  h200.hbm_bytes_per_s = 4.8e12;
  v.push_back(h200);

  DeviceFacts a100;
  a100.device = "A100 SXM4";
  a100.targets = {"sm_80"};
  a100.sms = 108;
  a100.clock_hz = 1.41e9;            // 108 x 2048 flop/clk x 1.41 GHz = 312 TFLOP/s
  a100.tensor_f16_flops = 312e12;
  a100.fp32_flops = 19.5e12;
  a100.hbm_bytes_per_s = 2.039e12;   // HBM2e, 80 GB part
  a100.l2_bytes_per_clk_per_sm = kNvidiaL2PerSm;
  a100.mem_latency_s = kLoadedLatencyClk / a100.clock_hz;
  a100.max_smem_per_block = 163 * kKiB;
  v.push_back(a100);

  DeviceFacts b200;
  b200.device = "B200";
  b200.targets = {"sm_100a", "sm_100"};
  b200.sms = 148;
  b200.clock_hz = 1.85e9;            // 148 x 8192 flop/clk x 1.85 GHz = 2.24 PFLOP/s (2.25 published)
  b200.tensor_f16_flops = 2.25e15;
  b200.fp32_flops = 75e12;
  b200.hbm_bytes_per_s = 8e12;       // HBM3e
  b200.l2_bytes_per_clk_per_sm = kNvidiaL2PerSm;
  b200.mem_latency_s = kLoadedLatencyClk / b200.clock_hz;
  b200.max_smem_per_block = 227 * kKiB;
  v.push_back(b200);

  DeviceFacts mi300x;
  mi300x.device = "MI300X";
  mi300x.targets = {"gfx942"};
  mi300x.amd = true;
  mi300x.sms = 304;
  mi300x.clock_hz = 2.1e9;           // 304 CUs x 2048 flop/clk x 2.1 GHz = 1307 TFLOP/s
  mi300x.tensor_f16_flops = 1307.4e12;
  mi300x.fp32_flops = 163.4e12;
  mi300x.hbm_bytes_per_s = 5.3e12;   // HBM3
  mi300x.l2_bytes_per_clk_per_sm = 2048.0 / 38;  // 2 KiB/clk per XCD's L2, 38 CUs per XCD
  mi300x.mem_latency_s = 1500 / mi300x.clock_hz;
  mi300x.warp_size = 64;
  mi300x.max_warps_per_sm = 32;      // 4 SIMDs x 8 waves
  mi300x.max_smem_per_block = 64 * kKiB;
  mi300x.max_regs_per_thread = 512;  // unified VGPR + AGPR file per lane
  mi300x.regs_per_block = 512;       // per SIMD lane, shared by the block's waves on that SIMD
  v.push_back(mi300x);
  return v;
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<DeviceFacts>& all_device_facts() {
  static const std::vector<DeviceFacts> t = table();
  return t;
}

const DeviceFacts* device_facts(const std::string& target, const std::string& device) {
  const std::string want = lower(device);
  for (const auto& d : all_device_facts()) {
    if (std::find(d.targets.begin(), d.targets.end(), target) == d.targets.end()) continue;
    const std::string name = lower(d.device);
    if (want.empty() || name == want || name.rfind(want + " ", 0) == 0) return &d;
  }
  return nullptr;
}

std::string launch_limit_reason(const DeviceFacts& d, int threads, int64_t smem_bytes, int regs) {
  if (threads > d.max_threads_per_block)
    return fmt::format("cannot launch: {} threads per block, the {} allows {}", threads, d.device, d.max_threads_per_block);
  if (smem_bytes > d.max_smem_per_block)
    return fmt::format("cannot launch: {} B of {} per block, the {} allows {} B ({} KiB)", smem_bytes,
                       d.amd ? "LDS" : "shared memory", d.device, d.max_smem_per_block, d.max_smem_per_block / 1024);
  if (regs > d.max_regs_per_thread)
    return fmt::format("cannot launch: {} {} per thread, the {} allows {}", regs, d.amd ? "VGPRs" : "registers",
                       d.device, d.max_regs_per_thread);
  if (regs <= 0 || threads <= 0) return "";
  const int warps = (threads + d.warp_size - 1) / d.warp_size;
  if (d.amd) {  // the block's waves share the 4 SIMDs; each SIMD lane has regs_per_block VGPRs for its waves
    const int per_simd = (warps + d.mma_units_per_sm - 1) / d.mma_units_per_sm;
    const int64_t need = int64_t(per_simd) * ((regs + 7) / 8 * 8);
    if (need > d.regs_per_block)
      return fmt::format("cannot launch: {} waves of {} VGPRs need {} per SIMD lane, the {} has {}", warps, regs, need,
                         d.device, d.regs_per_block);
    return "";
  }
  const int64_t need = int64_t(warps) * ((regs * 32 + 255) / 256 * 256);  // allocated per warp in units of 256
  if (need > d.regs_per_block)
    return fmt::format("cannot launch: {} warps of {} registers need {} registers, a block may use {}", warps, regs, need,
                       d.regs_per_block);
  return "";
}

}  // namespace kb::tune
