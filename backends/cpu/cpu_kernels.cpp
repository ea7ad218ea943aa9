#include "backends/cpu/cpu_kernels.h"

#include <optional>
#include <string>

#include <fmt/format.h>

#include "backends/kernel_decl.h"

namespace kb {

namespace {

// The cache-blocking and micro-tile rules both kernels share.
std::optional<std::string> check_tiles(const Params& p, DType, const std::string&) {
  if (auto why = check_positive(p, {"BM", "BN", "BK", "MR", "NR"})) return why;
  int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK"), mr = p.get_int("MR"), nr = p.get_int("NR");
  if (mr > 16 || nr > 64 || mr * nr > 512) return fmt::format("micro-tile MRxNR={}x{} exceeds 16x64 / 512 accumulators", mr, nr);
  if (bm % mr) return fmt::format("MR={} does not divide BM={}", mr, bm);
  if (bn % nr) return fmt::format("NR={} does not divide BN={}", nr, bn);
  if (bm * bk + bk * bn > (int64_t(4) << 20)) return "packed panels exceed 16 MiB";
  return std::nullopt;
}

std::optional<std::string> check_ring(const Params& p, DType d, const std::string& t) {
  int64_t stages = p.get_int("STAGES"), consumers = p.get_int("CONSUMERS");
  if (stages < 2 || stages > 8) return fmt::format("STAGES={} must be in 2..8", stages);
  if (consumers < 1 || consumers > 8) return fmt::format("CONSUMERS={} must be in 1..8", consumers);
  if (auto why = check_tiles(p, d, t)) return why;
  // Each slot holds one B panel (BK x BN) and one A block (BM x BK) per consumer, in fp32.
  const int64_t bm = p.get_int("BM"), bn = p.get_int("BN"), bk = p.get_int("BK");
  const int64_t ring_bytes = stages * (bk * bn + consumers * bm * bk) * int64_t(sizeof(float));
  if (ring_bytes > (int64_t(64) << 20))
    return fmt::format("ring of STAGES={} slots needs {} MiB (limit 64 MiB)", stages, ring_bytes >> 20);
  return std::nullopt;
}

const std::vector<std::string> kHeaders = {"cpu/kb_cpu_kernel.h", "cpu/gemm_common.h"};

KernelDecl matmul_tiled() {
  return KernelDeclBuilder("cpu", "matmul_tiled")
      .source("cpu/matmul_tiled.cpp", kHeaders)
      .description("cache-blocked GEMM with a register-tiled MRxNR micro-kernel in portable C++")
      .tile_params(96, 512, 256, "cache block")
      .int_param("MR", 6, "micro-kernel rows")
      .int_param("NR", 32, "micro-kernel columns")
      .dtypes({DType::f32, DType::bf16})
      .defaults_config("best")
      .config("small", {{"BM", 32}, {"BN", 64}, {"BK", 64}, {"MR", 4}, {"NR", 16}})
      .tunable("MR", {2, 4, 6, 8})
      .tunable("NR", {8, 16, 32})
      .tunable("BM", {96, 192})
      .tunable("BN", {256, 512})
      .tunable("BK", {128, 256})
      .check_params(check_tiles);
}

KernelDecl matmul_pipelined() {
  return KernelDeclBuilder("cpu", "matmul_pipelined")
      .source("cpu/matmul_pipelined.cpp", kHeaders)
      .description("producer thread packs A/B panels into a STAGES-deep ring; CONSUMERS threads compute on filled "
                   "slots (the CPU analogue of warp specialization)")
      .int_param("STAGES", 3, "ring slots")
      .int_param("CONSUMERS", 1, "consumer threads")
      .tile_params(96, 512, 256, "panel")
      .int_param("MR", 6, "micro-kernel rows")
      .int_param("NR", 32, "micro-kernel columns")
      .dtypes({DType::f32, DType::bf16})
      .defaults_config("best")
      .config("small", {{"STAGES", 2}, {"BM", 32}, {"BN", 64}, {"BK", 64}, {"MR", 4}, {"NR", 16}})
      .tunable_range("STAGES", 2, 4, 1)
      .tunable("CONSUMERS", {1, 2})
      .tunable("MR", {4, 6})
      .tunable("NR", {16, 32})
      .tunable("BK", {128, 256})
      .check_params(check_ring);
}

}  // namespace

const std::vector<KernelDecl>& cpu_kernels() {
  static const std::vector<KernelDecl> k = {matmul_tiled(), matmul_pipelined()};
  return k;
}

}  // namespace kb
