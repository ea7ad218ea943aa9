#include "backends/hip/hip_kernels.h"

#include <cstdint>

#include <fmt/format.h>

#include "backends/hip/amdgpu_code_object.h"
#include "backends/kernel_decl.h"
#include "backends/triton/triton_kernels.h"
#include "core/error.h"

namespace kb {

namespace {

// Why MFMA kernels get twice the fp32 accumulation bound (harness/check.h, docs/correctness.md).
constexpr const char* kTensorCoreReason =
    "MFMA: matrix-core block FMAs, like tensor cores, keep products exact but may truncate the aligned "
    "addends (Fasi, Higham, Mikaitis & Pranesh 2021), up to 2 units of fp32 roundoff per step";

constexpr int64_t kWave = 64;
constexpr int64_t kLdsBudget = 65536;
constexpr int64_t kPad16 = 8;  // kernels/hip/kb_hip_gemm.h kPad16
constexpr int64_t kPadF32 = 4;  // matmul_tiled.hip f32 LDA/LDB padding

// The targets these kernels are written for: wave64 CDNA2/CDNA3 with the bf16_1k MFMA forms.
std::optional<std::string> check_target(const std::string& kernel, const std::string& target) {
  if (target.empty() || amdgpu_arch(target)) return std::nullopt;
  return fmt::format("{} is written for CDNA2/CDNA3 (gfx90a, gfx940, gfx941, gfx942: wave64, MFMA bf16_1k); "
                     "target {} is not one of them",
                     kernel, target);
}

std::optional<std::string> check_mfma(const Params& p, int64_t wave_m, int64_t wave_n, int64_t bk) {
  int64_t mf = p.get_int("MFMA");
  if (mf != 32 && mf != 16) return fmt::format("MFMA={} must be 32 (32x32x8) or 16 (16x16x16)", mf);
  if (wave_m % mf || wave_n % mf)
    return fmt::format("wave tile {}x{} is not a multiple of the {}x{} MFMA block", wave_m, wave_n, mf, mf);
  int64_t kstep = mf == 32 ? 8 : 16;
  if (bk % kstep) return fmt::format("BK={} must be a multiple of the MFMA K ({})", bk, kstep);
  int64_t acc = wave_m * wave_n / kWave;
  if (acc > 256) return fmt::format("{} fp32 accumulators per lane exceed the 256 AGPRs", acc);
  return std::nullopt;
}

std::optional<std::string> check_occ(const Params& p) {
  int64_t occ = p.get_int("OCC");
  if (occ < 0 || occ > 8) return fmt::format("OCC={} must be in 0..8 (waves per SIMD; 0 = compiler's choice)", occ);
  return std::nullopt;
}

// K and N feed 16-byte vector loads (8 x 16-bit, 4 x fp32 elements).
std::optional<std::string> check_shape_vec8(const Params&, DType, const Shape& s) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return fmt::format("shape {} must be positive", s.str());
  if (s.N % 8 || s.K % 8)
    return fmt::format("shape {}: N and K must be multiples of 8 (16-byte vector loads)", s.str());
  if (s.M > INT32_MAX || s.N > INT32_MAX || s.K > INT32_MAX) return fmt::format("shape {} exceeds int32", s.str());
  return std::nullopt;
}

std::optional<std::string> check_tiled(const Params& p, DType d, const std::string& target) {
  if (auto why = check_positive(p, {"BM", "BN", "BK", "WM", "WN"})) return why;
  if (auto why = check_occ(p)) return why;
  if (auto why = check_target("matmul_tiled", target)) return why;
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), wm = p.get_int("WM"),
          wn = p.get_int("WN"), db = p.get_int("DB");
  if (db != 0 && db != 1) return fmt::format("DB={} must be 0 or 1", db);
  if (wm * wn * kWave > 1024) return fmt::format("WM*WN={} waves exceed 16 per workgroup", wm * wn);
  if (bm % wm || bn % wn) return fmt::format("waves {}x{} do not divide the {}x{} tile", wm, wn, bm, bn);
  int64_t wtm = bm / wm, wtn = bn / wn;
  if (d == DType::f32) {
    if (wtm % 8 || wtn % 8) return fmt::format("f32: wave tile {}x{} must be a multiple of 8x8", wtm, wtn);
    if (bk % 4 || bn % 4) return fmt::format("f32: BK={} and BN={} must be multiples of 4", bk, bn);
    if (wtm * wtn / kWave > 256) return fmt::format("f32: {} accumulators per lane", wtm * wtn / kWave);
  } else {
    if (auto why = check_mfma(p, wtm, wtn, bk)) return why;
    if (bk % 8 || bn % 8) return fmt::format("BK={} and BN={} must be multiples of 8", bk, bn);
  }
  int64_t lds = hip_kernel_lds_bytes("matmul_tiled", p, d);
  if (lds > kLdsBudget)
    return fmt::format("{}: LDS tiles need {} bytes, more than the 64 KiB per workgroup", to_string(d), lds);
  return std::nullopt;
}

