#include "backends/triton/tlx_kernels.h"

#include <fmt/format.h>

#include "backends/kernel_decl.h"

namespace kb::triton {
namespace {

using Reason = std::optional<std::string>;

constexpr int64_t kSmemLimit = 232448;  // 227 KiB: a block's opt-in shared memory on sm_90 and sm_100
constexpr int64_t kLdsLimit = 65536;    // a CDNA3 workgroup's LDS
constexpr int64_t kMbarrierBytes = 8;

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

Reason check_tile(const Params& p, std::initializer_list<const char*> names, int64_t lo, int64_t hi) {
  for (const char* n : names)
    if (int64_t v = p.get_int(n); !pow2(v) || v < lo || v > hi)
      return fmt::format("{}={} must be a power of two in {}..{}", n, v, lo, hi);
  if (int64_t g = p.get_int("GROUP_M"); g < 1) return fmt::format("GROUP_M={} must be at least 1", g);
  return std::nullopt;
}

// The shared memory each warp-specialized kernel allocates (kernels/triton/tlx_matmul.py): the ring of
// NUM_STAGES (A, B) slots, the epilogue's fp32 staging buffers and the mbarriers.
Reason check_ws(const Params& p, DType d, const std::string& target) {
  if (auto r = check_tile(p, {"BLOCK_M", "BLOCK_N", "BLOCK_K"}, 16, 256)) return r;
  const int64_t bm = p.get_int("BLOCK_M"), bn = p.get_int("BLOCK_N"), bk = p.get_int("BLOCK_K");
  const int64_t stages = p.get_int("NUM_STAGES");
  if (stages < 1 || stages > 8) return fmt::format("NUM_STAGES={} must be in 1..8", stages);
  if (bm != 128) return fmt::format("BLOCK_M={} must be 128 (two 64-row wgmma consumers on sm_90a, one 128-row "
                                    "tcgen05 MMA on sm_100a)", bm);
  if (bn < 64) return fmt::format("BLOCK_N={} must be at least 64", bn);
  const int64_t ring = stages * (bm * bk + bk * bn) * int64_t(dtype_bytes(d));
  const bool blackwell = target.rfind("sm_100", 0) == 0;
  // sm_90a: one HALF_M x BLOCK_N/2 stage per consumer; sm_100a: two BLOCK_M x BLOCK_N/4 stages.
  const int64_t stage = blackwell ? 2 * bm * (bn / 4) * 4 : 2 * (bm / 2) * (bn / 2) * 4;
  const int64_t bars = (blackwell ? 2 * stages + 4 : 2 * stages) * kMbarrierBytes;
  if (ring + stage + bars > kSmemLimit)
    return fmt::format("NUM_STAGES x (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) x {} B + {} B of epilogue staging = {} B "
                       "of shared memory exceeds the 227 KiB a block can have", dtype_bytes(d), stage, ring + stage + bars);
  return std::nullopt;
}

Reason check_lds(const Params& p, DType d, const std::string& target) {
  if (auto r = check_tile(p, {"BLOCK_M", "BLOCK_N", "BLOCK_K"}, 16, 256)) return r;
  if (int64_t w = p.get_int(kNumWarps); w != 4 && w != 8)
    return fmt::format("opt.num_warps={} must be 4 or 8", w);
  const int64_t lds = 2 * (p.get_int("BLOCK_M") + p.get_int("BLOCK_N")) * p.get_int("BLOCK_K") * int64_t(dtype_bytes(d));
  if (lds > kLdsLimit)
    return fmt::format("2 x (BLOCK_M + BLOCK_N) x BLOCK_K x {} B = {} B of LDS exceeds a workgroup's 64 KiB",
                       dtype_bytes(d), lds);
  (void)target;
  return std::nullopt;
}

// TMA reads rows whose strides are multiples of 16 bytes (K and N elements), and the strided kernel is
// compiled with K and N divisible by 16.
Reason check_shape(const Params& p, DType d, const Shape& s) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return fmt::format("shape {} must be positive", s.str());
  if (s.M > (1LL << 31) - 1 || s.N > (1LL << 31) - 1 || s.K > (1LL << 31) - 1) return "dimensions must fit in int32";
  if (s.K % 16 || s.N % 16)
    return fmt::format("shape {}: K and N must be multiples of 16 (16-byte aligned row strides)", s.str());
  (void)p;
  (void)d;
  return std::nullopt;
}

std::vector<TritonArg> operands() {
  return {{"a_ptr", "*A", "A", true}, {"b_ptr", "*B", "B", true}, {"c_ptr", "*fp32", "C", true},
          {"M", "i32", "M", false},   {"N", "i32", "N", true},    {"K", "i32", "K", true}};
}

std::vector<TritonArg> constexprs(std::initializer_list<const char*> names) {
  std::vector<TritonArg> out;
  for (const char* n : names) out.push_back({n, "constexpr", n, false});
  return out;
}

const std::vector<std::pair<std::string, TritonSpec>>& specs() {
  static const std::vector<std::pair<std::string, TritonSpec>> all = [] {
    std::vector<std::pair<std::string, TritonSpec>> v;
    TritonSpec ws;
    ws.function = "tlx_matmul_ws_hopper";
    ws.function_by_target = {{"sm_100a", "tlx_matmul_ws_blackwell"}};
    ws.args = operands();
    for (auto& c : constexprs({"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_STAGES"})) ws.args.push_back(c);
    ws.grid = {"min(NUM_SMS, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N))"};
    ws.requires_features = {"tlx"};
    ws.unsupported = {{"cuda", "sm_80", "", "TLX warp specialization is written for sm_90a (wgmma) and sm_100a (tcgen05)"}};
    ws.expect_ttgir = "ttg.warp_specialize";
    ws.expect_reason = "the TLX async tasks compiled without warp specialization (no ttg.warp_specialize in the TTGIR)";
    v.emplace_back("tlx_matmul_ws", ws);

    TritonSpec lds;
    lds.function = "tlx_matmul_lds";
    lds.args = operands();
    lds.args.push_back({"stride_am", "i32", "K", true});
    lds.args.push_back({"stride_bk", "i32", "N", true});
    lds.args.push_back({"stride_cm", "i32", "N", true});
    for (auto& c : constexprs({"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"})) lds.args.push_back(c);
    lds.grid = {"cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"};
    lds.requires_features = {"tlx"};
    v.emplace_back("tlx_matmul", lds);
    return v;
  }();
  return all;
}

KernelDeclBuilder tlx_common(const std::string& backend, const std::string& name, const std::string& what,
                             int64_t bm, int64_t bn, int64_t bk) {
  KernelDeclBuilder b(backend, name);
  b.source("triton/tlx_matmul.py", {kDriverSource})
      .description(what)
      .int_param("BLOCK_M", bm, "rows of C per tile")
      .int_param("BLOCK_N", bn, "columns of C per tile")
      .int_param("BLOCK_K", bk, "depth of one MMA step")
      .int_param("GROUP_M", 8, "tile rows visited together (grouped tile order)")
      .dtypes({DType::f16, DType::bf16})
      .tolerance({2, std::nullopt}, "tensor-core MMA (wgmma, tcgen05, MFMA) with fp32 accumulation")
      .tunable("BLOCK_N", {128, 256})
      .tunable("BLOCK_K", {32, 64, 128})
      .tunable("GROUP_M", {1, 8})
      .check_shape(check_shape);
  return b;
}

}  // namespace

