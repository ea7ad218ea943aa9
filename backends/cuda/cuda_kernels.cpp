#include "backends/cuda/cuda_kernels.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "backends/kernel_decl.h"
#include "backends/triton/triton_kernels.h"
#include "core/error.h"
#include "core/text.h"

namespace kb::cuda {

namespace {

// Why mma.sync/wgmma kernels get twice the fp32 accumulation bound (harness/check.h, docs/correctness.md).
constexpr const char* kTensorCoreReason =
    "mma.sync/wgmma: tensor-core block FMAs keep products exact but truncate the aligned addends "
    "(Fasi, Higham, Mikaitis & Pranesh 2021), up to 2 units of fp32 roundoff per step";

using Reason = std::optional<std::string>;

Reason need_sm80(const std::string& target) {
  if (target.empty()) return std::nullopt;
  if (arch_limits(target).sm < 80) return fmt::format("needs sm_80 or newer (cp.async, bf16 mma), target is {}", target);
  return std::nullopt;
}

Reason smem_fits(int64_t bytes, const std::string& target) {
  int64_t limit = target.empty() ? 227 * 1024 : arch_limits(target).max_smem_per_block;
  if (bytes > limit) return fmt::format("needs {} bytes of shared memory per block; {} allows {}", bytes,
                                        target.empty() ? "sm_90" : target, limit);
  return std::nullopt;
}

bool swizzle_ok(int64_t chunks_per_row) { return chunks_per_row == 2 || chunks_per_row == 4 || chunks_per_row % 8 == 0; }

// The Ampere tensor-core tile rules shared by matmul_tiled (bf16/f16) and matmul_ws_sm80.
Reason check_mma_tiles(const Params& p) {
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), wm = p.get_int("WM"), wn = p.get_int("WN"),
          st = p.get_int("STAGES");
  for (auto [n, v] : {std::pair{"BM", bm}, {"BN", bn}, {"BK", bk}, {"WM", wm}, {"WN", wn}})
    if (v <= 0 || v % 16) return fmt::format("{}={} must be a positive multiple of 16", n, v);
  if (bm % wm) return fmt::format("WM={} does not divide BM={}", wm, bm);
  if (bn % wn) return fmt::format("WN={} does not divide BN={}", wn, bn);
  if (!swizzle_ok(bk / 8)) return fmt::format("BK={} must be 16, 32 or a multiple of 64 (swizzled rows)", bk);
  if (!swizzle_ok(bn / 8)) return fmt::format("BN={} must be 16, 32 or a multiple of 64 (swizzled rows)", bn);
  if ((wm / 16) * (wn / 8) * 4 > 128) return fmt::format("warp tile {}x{} needs more than 128 accumulators per thread", wm, wn);
  if (st < 2) return fmt::format("STAGES={} must be at least 2", st);
  return std::nullopt;
}

Reason shape_positive(const Shape& s) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return fmt::format("shape {} must be positive", s.str());
  if (s.M > (1LL << 31) - 1 || s.N > (1LL << 31) - 1 || s.K > (1LL << 31) - 1) return "dimensions must fit in int32";
  return std::nullopt;
}

Reason shape_k8_n8(const Shape& s) {
  if (auto r = shape_positive(s)) return r;
  if (s.K % 8 || s.N % 8) return fmt::format("shape {}: K and N must be multiples of 8 (16-byte copies)", s.str());
  return std::nullopt;
}

// The block of a tensor-core kernel fits the target: at most 1024 threads, dynamic shared memory in range.
Reason mma_block_fits(const std::string& kernel, const Params& p, DType d, const std::string& target) {
  auto ls = launch_shape(kernel, p, d);
  if (ls.threads > 1024) return fmt::format("{} threads per block exceed 1024", ls.threads);
  return smem_fits(ls.dynamic_smem, target);
}

Reason check_tiled_f32(const Params& p) {
  if (auto r = check_positive(p, {"BM", "BN", "BK", "TM", "TN"})) return r;
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), tm = p.get_int("TM"), tn = p.get_int("TN");
  if (bm % tm) return fmt::format("TM={} does not divide BM={}", tm, bm);
  if (bn % tn) return fmt::format("TN={} does not divide BN={}", tn, bn);
  int64_t threads = (bm / tm) * (bn / tn);
  if (threads < 32 || threads > 1024) return fmt::format("(BM/TM)*(BN/TN)={} threads must be in 32..1024", threads);
  if (tm * tn > 256) return fmt::format("TM*TN={} accumulators per thread exceed 256", tm * tn);
  if (bk * (bm + bn) * 4 > 48 * 1024) return fmt::format("static shared memory {} bytes exceeds 48 KiB", bk * (bm + bn) * 4);
  return std::nullopt;
}

