#include "backends/triton/triton_kernels.h"

#include <fmt/format.h>

#include "backends/kernel_decl.h"
#include "backends/triton/tlx_kernels.h"
#include "backends/triton/user_kernel.h"

namespace kb::triton {
namespace {

using Reason = std::optional<std::string>;

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// BLOCK_* are tl.arange extents (powers of two, tl.dot wants 16 or more); warps and stages are options.
Reason check_blocks(const Params& p, DType d, const std::string& target) {
  for (const char* n : {"BLOCK_M", "BLOCK_N", "BLOCK_K"}) {
    int64_t v = p.get_int(n);
    if (!pow2(v) || v < 16 || v > 256) return fmt::format("{}={} must be a power of two in 16..256", n, v);
  }
  if (int64_t g = p.get_int("GROUP_M"); g < 1) return fmt::format("GROUP_M={} must be at least 1", g);
  if (int64_t w = p.get_int(kNumWarps); !pow2(w) || w > 16) return fmt::format("{}={} must be 1, 2, 4, 8 or 16", kNumWarps, w);
  if (int64_t s = p.get_int(kNumStages); s < 1 || s > 8) return fmt::format("{}={} must be in 1..8", kNumStages, s);
  const int64_t bytes = int64_t(dtype_bytes(d));
  const int64_t smem = p.get_int(kNumStages) * (p.get_int("BLOCK_M") + p.get_int("BLOCK_N")) * p.get_int("BLOCK_K") * bytes;
  if (smem > 232448) return fmt::format("opt.num_stages x (BLOCK_M + BLOCK_N) x BLOCK_K x {} B = {} B of shared memory "
                                        "exceeds the 227 KiB a block can have", bytes, smem);
  (void)target;
  return std::nullopt;
}

Reason shape_fits(const Params& p, DType d, const Shape& s) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return fmt::format("shape {} must be positive", s.str());
  if (s.M > (1LL << 31) - 1 || s.N > (1LL << 31) - 1 || s.K > (1LL << 31) - 1) return "dimensions must fit in int32";
  // The sizes and leading strides are compiled as divisible by 16 (as Triton's JIT specializes aligned
  // tensors); a shape that is not would be read with misaligned vector loads.
  if (p.get_int_or("ALIGNED", 1) && (s.M % 16 || s.N % 16 || s.K % 16))
    return fmt::format("shape {}: M, N and K must be multiples of 16 with ALIGNED=1 (the divisibility the "
                       "kernel is compiled with); use ALIGNED=0", s.str());
  (void)d;
  return std::nullopt;
}

// TMA needs 16-byte aligned row strides: K and N elements of the operand's size.
Reason shape_tma(const Params& p, DType d, const Shape& s) {
  if (auto r = shape_fits(p, d, s)) return r;
  const int64_t per16 = 16 / int64_t(dtype_bytes(d));
  if (s.K % per16 || s.N % per16 || s.N % 4)
    return fmt::format("shape {}: tensor descriptors need 16-byte row strides (K and N multiples of {})", s.str(), per16);
  return std::nullopt;
}

KernelDeclBuilder common(const std::string& backend, const std::string& name, const std::string& what) {
  KernelDeclBuilder b(backend, name);
  b.source("triton/matmul.py", {kDriverSource})
      .description(what)
      .int_param("BLOCK_M", 128, "rows of C per program")
      .int_param("BLOCK_N", 128, "columns of C per program")
      .int_param("BLOCK_K", 64, "depth of one tl.dot step")
      .int_param("GROUP_M", 8, "tile rows visited together (grouped program order)")
      .int_param(kNumWarps, 8, "Triton's num_warps option (32 threads each)")
      .int_param(kNumStages, 3, "Triton's num_stages option (software pipelining depth)")
      .int_param("ALIGNED", 1, "1: M, N, K and the leading strides are compiled as divisible by 16")
      .dtypes({DType::f16, DType::bf16, DType::f32})
      .tolerance({2, std::nullopt}, "tl.dot on tensor cores (fp32 operands with input_precision=ieee)")
      .tunable("BLOCK_M", {64, 128, 256})
      .tunable("BLOCK_N", {64, 128, 256})
      .tunable("BLOCK_K", {32, 64, 128})
      .tunable("GROUP_M", {1, 4, 8})
      .tunable(kNumWarps, {4, 8})
      .tunable(kNumStages, {2, 3, 4, 5})
      .check_params(check_blocks);
  return b;
}

// A parameter's default, and the default configuration's value, changed after the common declaration.
void set_default(KernelDecl& k, const std::string& name, const ParamValue& v) {
  for (auto& p : k.params)
    if (p.name == name) p.default_value = v;
  if (!k.configs.empty()) k.configs.front().second.set(name, v);
}

std::vector<TritonArg> pointer_args() {
  return {{"a_ptr", "*A", "A", true}, {"b_ptr", "*B", "B", true}, {"c_ptr", "*fp32", "C", true}};
}

std::vector<TritonArg> strided_args(const std::vector<TritonArg>& constexprs) {
  auto v = pointer_args();
  // With ALIGNED=1 the shapes are multiples of 16, so Triton's JIT, called with them, specializes M, N, K and
  // the leading strides as divisible by 16: so are they compiled here (ALIGNED=0: none of them).
  const std::vector<TritonArg> sizes = {{"M", "i32", "M", true}, {"N", "i32", "N", true}, {"K", "i32", "K", true},
                                        {"stride_am", "i32", "K", true}, {"stride_bk", "i32", "N", true},
                                        {"stride_cm", "i32", "N", true}};
  v.insert(v.end(), sizes.begin(), sizes.end());
  v.insert(v.end(), constexprs.begin(), constexprs.end());
  return v;
}

std::vector<TritonArg> tile_constexprs() {
  return {{"BLOCK_M", "constexpr", "BLOCK_M", false}, {"BLOCK_N", "constexpr", "BLOCK_N", false},
          {"BLOCK_K", "constexpr", "BLOCK_K", false}, {"GROUP_M", "constexpr", "GROUP_M", false}};
}

const std::vector<std::pair<std::string, TritonSpec>>& specs() {
  static const std::vector<std::pair<std::string, TritonSpec>> all = [] {
    std::vector<std::pair<std::string, TritonSpec>> v;
    auto tiles = tile_constexprs();
    auto ieee = TritonArg{"IEEE", "constexpr", "IEEE", false};

    TritonSpec tiled;
    tiled.function = "matmul_tiled";
    auto cx = tiles;
    cx.push_back(ieee);
    tiled.args = strided_args(cx);
    tiled.grid = {"cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"};
    v.emplace_back("triton_matmul_tiled", tiled);

    TritonSpec persistent;
    persistent.function = "matmul_persistent";
    persistent.args = pointer_args();
    for (const char* n : {"M", "N", "K"}) persistent.args.push_back({n, "i32", n, true});
    persistent.args.push_back({"NUM_PROGRAMS", "i32", "min(NUM_SMS, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N))", false});
    persistent.args.insert(persistent.args.end(), cx.begin(), cx.end());
    persistent.grid = {"min(NUM_SMS, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N))"};
    persistent.requires_features = {"device_tensor_descriptor"};
    const char* why = "device-side tensor descriptors are lowered only for sm_90 before Triton 3.4";
    persistent.unsupported = {{"cuda", "sm_80", "3.4", why}, {"hip", "", "3.4", why}};
    v.emplace_back("triton_matmul_persistent", persistent);

    TritonSpec ws;
    ws.function = "matmul_ws";
    auto wcx = tiles;
    wcx.push_back({"NUM_STAGES", "constexpr", kNumStages, false});  // the kernel's tl.range(num_stages=...)
    wcx.push_back(ieee);
    ws.args = strided_args(wcx);
    ws.grid = tiled.grid;
    ws.requires_features = {"warp_specialize"};
    ws.expect_ttgir = "ttg.warp_specialize";
    ws.expect_reason = "the loop compiled without warp specialization (no ttg.warp_specialize in the TTGIR)";
    v.emplace_back("triton_matmul_ws", ws);

    // Automatic warp specialization over tensor descriptors: the side-by-side counterpart of tlx_matmul_ws.
    TritonSpec ws_tma = ws;
    ws_tma.function = "matmul_ws_tma";
    ws_tma.args = pointer_args();
    for (const char* n : {"M", "N", "K"}) ws_tma.args.push_back({n, "i32", n, true});
    ws_tma.args.insert(ws_tma.args.end(), wcx.begin(), wcx.end());
    ws_tma.requires_features = {"warp_specialize", "device_tensor_descriptor"};
    v.emplace_back("triton_matmul_ws_tma", ws_tma);
    return v;
  }();
  return all;
}

}  // namespace