const TritonSpec* find_tlx_spec(const std::string& kernel) {
  for (const auto& [name, spec] : specs())
    if (name == kernel) return &spec;
  return nullptr;
}

std::vector<KernelDecl> tlx_kernel_decls(const std::string& backend) {
  KernelDecl k;
  if (backend == "cuda") {
    k = tlx_common(backend, "tlx_matmul_ws",
                   "TLX: persistent, warp-specialized; TMA loads into an mbarrier ring, wgmma consumers (sm_90a) "
                   "or tcgen05 into tensor memory (sm_100a), TMA-store epilogue",
                   128, 256, 64)
            .int_param("NUM_STAGES", 3, "slots in the shared-memory ring (a constexpr of the kernel)")
            .tunable("NUM_STAGES", {2, 3, 4})
            .defaults_config("default")
            .config("n128", {{"BLOCK_N", 128}, {"NUM_STAGES", 4}})
            .check_params(check_ws);
  } else if (backend == "hip") {
    // 256 x 256 x 32 tiles: 2 x 32 KiB of LDS, the whole of a CDNA3 workgroup's.
    k = tlx_common(backend, "tlx_matmul", "TLX: global -> registers -> LDS (two buffers) -> MFMA, one program per tile",
                   256, 256, 32)
            .int_param(kNumWarps, 8, "Triton's num_warps option (wavefronts of 64)")
            .tunable("BLOCK_M", {128, 256})
            .tunable(kNumWarps, {4, 8})
            .defaults_config("default")
            .check_params(check_lds);
  } else {
    return {};
  }
  k.language = "triton";
  return {k};
}

}  // namespace kb::triton