Reason check_tiled(const Params& p, DType d, const std::string& target) {
  if (d == DType::f32) return check_tiled_f32(p);
  if (auto r = need_sm80(target)) return r;
  if (auto r = check_mma_tiles(p)) return r;
  return mma_block_fits("matmul_tiled", p, d, target);
}

Reason check_ws_sm80(const Params& p, DType d, const std::string& target) {
  if (d == DType::f32) return "fp32 has no tensor-core path in this kernel (use matmul_tiled)";
  if (auto r = need_sm80(target)) return r;
  if (auto r = check_mma_tiles(p)) return r;
  int64_t st = p.get_int("STAGES"), pw = p.get_int("PRODUCERS");
  if (st > 7) return fmt::format("STAGES={} exceeds 7 (2*STAGES+1 named barriers of 16)", st);
  if (pw < 1 || pw > 4) return fmt::format("PRODUCERS={} must be in 1..4", pw);
  return mma_block_fits("matmul_ws_sm80", p, d, target);
}

Reason check_ws_sm90(const Params& p, DType d, const std::string& target) {
  if (d == DType::f32) return "wgmma kernel takes bf16/f16 inputs only";
  if (!target.empty()) {
    auto a = arch_limits(target);
    if (a.sm != 90 || !a.arch_specific) return fmt::format("needs sm_90a (wgmma, setmaxnreg, TMA), target is {}", target);
  }
  int64_t bn = p.get_int("BN"), st = p.get_int("STAGES"), pe = p.get_int("PERSISTENT");
  if (bn < 64 || bn > 256 || bn % 64) return fmt::format("BN={} must be 64, 128, 192 or 256", bn);
  if (st < 2 || st > 8) return fmt::format("STAGES={} must be in 2..8", st);
  if (pe != 0 && pe != 1) return fmt::format("PERSISTENT={} must be 0 or 1", pe);
  return smem_fits(launch_shape("matmul_ws_sm90", p, d).dynamic_smem, target.empty() ? "sm_90a" : target);
}

Reason check_shape_k8_n8(const Params&, DType, const Shape& s) { return shape_k8_n8(s); }
// matmul_tiled: the fp32 SIMT path reads element by element (any shape); the bf16/f16 path copies rows
// in 16-byte cp.async chunks (kb_mma_sm80.h), so a row of A (K elements) and of B (N elements) must
// start 16-byte aligned. A misaligned copy is a sticky CUDA_ERROR_MISALIGNED_ADDRESS that ends the
// context for every later case, so the shape is refused before launch.
Reason check_shape_tiled(const Params&, DType d, const Shape& s) {
  return d == DType::f32 ? shape_positive(s) : shape_k8_n8(s);
}

const std::vector<std::string> kMmaHeaders = {"cuda/kb_mma_sm80.h", "common/kb_portability.h",
                                              "common/kb_portability_cuda.h"};

KernelDecl matmul_tiled() {
  return KernelDeclBuilder("cuda", "matmul_tiled")
      .source("cuda/matmul_tiled.cu", kMmaHeaders)
      .description("f32: SIMT tiled GEMM (BM,BN,BK,TM,TN); bf16/f16: mma.sync m16n8k16 + ldmatrix, cp.async "
                   "STAGES-deep pipeline, swizzled shared layout (BM,BN,BK,WM,WN,STAGES); fp32 accumulate")
      .tile_params(128, 128, 32, "block")
      .int_param("TM", 8, "f32: rows per thread")
      .int_param("TN", 8, "f32: columns per thread")
      .int_param("WM", 64, "bf16/f16: rows per warp")
      .int_param("WN", 32, "bf16/f16: columns per warp")
      .int_param("STAGES", 3, "bf16/f16: cp.async pipeline depth")
      .dtypes({DType::f32, DType::bf16, DType::f16})
      .defaults_config("best")
      .config("small", {{"BM", 64}, {"BN", 64}, {"TM", 4}, {"TN", 4}, {"WM", 32}, {"STAGES", 2}})
      .config("deep", {{"BN", 256}, {"WN", 64}, {"STAGES", 4}})
      .tunable("BM", {64, 128})
      .tunable("BN", {64, 128, 256})
      .tunable("WM", {32, 64})
      .tunable("WN", {32, 64})
      .tunable_range("STAGES", 2, 4, 1)
      .tolerance({2, {}}, kTensorCoreReason)
      .check_params(check_tiled)
      .check_shape(check_shape_tiled);
}

