#include "backends/cpu/cpu_kernels.h"

#include <fmt/format.h>

namespace kb {

namespace {

ParamSpec int_param(const char* name, int64_t def, const char* help) { return {name, ParamKind::Int, def, help}; }


KernelDecl matmul_tiled() {
  KernelDecl k;
  k.name = "matmul_tiled";
  k.backend = "cpu";
  k.source = "cpu/matmul_tiled.cpp";
  k.extra_sources = {"cpu/kb_cpu_kernel.h", "cpu/gemm_common.h"};
  k.description = "cache-blocked GEMM with a register-tiled MRxNR micro-kernel in portable C++";
  k.params = {int_param("BM", 96, "rows of A per cache block"), int_param("BN", 512, "columns of B per cache block"),
              int_param("BK", 256, "depth per cache block"), int_param("MR", 6, "micro-kernel rows"),
              int_param("NR", 32, "micro-kernel columns")};
  k.dtypes = {DType::f32, DType::bf16};
  k.configs = {{"best", {{"BM", 96}, {"BN", 512}, {"BK", 256}, {"MR", 6}, {"NR", 32}}},
               {"small", {{"BM", 32}, {"BN", 64}, {"BK", 64}, {"MR", 4}, {"NR", 16}}}};
  k.check_params = [](const Params& p, DType, const std::string&) -> std::optional<std::string> {
    int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), mr = p.get_int("MR"),
            nr = p.get_int("NR");
    for (auto [n, v] : {std::pair{"BM", bm}, {"BN", bn}, {"BK", bk}, {"MR", mr}, {"NR", nr}})
      if (v <= 0) return fmt::format("{}={} must be positive", n, v);
    if (mr > 16 || nr > 64 || mr * nr > 512) return fmt::format("micro-tile MRxNR={}x{} exceeds 16x64 / 512 accumulators", mr, nr);
    if (bm % mr) return fmt::format("MR={} does not divide BM={}", mr, bm);
    if (bn % nr) return fmt::format("NR={} does not divide BN={}", nr, bn);
    if (bm * bk + bk * bn > (int64_t(4) << 20)) return "packed panels exceed 16 MiB";
    return std::nullopt;
  };
  k.check_shape = [](const Params&, const Shape&) -> std::optional<std::string> { return std::nullopt; };
  return k;
}

KernelDecl matmul_pipelined() {
  KernelDecl k;
  k.name = "matmul_pipelined";
  k.backend = "cpu";
  k.source = "cpu/matmul_pipelined.cpp";
  k.extra_sources = {"cpu/kb_cpu_kernel.h", "cpu/gemm_common.h"};
  k.description =
      "producer thread packs A/B panels into a STAGES-deep ring; CONSUMERS threads compute on filled slots "
      "(the CPU analogue of warp specialization)";
  k.params = {int_param("STAGES", 3, "ring slots"), int_param("CONSUMERS", 1, "consumer threads"),
              int_param("BM", 96, "rows per panel"), int_param("BN", 512, "columns per panel"),
              int_param("BK", 256, "depth per panel"), int_param("MR", 6, "micro-kernel rows"),
              int_param("NR", 32, "micro-kernel columns")};
  k.dtypes = {DType::f32, DType::bf16};
  k.configs = {{"best", {{"STAGES", 3}, {"CONSUMERS", 1}, {"BM", 96}, {"BN", 512}, {"BK", 256}, {"MR", 6}, {"NR", 32}}},
               {"small", {{"STAGES", 2}, {"CONSUMERS", 1}, {"BM", 32}, {"BN", 64}, {"BK", 64}, {"MR", 4}, {"NR", 16}}}};
  KernelDecl tiled = matmul_tiled();
  k.check_params = [tiled_check = tiled.check_params](const Params& p, DType d,
                                                      const std::string& t) -> std::optional<std::string> {
    int64_t stages = p.get_int("STAGES"), consumers = p.get_int("CONSUMERS");
    if (stages < 2 || stages > 8) return fmt::format("STAGES={} must be in 2..8", stages);
    if (consumers < 1 || consumers > 8) return fmt::format("CONSUMERS={} must be in 1..8", consumers);
    if (auto why = tiled_check(p, d, t)) return why;
    // Each slot holds one B panel (BK x BN) and one A block (BM x BK) per consumer, in fp32.
    const int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK");
    const int64_t ring_bytes = stages * (bk * bn + consumers * bm * bk) * int64_t(sizeof(float));
    if (ring_bytes > (int64_t(64) << 20))
      return fmt::format("ring of STAGES={} slots needs {} MiB (limit 64 MiB)", stages, ring_bytes >> 20);
    return std::nullopt;
  };
  k.check_shape = [](const Params&, const Shape&) -> std::optional<std::string> { return std::nullopt; };
  return k;
}

}  // namespace

const std::vector<KernelDecl>& cpu_kernels() {
  static const std::vector<KernelDecl> k = {matmul_tiled(), matmul_pipelined()};
  return k;
}

}  // namespace kb
