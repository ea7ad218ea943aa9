#include "backends/cuda/triton_launch.h"

#include <cuda.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_driver.h"
#include "backends/triton/expr.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::cuda {

namespace {
// The text between the parentheses of `entry`'s .entry; nullopt when there is no such entry.
std::optional<std::string> entry_params(const std::string& ptx, const std::string& entry) {
  const std::string head = ".entry " + entry;
  size_t at = ptx.find(head);
  while (at != std::string::npos) {
    const size_t after = at + head.size();
    if (after < ptx.size() && (ptx[after] == '(' || isspace((unsigned char)ptx[after]))) break;
    at = ptx.find(head, after);
  }
  if (at == std::string::npos) return std::nullopt;
  const size_t open = ptx.find('(', at), close = ptx.find(')', at);
  if (open == std::string::npos || close == std::string::npos || close < open) return std::string();
  return ptx.substr(open + 1, close - open - 1);
}
}  // namespace

std::vector<int> ptx_entry_param_bytes(const std::string& ptx, const std::string& entry) {
  static const std::regex decl(R"(\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\b[^,\[]*(?:\[(\d+)\])?)");
  std::vector<int> out;
  const auto text = entry_params(ptx, entry);
  if (!text) return out;
  for (auto it = std::sregex_iterator(text->begin(), text->end(), decl); it != std::sregex_iterator(); ++it) {
    const int bits = std::stoi((*it)[2]);
    const int count = (*it)[3].matched ? std::stoi((*it)[3]) : 1;
    out.push_back(bits / 8 * count);
  }
  return out;
}

int ptx_entry_param_count(const std::string& ptx, const std::string& entry) {
  const auto text = entry_params(ptx, entry);
  if (!text) return -1;
  int n = 0;
  for (size_t p = text->find(".param"); p != std::string::npos; p = text->find(".param", p + 6)) ++n;
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
    if (j.contains("tensordesc_meta") && j["tensordesc_meta"].is_array())
      for (const auto& m : j["tensordesc_meta"]) {
        if (m.is_null()) {
          t.tensordesc_meta.emplace_back();
          continue;
        }
        if (m.value("fp4_padded", false))
          throw InputError(fmt::format("{}: a packed-fp4 tensor descriptor (fp4_padded) is not one kbisect can encode", path));
        TmaMeta tm;
        tm.swizzle = m.at("swizzle").get<int>();
        tm.elem_size = m.at("elem_size").get<int>();
        tm.elem_type = m.at("elem_type").get<int>();
        tm.block = m.at("block_size").get<std::vector<int64_t>>();
        t.tensordesc_meta.push_back(tm);
      }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  if (const std::string ptx = dir + "/kernel.ptx"; file_exists(ptx)) {
    const std::string text = read_file(ptx);
    t.ptx_params = ptx_entry_param_count(text, t.entry);
    t.ptx_param_bytes = ptx_entry_param_bytes(text, t.entry);
    const int want = t.expanded_param_count() + (t.has_global_scratch ? 1 : 0) + (t.has_profile_scratch ? 1 : 0);
    if (t.ptx_params != want)
      throw InputError(fmt::format("{}: .entry {} takes {} parameters, but {} user arguments{}{} make {}: this Triton "
                                   "release's launch ABI is not the one kbisect knows",
                                   ptx, t.entry, t.ptx_params, t.expanded_param_count(),
                                   t.has_global_scratch ? " + global_scratch" : "",
                                   t.has_profile_scratch ? " + profile_scratch" : "", want));
  }
  return t;
}

namespace {
triton::Bindings bindings(const TritonLaunch& t, const Shape& s, int sms) {
  triton::Bindings b(t.constexprs.begin(), t.constexprs.end());
  for (const auto& [k, v] : s.values) b.emplace(k, v);  // a user kernel's shape: its named values
  b["M"] = s.M, b["N"] = s.N, b["K"] = s.K, b["NUM_SMS"] = sms;
  return b;
}
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
size_t descriptor_rank(const std::string& type) { return triton::tensordesc_block(type).size(); }
}  // namespace

int TritonLaunch::expanded_param_count() const {
  int n = 0;
  size_t d = 0;
  for (const auto& p : params) {
    const size_t rank = descriptor_rank(p.type);
    if (!rank) {
      ++n;
      continue;
    }
    const bool tma = d < tensordesc_meta.size() && tensordesc_meta[d].has_value();
    ++d;
    n += tma ? int(1 + 2 * rank) : int(2 + 4 * rank);  // see TmaMeta
  }
  return n;
}

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
  bind(b, shape, sms, {{"A", A}, {"B", B}, {"C", C}}, {}, global_scratch, profile_scratch);
}