std::optional<std::string> check_ws(const Params& p, DType d, const std::string& target) {
  if (d == DType::f32) return std::string("matmul_ws is an MFMA kernel: f16 or bf16 only");
  if (auto why = check_positive(p, {"BM", "BN", "BK", "STAGES", "PW", "CWM", "CWN"})) return why;
  if (auto why = check_occ(p)) return why;
  if (auto why = check_target("matmul_ws", target)) return why;
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), stages = p.get_int("STAGES"),
          pw = p.get_int("PW"), cwm = p.get_int("CWM"), cwn = p.get_int("CWN");
  if (stages < 2 || stages > 8) return fmt::format("STAGES={} must be in 2..8", stages);
  if (pw > 4) return fmt::format("PW={} producer waves: at most 4", pw);
  if ((pw + cwm * cwn) * kWave > 1024)
    return fmt::format("{} producer + {} consumer waves exceed 16 per workgroup", pw, cwm * cwn);
  if (bm % cwm || bn % cwn) return fmt::format("consumer waves {}x{} do not divide the {}x{} tile", cwm, cwn, bm, bn);
  if (auto why = check_mfma(p, bm / cwm, bn / cwn, bk)) return why;
  if (bk % 8 || bn % 8) return fmt::format("BK={} and BN={} must be multiples of 8", bk, bn);
  int64_t lds = hip_kernel_lds_bytes("matmul_ws", p, d);
  if (lds > kLdsBudget)
    return fmt::format("ring of {} slots needs {} bytes of LDS, more than the 64 KiB per workgroup", stages, lds);
  return std::nullopt;
}

const std::vector<std::string> kHeaders = {"hip/kb_hip_gemm.h", "common/kb_portability.h",
                                           "common/kb_portability_hip.h"};
constexpr const char* kOccHelp = "minimum waves per SIMD asked of the register allocator (0 = compiler's)";

KernelDecl matmul_tiled() {
  return KernelDeclBuilder("hip", "matmul_tiled")
      .source("hip/matmul_tiled.hip", kHeaders)
      .description("tiled GEMM for CDNA: f16/bf16 on MFMA (32x32x8 or 16x16x16), f32 SIMT; LDS double buffering (DB=1)")
      .tile_params(128, 128, 32, "workgroup")
      .int_param("WM", 2, "waves along M")
      .int_param("WN", 2, "waves along N")
      .int_param("MFMA", 32, "MFMA form: 32 = 32x32x8, 16 = 16x16x16 (f16/bf16)")
      .int_param("DB", 1, "1 = double-buffered LDS (one barrier per K tile), 0 = single buffer")
      .int_param("OCC", 0, kOccHelp)
      .dtypes({DType::f32, DType::f16, DType::bf16})
      .defaults_config("best")
      .config("mfma16", {{"MFMA", 16}})
      .config("small", {{"BM", 64}, {"BN", 64}, {"BK", 16}, {"MFMA", 16}})
      .config("large", {{"BM", 256}})
      .config("single_buffer", {{"DB", 0}})
      .tunable("BM", {64, 128, 256})
      .tunable("BN", {64, 128})
      .tunable("BK", {16, 32})
      .tunable("MFMA", {16, 32})
      .tunable("OCC", {0, 2})
      .tolerance({2, {}}, kTensorCoreReason)
      .check_params(check_tiled)
      .check_shape(check_shape_vec8);
}

