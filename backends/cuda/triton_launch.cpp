#include "backends/cuda/triton_launch.h"

#include <cuda.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_driver.h"
#include "backends/triton/expr.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::cuda {

int ptx_entry_param_count(const std::string& ptx, const std::string& entry) {
  const std::string head = ".entry " + entry;
  size_t at = ptx.find(head);
  while (at != std::string::npos) {
    const size_t after = at + head.size();
    if (after < ptx.size() && (ptx[after] == '(' || isspace((unsigned char)ptx[after]))) break;
    at = ptx.find(head, after);
  }
  if (at == std::string::npos) return -1;
  const size_t open = ptx.find('(', at), close = ptx.find(')', at);
  if (open == std::string::npos || close == std::string::npos || close < open) return 0;
  int n = 0;
  for (size_t p = ptx.find(".param", open); p != std::string::npos && p < close; p = ptx.find(".param", p + 6)) ++n;
  return n;
}

TritonLaunch TritonLaunch::read(const Artifact& art) {
  namespace fs = std::filesystem;
  const std::string dir = fs::path(art.binary_path).parent_path().string();
  const std::string path = dir + "/launch.json";
  if (!file_exists(path)) throw InputError(fmt::format("{}: missing (a Triton artifact carries its launch)", path));
  nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, false);
  if (j.is_discarded() || j.value("format", "") != "kbisect-triton-launch/1")
    throw InputError(fmt::format("{}: not a kbisect-triton-launch/1 file", path));
  TritonLaunch t;
  try {
    t.entry = j.at("entry").get<std::string>();
    for (const auto& p : j.at("params")) t.params.push_back({p.at("name"), p.at("type"), p.at("value")});
    t.grid = j.at("grid").get<std::vector<std::string>>();
    for (const auto& [k, v] : j.at("constexprs").items())
      if (v.is_number_integer()) t.constexprs[k] = v.get<int64_t>();
      else if (v.is_boolean()) t.constexprs[k] = v.get<bool>() ? 1 : 0;
    t.num_warps = j.at("num_warps");
    t.num_ctas = j.value("num_ctas", 1);
    if (j.contains("cluster_dims") && j["cluster_dims"].is_array() && j["cluster_dims"].size() == 3)
      for (int i = 0; i < 3; ++i) t.cluster[i] = std::max(1, j["cluster_dims"][i].get<int>());
    t.shared = j.at("shared");
    t.has_global_scratch = j.at("global_scratch");
    t.global_scratch_size = j.value("global_scratch_size", int64_t(0));
    t.global_scratch_align = std::max<int64_t>(1, j.value("global_scratch_align", int64_t(1)));
    t.has_profile_scratch = j.at("profile_scratch");
    t.profile_scratch_size = j.value("profile_scratch_size", int64_t(0));
    t.profile_scratch_align = std::max<int64_t>(1, j.value("profile_scratch_align", int64_t(1)));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  if (const std::string ptx = dir + "/kernel.ptx"; file_exists(ptx)) {
    t.ptx_params = ptx_entry_param_count(read_file(ptx), t.entry);
    const int want = int(t.params.size()) + (t.has_global_scratch ? 1 : 0) + (t.has_profile_scratch ? 1 : 0);
    if (t.ptx_params != want)
      throw InputError(fmt::format("{}: .entry {} takes {} parameters, but {} user arguments{}{} make {}: this Triton "
                                   "release's launch ABI is not the one kbisect knows",
                                   ptx, t.entry, t.ptx_params, t.params.size(),
                                   t.has_global_scratch ? " + global_scratch" : "",
                                   t.has_profile_scratch ? " + profile_scratch" : "", want));
  }
  return t;
}