bool is_builtin_triton_kernel(const std::string& kernel) {
  for (const auto& [name, spec] : specs())
    if (name == kernel) return true;
  return find_tlx_spec(kernel) != nullptr;
}

bool is_builtin_kernel_name(const std::string& name) {
  // The C++ backends' kernels, whichever backends this binary was built with (a test checks this list
  // against every backend's declarations).
  static const char* const native[] = {"matmul_tiled", "matmul_pipelined", "matmul_ws_sm80", "matmul_ws_sm90",
                                       "matmul_ws", "cublas"};
  for (const char* n : native)
    if (name == n) return true;
  return is_builtin_triton_kernel(name);
}

const TritonSpec* find_triton_spec(const std::string& kernel) {
  for (const auto& [name, spec] : specs())
    if (name == kernel) return &spec;
  if (const TritonSpec* t = find_tlx_spec(kernel)) return t;
  if (const UserKernel* u = find_user_kernel(kernel)) return &u->spec;
  return nullptr;
}

std::vector<KernelDecl> triton_kernel_decls(const std::string& backend) {
  std::vector<KernelDecl> out;
  KernelDecl tiled = common(backend, "triton_matmul_tiled",
                            "Triton: one program per C tile in grouped order, tl.dot over K tiles")
                         .defaults_config("default")
                         .config("small", {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 32}, {kNumWarps, 4}})
                         .check_shape(shape_fits);
  KernelDecl persistent = common(backend, "triton_matmul_persistent",
                                 "Triton: persistent programs over the tiles, operands through device-side "
                                 "tensor descriptors (TMA on sm_90a)")
                              .defaults_config("default")
                              .check_shape(shape_tma);
  KernelDecl ws = common(backend, "triton_matmul_ws",
                         "Triton: the tiled loop as tl.range(..., warp_specialize=True)")
                      .defaults_config("default")
                      .check_shape(shape_fits);
  KernelDecl ws_tma = common(backend, "triton_matmul_ws_tma",
                             "Triton: tl.range(..., warp_specialize=True) over device-side tensor descriptors")
                          .defaults_config("default")
                          .check_shape(shape_tma);
  // 4 warps: with 8, every release here (3.5.1-3.9.0) compiles the loop unspecialized on sm_90a.
  set_default(ws_tma, kNumWarps, int64_t(4));
  for (KernelDecl* k : {&tiled, &persistent, &ws, &ws_tma}) {
    k->language = "triton";
    out.push_back(*k);
  }
  for (auto& k : tlx_kernel_decls(backend)) out.push_back(std::move(k));
  return out;
}

}  // namespace kb::triton