void TritonLaunch::bind(Bound& b, const Shape& shape, int sms, const std::map<std::string, DevicePtr*>& pointers,
                        const std::map<std::string, double>& reals, DevicePtr* global_scratch,
                        DevicePtr* profile_scratch, const std::map<std::string, triton::TensorArg>* tensors) const {
  static_assert(sizeof(DevicePtr) == sizeof(CUdeviceptr), "DevicePtr is CUdeviceptr");
  static_assert(sizeof(Bound::TensorMap) == sizeof(CUtensorMap), "a TensorMap slot holds a CUtensorMap");
  const auto names = bindings(*this, shape, sms);
  const size_t total = size_t(expanded_param_count());
  b.scalars.assign(total, 0);  // never grows: the pointers into it stay valid
  b.tensor_maps.assign(tensordesc_meta.size(), {});
  b.argv.clear();
  // One kernel parameter: its width checked against the PTX's, then its address appended.
  auto push = [&](void* at, int64_t bytes, const std::string& what) {
    const size_t k = b.argv.size();
    if (k < ptx_param_bytes.size() && ptx_param_bytes[k] != bytes && !(bytes < 4 && ptx_param_bytes[k] == 4))
      throw InputError(fmt::format("{}: {} is {} bytes, the PTX parameter {} is {}: this Triton release's launch ABI "
                                   "is not the one kbisect knows", entry, what, bytes, k, ptx_param_bytes[k]));
    b.argv.push_back(at);
  };
  auto slot = [&](int64_t v) -> void* {
    uint64_t& s = b.scalars[b.argv.size()];
    std::memcpy(&s, &v, 8);  // little-endian: the low bytes hold the value at any width
    return &s;
  };
  size_t desc = 0;
  for (const auto& p : params) {
    const std::string key = p.value.empty() ? p.name : p.value;
    const bool pointer = !p.type.empty() && p.type[0] == '*';
    if (const auto block = triton::tensordesc_block(p.type); !block.empty()) {
      const auto* t = tensors ? &tensors->at(p.name) : nullptr;
      auto ptr = pointers.find(p.name);
      if (!t || ptr == pointers.end())
        throw InputError(fmt::format("{}: tensor descriptor {} has no tensor", entry, p.name));
      const auto& meta = desc < tensordesc_meta.size() ? tensordesc_meta[desc] : std::nullopt;
      const size_t rank = block.size();
      if (meta) {
        auto& d = driver();
        if (!d.ok) throw EnvError(fmt::format("{}: encoding tensor descriptor {}: {}", entry, p.name, d.reason));
        // As Triton's launcher: dimensions innermost first, strides in bytes, the block as the box.
        cuuint64_t dims[5] = {}, strides[5] = {};
        cuuint32_t box[5] = {}, elem_strides[5] = {1, 1, 1, 1, 1};
        for (size_t i = 0; i < rank; ++i) {
          dims[rank - 1 - i] = cuuint64_t(t->shape[i]);
          box[rank - 1 - i] = cuuint32_t(meta->block.size() == rank ? meta->block[i] : block[i]);
        }
        for (size_t i = 0; i + 1 < rank; ++i) strides[rank - 2 - i] = cuuint64_t(t->strides[i] * meta->elem_size);
        const int host_type = meta->elem_type == 8 ? 10 : meta->elem_type == 9 ? 8 : meta->elem_type == 10 ? 9 : meta->elem_type;
        auto* map = reinterpret_cast<CUtensorMap*>(&b.tensor_maps[desc]);
        KB_CU(d.cuTensorMapEncodeTiled(map, CUtensorMapDataType(host_type), cuuint32_t(rank),
                                       reinterpret_cast<void*>(*ptr->second), dims, strides, box, elem_strides,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CUtensorMapSwizzle(meta->swizzle),
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                       t->padding_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                      : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        push(map, 128, p.name + " (CUtensorMap)");
      } else {
        push(ptr->second, 8, p.name + " (base)");
        for (size_t i = 0; i < rank; ++i) push(slot(t->shape[i]), 8, p.name + " shape");
        for (size_t i = 0; i < rank; ++i) push(slot(t->strides[i]), 8, p.name + " stride");
        push(slot(t->padding_nan ? 1 : 0), 1, p.name + " padding");
      }
      for (size_t i = 0; i < rank; ++i) push(slot(t->shape[i]), 4, p.name + " shape");
      for (size_t i = 0; i < rank; ++i) push(slot(t->strides[i]), 8, p.name + " stride");
      ++desc;
      continue;
    }
    // Scalars kbisect binds: integers, fp32 and fp64 (a 16-bit float scalar is refused).
    const int64_t want = pointer ? 8 : (p.type == "fp16" || p.type == "bf16") ? 0 : triton::triton_type_bytes(p.type);
    if (want == 0)
      throw InputError(fmt::format("{}: argument {} has type {} (kbisect launches pointers, integers, fp32, fp64 and "
                                   "tensor descriptors)", entry, p.name, p.type));
    const std::string what = fmt::format("argument {} ({})", p.name, p.type);
    if (pointer) {
      auto it = pointers.find(key);
      if (it == pointers.end()) throw InputError(fmt::format("{}: pointer argument {} has no buffer '{}'", entry, p.name, key));
      push(it->second, 8, what);
      continue;
    }
    if (p.type == "fp32" || p.type == "fp64") {
      auto it = reals.find(p.name);
      if (it == reals.end()) throw InputError(fmt::format("{}: scalar argument {} ({}) has no value", entry, p.name, p.type));
      uint64_t& s = b.scalars[b.argv.size()];
      if (p.type == "fp32") {
        const float f = float(it->second);
        std::memcpy(&s, &f, 4);
      } else {
        std::memcpy(&s, &it->second, 8);
      }
      push(&s, want, what);
      continue;
    }
    const int64_t v = triton::eval_int(key, names);
    const int bits = int(8 * want);
    const bool is_unsigned = p.type[0] == 'u' || p.type == "i1";
    const int64_t lo = is_unsigned ? 0 : (bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1)));
    const int64_t hi = bits == 64 ? INT64_MAX : (int64_t(1) << (bits - (is_unsigned ? 0 : 1))) - 1;
    if (v < lo || v > hi) throw InputError(fmt::format("{}: {} = {} does not fit {}", entry, p.name, v, p.type));
    push(slot(v), want, what);
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
