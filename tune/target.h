// Public facts about the GPUs `kbisect tune` ranks for, per compile target: the hard limits pruning
// checks (what cannot launch) and the rates, sizes and latency the static model uses (tune/model.h).
// docs/tune.md lists every figure with its unit and where it comes from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/kernel.h"

namespace kb::tune {

struct DeviceFacts {
  std::string device;           // "H100 SXM5"
  std::vector<std::string> targets;  // compile targets it answers for ("sm_90a", "sm_90")
  bool amd = false;             // CUs, wave64, VGPRs per SIMD lane
  int sms = 0;                  // SMs (NVIDIA) or CUs (AMD)
  double clock_hz = 0;          // the clock its published rates are stated at
  double tensor_f16_flops = 0;  // dense FP16/BF16 on tensor (matrix) cores, fp32 accumulate, flop/s
  double fp32_flops = 0;        // fp32 without tensor cores (FMA), flop/s
  double hbm_bytes_per_s = 0;   // device memory bandwidth, B/s
  double l2_bytes_per_clk_per_sm = 0;  // what one SM (CU) can pull from L2, B/clk
  double mem_latency_s = 0;     // a load that goes to device memory, s
  int warp_size = 32;
  int max_warps_per_sm = 64;    // resident warps (waves) per SM (CU)
  int mma_units_per_sm = 4;     // tensor cores (matrix cores): one per SM sub-partition (SIMD), fed by its own warps
  // Hard limits: a block (workgroup) over any of these cannot launch.
  int max_threads_per_block = 1024;
  int64_t max_smem_per_block = 0;   // shared memory (LDS) per block, static + dynamic, bytes
  int max_regs_per_thread = 255;    // NVIDIA: registers per thread; AMD: VGPRs + AGPRs per lane
  int64_t regs_per_block = 65536;   // NVIDIA: 32-bit registers a block may use (AMD: per SIMD, see below)

  // The flop rate for this dtype's GEMM: tensor cores for f16/bf16, FMA for f32 (kbisect's fp32 GEMMs
  // multiply in IEEE fp32, not TF32).
  double flops(DType d) const { return d == DType::f32 ? fp32_flops : tensor_f16_flops; }
  double l2_bytes_per_s_per_sm() const { return l2_bytes_per_clk_per_sm * clock_hz; }
};

// The facts for a compile target ("sm_90a", "sm_80", "sm_100a", "gfx942"), the named device of that target
// when `device` is given (case-insensitive: "H200 SXM", "h200"); nullptr when kbisect has none. The first
// device listed for a target is its default (sm_90a: H100 SXM5).
const DeviceFacts* device_facts(const std::string& target, const std::string& device = "");
// Every device kbisect has facts for, in table order.
const std::vector<DeviceFacts>& all_device_facts();

// Why a block of `threads` threads with `smem_bytes` of shared memory (LDS) and `regs` registers per
// thread (VGPRs on AMD) cannot launch on this device, or "" when it can.
std::string launch_limit_reason(const DeviceFacts& d, int threads, int64_t smem_bytes, int regs);

}  // namespace kb::tune