KernelDecl matmul_ws_sm80() {
  return KernelDeclBuilder("cuda", "matmul_ws_sm80")
      .source("cuda/matmul_ws_sm80.cu", kMmaHeaders)
      .description("warp-specialized GEMM, Ampere form: PRODUCERS cp.async warps fill a STAGES ring, mma.sync "
                   "consumer warps; named barriers (bar.sync/bar.arrive) per stage")
      .tile_params(128, 128, 32, "block")
      .int_param("WM", 64, "rows per consumer warp")
      .int_param("WN", 32, "columns per consumer warp")
      .int_param("STAGES", 4, "ring slots (2..7)")
      .int_param("PRODUCERS", 1, "producer warps")
      .dtypes({DType::bf16, DType::f16})
      .defaults_config("best")
      .config("small", {{"BM", 64}, {"BN", 64}, {"WM", 32}, {"STAGES", 3}})
      .config("wide", {{"BN", 256}, {"WN", 64}, {"STAGES", 3}, {"PRODUCERS", 2}})
      .tunable("BN", {64, 128, 256})
      .tunable("WN", {32, 64})
      .tunable_range("STAGES", 2, 6, 1)
      .tunable("PRODUCERS", {1, 2})
      .tolerance({2, {}}, kTensorCoreReason)
      .check_params(check_ws_sm80)
      .check_shape(check_shape_k8_n8);
}

KernelDecl matmul_ws_sm90() {
  return KernelDeclBuilder("cuda", "matmul_ws_sm90")
      .source("cuda/matmul_ws_sm90.cu", {"common/kb_portability.h", "common/kb_portability_cuda.h"})
      .description("warp-specialized Hopper GEMM: TMA producer warpgroup, STAGES-slot mbarrier ring, 2 consumer "
                   "warpgroups with wgmma m64n64k16, setmaxnreg; BM=128, BK=64, B uploaded transposed; optional "
                   "persistent tiles")
      .int_param("BN", 128, "columns per block (64..256, multiple of 64)")
      .int_param("STAGES", 4, "ring slots (2..8)")
      .int_param("PERSISTENT", 0, "1: grid = min(tiles, SMs), blocks stride over tiles")
      .dtypes({DType::bf16, DType::f16})
      .defaults_config("best")
      .config("persistent", {{"PERSISTENT", 1}})
      .config("wide", {{"BN", 256}, {"STAGES", 3}, {"PERSISTENT", 1}})
      .tunable_range("BN", 64, 256, 64)
      .tunable_range("STAGES", 2, 6, 1)
      .tunable("PERSISTENT", {0, 1})
      .tolerance({2, {}}, kTensorCoreReason)
      .check_params(check_ws_sm90)
      .check_shape(check_shape_k8_n8);
}

// cuBLAS as the reference the compiled kernels are measured against (backends/cuda/cublas_gemm.h). Its
// source file only documents the library call and keys the compile cache like any kernel's; "compiling"
// it runs no compiler (cuda_backend.cpp). No parameters: cuBLAS' heuristic picks its kernel per shape.
KernelDecl cublas() {
  return KernelDeclBuilder("cuda", "cublas")
      .source("cuda/cublas.cu", {})
      .description("cuBLAS cublasGemmEx (library reference, not compiled)")
      .dtypes({DType::bf16, DType::f16, DType::f32})
      .defaults_config("best")
      .tolerance({2, {}}, std::string("cuBLAS runs bf16/f16 on tensor cores (HMMA/wgmma): ") + kTensorCoreReason)
      .check_params([](const Params&, DType, const std::string&) -> Reason { return std::nullopt; })
      .check_shape([](const Params&, DType, const Shape& s) { return shape_positive(s); });
}

}  // namespace

const std::vector<KernelDecl>& cuda_kernels() {
  static const std::vector<KernelDecl> k = [] {
    std::vector<KernelDecl> v = {matmul_tiled(), matmul_ws_sm80(), matmul_ws_sm90(), cublas()};
    for (auto& t : triton::triton_kernel_decls("cuda")) v.push_back(std::move(t));
    return v;
  }();
  return k;
}

ArchLimits arch_limits(const std::string& target) {
  static const std::regex re("sm_([0-9]+)([af]?)");
  std::smatch m;
  if (!std::regex_match(target, m, re))
    throw InputError(fmt::format("CUDA target '{}' is not of the form sm_<NN>[a] (e.g. sm_80, sm_90a)", target));
  ArchLimits a;
  const int64_t sm = decimal_int64(m[1], fmt::format("CUDA target '{}'", target));
  if (sm > 10000) throw InputError(fmt::format("CUDA target '{}': no such architecture", target));
  a.sm = int(sm);
  a.arch_specific = !m[2].str().empty();
  auto kib = [](int k) { return k * 1024; };
  if (a.sm < 80) {  // Turing
    a.max_threads_per_sm = 1024, a.max_warps_per_sm = 32, a.max_blocks_per_sm = 16;
    a.smem_per_sm = kib(64), a.max_smem_per_block = kib(64), a.reserved_smem_per_block = 0;
  } else if (a.sm == 80 || a.sm == 87) {
    a.smem_per_sm = kib(164), a.max_smem_per_block = kib(163);
  } else if (a.sm == 86 || a.sm == 89 || a.sm >= 120) {
    a.max_threads_per_sm = 1536, a.max_warps_per_sm = 48, a.max_blocks_per_sm = a.sm == 86 ? 16 : 24;
    a.smem_per_sm = kib(100), a.max_smem_per_block = kib(99);
  } else {  // 90, 100, 103, 110
    a.smem_per_sm = kib(228), a.max_smem_per_block = kib(227);
  }
  return a;
}