KernelDecl matmul_ws() {
  return KernelDeclBuilder("hip", "matmul_ws")
      .source("hip/matmul_ws.hip", kHeaders)
      .description("wave-specialized GEMM: PW producer waves stream tiles global->LDS into a STAGES-deep ring, "
                   "CWMxCWN consumer waves run MFMA; hand-off through LDS counters")
      .tile_params(128, 128, 32, "workgroup")
      .int_param("STAGES", 3, "ring slots")
      .int_param("PW", 1, "producer waves")
      .int_param("CWM", 2, "consumer waves along M")
      .int_param("CWN", 2, "consumer waves along N")
      .int_param("MFMA", 32, "MFMA form: 32 = 32x32x8, 16 = 16x16x16")
      .int_param("OCC", 0, kOccHelp)
      .dtypes({DType::f16, DType::bf16})
      .defaults_config("best")
      .config("deep", {{"BM", 64}, {"STAGES", 4}, {"PW", 2}})
      .config("mfma16", {{"STAGES", 2}, {"MFMA", 16}})
      .config("wide", {{"BN", 256}, {"STAGES", 2}, {"PW", 2}, {"CWN", 4}})
      .tunable("BN", {128, 256})
      .tunable_range("STAGES", 2, 4, 1)
      .tunable("PW", {1, 2})
      .tunable("MFMA", {16, 32})
      .tolerance({2, {}}, kTensorCoreReason)
      .check_params(check_ws)
      .check_shape(check_shape_vec8);
}

}  // namespace

const std::vector<KernelDecl>& hip_kernels() {
  static const std::vector<KernelDecl> k = [] {
    std::vector<KernelDecl> v = {matmul_tiled(), matmul_ws()};
    for (auto& t : triton::triton_kernel_decls("hip")) v.push_back(std::move(t));
    return v;
  }();
  return k;
}

HipLaunchShape hip_launch_shape(const std::string& kernel, const Params& p) {
  HipLaunchShape s;
  s.block_m = int(p.get_int("BM"));
  s.block_n = int(p.get_int("BN"));
  if (kernel == "matmul_tiled") s.threads = int(kWave * p.get_int("WM") * p.get_int("WN"));
  else if (kernel == "matmul_ws") s.threads = int(kWave * (p.get_int("PW") + p.get_int("CWM") * p.get_int("CWN")));
  else throw InputError(fmt::format("unknown HIP kernel '{}'", kernel));
  return s;
}

int64_t hip_kernel_lds_bytes(const std::string& kernel, const Params& p, DType d) {
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK");
  if (kernel == "matmul_tiled") {
    int64_t nbuf = p.get_int("DB") ? 2 : 1;
    if (d == DType::f32) return nbuf * (bk * (bm + kPadF32) + bk * (bn + kPadF32)) * 4;
    return nbuf * (bm * (bk + kPad16) + bk * (bn + kPad16)) * 2;
  }
  if (kernel == "matmul_ws") {
    int64_t stages = p.get_int("STAGES");
    return stages * (bm * (bk + kPad16) + bk * (bn + kPad16)) * 2 + 2 * stages * 4;
  }
  throw InputError(fmt::format("unknown HIP kernel '{}'", kernel));
}

}  // namespace kb