namespace {
triton::Bindings bindings(const TritonLaunch& t, const Shape& s, int sms) {
  triton::Bindings b(t.constexprs.begin(), t.constexprs.end());
  b["M"] = s.M, b["N"] = s.N, b["K"] = s.K, b["NUM_SMS"] = sms;
  return b;
}
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

TritonLaunch::Bound TritonLaunch::plan(const Shape& shape, int sms) const {
  Bound b;
  const auto names = bindings(*this, shape, sms);
  for (size_t i = 0; i < grid.size() && i < 3; ++i) {
    const int64_t g = triton::eval_int(grid[i], names);
    if (g <= 0 || g > (1LL << 31) - 1) throw InputError(fmt::format("{}: grid[{}] = {} ({})", entry, i, g, grid[i]));
    b.grid[i] = unsigned(g);
  }
  const size_t programs = size_t(b.grid[0]) * b.grid[1] * b.grid[2] * size_t(std::max(1, num_ctas));
  if (has_global_scratch && global_scratch_size > 0)
    b.global_scratch_bytes = programs * round_up(size_t(global_scratch_size), size_t(global_scratch_align));
  if (has_profile_scratch && profile_scratch_size > 0)
    b.profile_scratch_bytes = programs * round_up(size_t(profile_scratch_size), size_t(profile_scratch_align));
  return b;
}

void TritonLaunch::bind(Bound& b, const Shape& shape, int sms, DevicePtr* A, DevicePtr* B, DevicePtr* C,
                        DevicePtr* global_scratch, DevicePtr* profile_scratch) const {
  static_assert(sizeof(DevicePtr) == sizeof(CUdeviceptr), "DevicePtr is CUdeviceptr");
  const auto names = bindings(*this, shape, sms);
  b.i32.clear();
  b.i64.clear();
  b.i32.reserve(params.size());
  b.i64.reserve(params.size());
  b.argv.clear();
  for (const auto& p : params) {
    if (!p.type.empty() && p.type[0] == '*') {
      if (p.value == "A") b.argv.push_back(A);
      else if (p.value == "B") b.argv.push_back(B);
      else if (p.value == "C") b.argv.push_back(C);
      else throw InputError(fmt::format("{}: pointer argument {} has no buffer '{}'", entry, p.name, p.value));
    } else if (p.type == "i32") {
      const int64_t v = triton::eval_int(p.value, names);
      if (v < INT32_MIN || v > INT32_MAX) throw InputError(fmt::format("{}: {} = {} does not fit i32", entry, p.name, v));
      b.i32.push_back(int32_t(v));
      b.argv.push_back(&b.i32.back());
    } else if (p.type == "i64") {
      b.i64.push_back(triton::eval_int(p.value, names));
      b.argv.push_back(&b.i64.back());
    } else {
      throw InputError(fmt::format("{}: argument {} has type {} (kbisect launches pointers, i32 and i64)", entry,
                                   p.name, p.type));
    }
  }
  if (has_global_scratch) b.argv.push_back(global_scratch);
  if (has_profile_scratch) b.argv.push_back(profile_scratch);
}

void TritonLaunch::launch(CUfunc_st* fn, CUstream_st* stream, Bound& b) const {
  auto& d = driver();
  const unsigned threads = unsigned(32 * num_warps);
  if (num_ctas <= 1) {
    KB_CU(d.cuLaunchKernel(fn, b.grid[0], b.grid[1], b.grid[2], threads, 1, 1, unsigned(shared), stream,
                           b.argv.data(), nullptr));
    return;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = b.grid[0] * unsigned(cluster[0]);
  cfg.gridDimY = b.grid[1] * unsigned(cluster[1]);
  cfg.gridDimZ = b.grid[2] * unsigned(cluster[2]);
  cfg.blockDimX = threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = unsigned(shared);
  cfg.hStream = stream;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = unsigned(cluster[0]);
  attr.value.clusterDim.y = unsigned(cluster[1]);
  attr.value.clusterDim.z = unsigned(cluster[2]);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  KB_CU(d.cuLaunchKernelEx(&cfg, fn, b.argv.data(), nullptr));
}

}  // namespace kb::cuda