double theoretical_occupancy(const ArchLimits& a, int regs, int threads, int64_t smem) {
  if (threads <= 0) return 0;
  const int warps = (threads + 31) / 32;
  int blocks = std::min(a.max_blocks_per_sm, a.max_warps_per_sm / warps);
  if (regs > 0) {
    const int regs_per_warp = (regs * 32 + 255) / 256 * 256;               // allocation unit: 256 per warp
    const int warps_by_regs = (a.regs_per_sm / 4 / regs_per_warp) * 4;   // 4 SM sub-partitions
    blocks = std::min(blocks, warps_by_regs / warps);
  }
  const int64_t per_block = (smem + a.reserved_smem_per_block + 127) / 128 * 128;
  if (smem > 0 && per_block > 0) blocks = std::min<int64_t>(blocks, a.smem_per_sm / per_block);
  if (blocks <= 0) return 0;
  return double(blocks * warps) / a.max_warps_per_sm;
}

LaunchShape launch_shape(const std::string& kernel, const Params& p, DType dtype) {
  LaunchShape s;
  if (kernel == "matmul_tiled") {
    s.block_m = int(p.get_int("BM")), s.block_n = int(p.get_int("BN")), s.block_k = int(p.get_int("BK"));
    if (dtype == DType::f32) {
      s.threads = int((p.get_int("BM") / std::max<int64_t>(1, p.get_int("TM"))) *
                      (p.get_int("BN") / std::max<int64_t>(1, p.get_int("TN"))));
      s.dynamic_smem = 0;  // static shared arrays
    } else {
      s.threads = int((p.get_int("BM") / std::max<int64_t>(1, p.get_int("WM"))) *
                      (p.get_int("BN") / std::max<int64_t>(1, p.get_int("WN")))) * 32;
      s.dynamic_smem = p.get_int("STAGES") * (p.get_int("BM") * p.get_int("BK") + p.get_int("BK") * p.get_int("BN")) * 2;
    }
    return s;
  }
  if (kernel == "matmul_ws_sm80") {
    s.block_m = int(p.get_int("BM")), s.block_n = int(p.get_int("BN")), s.block_k = int(p.get_int("BK"));
    s.threads = int(p.get_int("PRODUCERS") + (p.get_int("BM") / std::max<int64_t>(1, p.get_int("WM"))) *
                                                 (p.get_int("BN") / std::max<int64_t>(1, p.get_int("WN")))) * 32;
    s.dynamic_smem = p.get_int("STAGES") * (p.get_int("BM") * p.get_int("BK") + p.get_int("BK") * p.get_int("BN")) * 2;
    return s;
  }
  if (kernel == "matmul_ws_sm90") {
    // Mirrors Layout in kernels/cuda/matmul_ws_sm90.cu: 1024 alignment slack + stages + 2 mbarriers per stage.
    s.block_m = 128, s.block_n = int(p.get_int("BN")), s.block_k = 64;
    s.threads = 384;
    s.dynamic_smem = 1024 + p.get_int("STAGES") * (128 + p.get_int("BN")) * 64 * 2 + 2 * p.get_int("STAGES") * 8;
    s.args = ArgStyle::TensorMaps;
    s.b_transposed = true;
    s.persistent = p.get_int("PERSISTENT") != 0;
    return s;
  }
  if (is_library_kernel(kernel)) {
    s.args = ArgStyle::Library;
    return s;
  }
  if (triton::find_triton_spec(kernel)) {  // the cubin's metadata refines this (TritonLaunch)
    s.args = ArgStyle::Triton;
    const auto warps = p.values().find(triton::kNumWarps);  // None (the release's default): the metadata says
    s.threads = 32 * (warps != p.values().end() && std::holds_alternative<int64_t>(warps->second)
                          ? int(std::get<int64_t>(warps->second)) : 4);
    return s;
  }
  throw InputError(fmt::format("unknown CUDA kernel '{}'", kernel));
}

bool is_library_kernel(const std::string& kernel) { return kernel == "cublas"; }

}  // namespace kb::cuda
