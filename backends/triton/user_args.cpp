#include "backends/triton/user_args.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/half_bits.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/text.h"

namespace kb::triton {
namespace {

bool is_float(const std::string& t) { return t == "fp16" || t == "bf16" || t == "fp32" || t == "fp64"; }
bool is_signed_int(const std::string& t) { return t == "i8" || t == "i16" || t == "i32" || t == "i64"; }

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float f16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(float(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(float(man | 0x400), exp - 25);
  return sign ? -v : v;
}

float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<int64_t> int_list(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsSequence()) cx.fail(n, fmt::format("{} must be a list of integers", field));
  std::vector<int64_t> v;
  for (const auto& e : n) {
    const std::string s = yaml_scalar(cx, e, field);
    try {
      size_t used = 0;
      v.push_back(std::stoll(s, &used));
      if (used != s.size()) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      cx.fail(e, fmt::format("{}: '{}' is not an integer", field, s));
    }
  }
  return v;
}

}  // namespace

int64_t triton_type_bytes(const std::string& t) {
  if (t == "i1" || t == "i8" || t == "u8") return 1;
  if (t == "i16" || t == "u16" || t == "fp16" || t == "bf16") return 2;
  if (t == "i32" || t == "u32" || t == "fp32") return 4;
  if (t == "i64" || t == "u64" || t == "fp64") return 8;
  return 0;
}

std::string tensor_element_type(const std::string& type) {
  if (type.size() > 1 && type[0] == '*') return triton_type_bytes(type.substr(1)) ? type.substr(1) : "";
  static const std::string head = "tensordesc<";
  if (type.rfind(head, 0) != 0) return "";
  const size_t open = type.find('[');
  if (open == std::string::npos) return "";
  const std::string t = type.substr(head.size(), open - head.size());
  return triton_type_bytes(t) ? t : "";
}

std::vector<int64_t> tensordesc_block(const std::string& type) {
  std::vector<int64_t> block;
  if (type.rfind("tensordesc<", 0) != 0 || tensor_element_type(type).empty()) return block;
  const size_t open = type.find('['), close = type.find(']');
  if (close == std::string::npos || close < open || type.substr(close) != "]>") return {};
  std::string dims = type.substr(open + 1, close - open - 1);
  size_t at = 0;
  while (at <= dims.size()) {
    size_t comma = dims.find(',', at);
    if (comma == std::string::npos) comma = dims.size();
    const std::string d = dims.substr(at, comma - at);
    try {
      size_t used = 0;
      const int64_t v = std::stoll(d, &used);
      if (v <= 0 || d.find_first_not_of(" ", used) != std::string::npos) return {};
      block.push_back(v);
    } catch (const std::exception&) {
      return {};
    }
    at = comma + 1;
  }
  return block.size() <= 5 ? block : std::vector<int64_t>{};
}

int64_t TensorArg::storage_elements() const {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    n += (shape[i] - 1) * strides[i];
  }
  return n;
}

int64_t TensorArg::element_bytes() const { return triton_type_bytes(dtype); }

TensorArg parse_tensor_arg(const YamlCtx& cx, const YAML::Node& n, const std::string& name,
                           const std::string& pointer_type, bool output) {
  TensorArg t;
  t.output = output;
  const std::string f = "args." + name;
  t.shape = int_list(cx, n["shape"], f + ".shape");
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] < 0) cx.fail(n["shape"][i], fmt::format("{}.shape[{}] = {} is negative", f, i, t.shape[i]));
  if (!n["dtype"]) cx.fail(n, fmt::format("{}: a tensor needs a dtype", f));
  t.dtype = yaml_scalar(cx, n["dtype"], f + ".dtype");
  if (t.dtype != tensor_element_type(pointer_type))
    cx.fail(n["dtype"], fmt::format("{}.dtype '{}' is not the signature's element type ({})", f, t.dtype, pointer_type));
  if (triton_type_bytes(t.dtype) == 0) cx.fail(n["dtype"], fmt::format("{}.dtype '{}' is not a type kbisect can make", f, t.dtype));
  if (n["strides"]) {
    t.strides = int_list(cx, n["strides"], f + ".strides");
    if (t.strides.size() != t.shape.size())
      cx.fail(n["strides"], fmt::format("{}.strides has {} entries for a shape of {}", f, t.strides.size(), t.shape.size()));
    for (size_t i = 0; i < t.strides.size(); ++i)
      if (t.strides[i] < 0) cx.fail(n["strides"][i], fmt::format("{}.strides[{}] = {} is negative", f, i, t.strides[i]));
  } else {
    t.strides.assign(t.shape.size(), 1);
    for (size_t i = t.shape.size(); i-- > 1;) t.strides[i - 1] = t.strides[i] * std::max<int64_t>(1, t.shape[i]);
  }
  if (const YAML::Node in = n["init"]) {
    if (in.IsScalar() && in.as<std::string>() == "zeros") {
      t.init.kind = TensorInit::Kind::zeros;
    } else if (in.IsMap() && in["uniform"]) {
      const YAML::Node u = in["uniform"];
      if (!u.IsSequence() || u.size() != 2) cx.fail(u, fmt::format("{}.init.uniform must be [lo, hi]", f));
      t.init.lo = yaml_number(cx, u[0], f + ".init.uniform");
      t.init.hi = yaml_number(cx, u[1], f + ".init.uniform");
      if (!(t.init.lo < t.init.hi)) cx.fail(u, fmt::format("{}.init.uniform: lo {} is not below hi {}", f, t.init.lo, t.init.hi));
    } else if (in.IsMap() && in["value"]) {
      t.init.kind = TensorInit::Kind::value;
      t.init.value = yaml_number(cx, in["value"], f + ".init.value");
    } else {
      cx.fail(in, fmt::format("{}.init must be zeros, {{uniform: [lo, hi]}} or {{value: X}}", f));
    }
  }
  if (const auto block = tensordesc_block(pointer_type); !block.empty()) {
    if (block.size() != t.shape.size())
      cx.fail(n["shape"], fmt::format("{}.shape has rank {}, the descriptor's block {}", f, t.shape.size(), block.size()));
    if (!t.strides.empty() && t.strides.back() != 1)
      cx.fail(n["strides"] ? n["strides"] : n, fmt::format("{}: a tensor descriptor's last stride must be 1", f));
    for (size_t i = 0; i + 1 < t.strides.size(); ++i)
      if (t.strides[i] * t.element_bytes() % 16)
        cx.fail(n["strides"] ? n["strides"] : n, fmt::format("{}.strides[{}] = {}: TMA needs strides that are multiples of "
                                                            "16 bytes", f, i, t.strides[i]));
    if (const YAML::Node p = n["padding"]) {
      const std::string v = yaml_scalar(cx, p, f + ".padding");
      if (v != "zero" && v != "nan") cx.fail(p, fmt::format("{}.padding '{}' must be zero or nan", f, v));
      t.padding_nan = v == "nan";
    }
  } else if (n["padding"]) {
    cx.fail(n["padding"], fmt::format("{}.padding: only a tensor descriptor has one", f));
  }
  const double bytes = double(t.storage_elements()) * double(t.element_bytes());
  if (bytes > double(int64_t(1) << 40))
    cx.fail(n["shape"], fmt::format("{} spans {:.3g} bytes of storage", f, bytes));
  return t;
}

uint64_t arg_seed(const std::string& shape_label, const std::string& arg) {
  Hasher h;
  h.add("kbisect-user-arg-v1").add(shape_label).add(arg);
  return std::stoull(h.hex().substr(0, 16), nullptr, 16);
}

std::vector<uint8_t> initial_bytes(const TensorArg& t, uint64_t seed) {
  const int64_t n = t.storage_elements(), esz = t.element_bytes();
  std::vector<uint8_t> out(size_t(n * esz), 0);
  if (t.init.kind == TensorInit::Kind::zeros) return out;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.init.value;
    if (t.init.kind == TensorInit::Kind::uniform) {
      const double u = double(splitmix64(seed ^ splitmix64(uint64_t(i))) >> 11) * 0x1.0p-53;
      v = t.init.lo + u * (t.init.hi - t.init.lo);
      if (!is_float(t.dtype)) v = std::floor(v);
    }
    uint8_t* p = out.data() + i * esz;
    if (t.dtype == "fp16") {
      const uint16_t b = f16_bits(float(v));
      std::memcpy(p, &b, 2);
    } else if (t.dtype == "bf16") {
      const uint16_t b = bf16_bits(float(v));
      std::memcpy(p, &b, 2);
    } else if (t.dtype == "fp32") {
      const float f = float(v);
      std::memcpy(p, &f, 4);
    } else if (t.dtype == "fp64") {
      std::memcpy(p, &v, 8);
    } else if (t.dtype == "i1") {
      *p = v != 0 ? 1 : 0;
    } else {  // integers, little-endian, two's complement
      const int64_t iv = int64_t(v);
      std::memcpy(p, &iv, size_t(esz));
    }
  }
  return out;
}

ToleranceRule parse_tolerance(const YamlCtx& cx, const YAML::Node& n) {
  ToleranceRule r;
  if (n.IsScalar() && n.as<std::string>() == "bitwise") {
    r.always_bitwise = true;
    return r;
  }
  if (!n.IsMap()) cx.fail(n, "'tolerance' must be 'bitwise' or a mapping dtype -> {atol, rtol}");
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string dt = it->first.as<std::string>();
    if (!is_float(dt)) cx.fail(it->first, fmt::format("tolerance.{}: not a floating type (fp16, bf16, fp32, fp64)", dt));
    const YAML::Node v = it->second;
    if (!v.IsMap()) cx.fail(v, fmt::format("tolerance.{} must be {{atol: X, rtol: Y}}", dt));
    check_yaml_keys(cx, v, "tolerance." + dt, {"atol", "rtol"});
    OutputTolerance t;
    t.bitwise = false;
    t.atol = v["atol"] ? yaml_number(cx, v["atol"], "tolerance." + dt + ".atol") : 0;
    t.rtol = v["rtol"] ? yaml_number(cx, v["rtol"], "tolerance." + dt + ".rtol") : 0;
    if (t.atol < 0 || t.rtol < 0) cx.fail(v, fmt::format("tolerance.{}: atol and rtol must not be negative", dt));
    r.by_dtype[dt] = t;
  }
  return r;
}

OutputTolerance tolerance_for_output(const ToleranceRule& rule, const std::string& dtype, bool same_release) {
  if (rule.always_bitwise || !is_float(dtype)) return {};
  if (auto it = rule.by_dtype.find(dtype); it != rule.by_dtype.end()) return it->second;
  if (same_release) return {};
  if (dtype == "fp16") return {false, 1e-5, 1e-3};
  if (dtype == "bf16") return {false, 1e-5, 1.6e-2};
  if (dtype == "fp32") return {false, 1e-5, 1e-4};
  return {false, 1e-12, 1e-10};
}

double element_value(const std::string& dtype, const void* base, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(base);
  if (dtype == "fp16" || dtype == "bf16") {
    uint16_t b;
    std::memcpy(&b, p + i * 2, 2);
    return dtype == "fp16" ? f16_value(b) : bf16_value(b);
  }
  if (dtype == "fp32") {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  if (dtype == "fp64") {
    double d;
    std::memcpy(&d, p + i * 8, 8);
    return d;
  }
  const int64_t esz = triton_type_bytes(dtype);
  int64_t v = 0;
  std::memcpy(&v, p + i * esz, size_t(esz));
  if (is_signed_int(dtype) && esz < 8) v = (v << (64 - 8 * esz)) >> (64 - 8 * esz);  // sign-extend
  return double(v);
}

OutputDiff compare_host(const std::string& dtype, const void* ref, const void* got, int64_t n, const OutputTolerance& tol) {
  OutputDiff d;
  d.dtype = dtype;
  d.elements = n;
  const int64_t esz = triton_type_bytes(dtype);
  const bool exact = tol.bitwise || !is_float(dtype);
  for (int64_t i = 0; i < n; ++i) {
    bool bad;
    const double r = element_value(dtype, ref, i), g = element_value(dtype, got, i);
    if (exact) {
      bad = std::memcmp(static_cast<const uint8_t*>(ref) + i * esz, static_cast<const uint8_t*>(got) + i * esz, size_t(esz)) != 0;
    } else if (std::isnan(r) || std::isnan(g)) {
      bad = std::isnan(r) != std::isnan(g);
    } else if (std::isinf(r) || std::isinf(g)) {
      bad = r != g;
    } else {
      bad = std::fabs(g - r) > tol.atol + tol.rtol * std::fabs(r);
    }
    if (is_float(dtype) && std::isfinite(r) && std::isfinite(g)) d.max_abs_error = std::max(d.max_abs_error, std::fabs(g - r));
    if (!bad) continue;
    if (d.mismatches++ == 0) d.first = i, d.first_got = g, d.first_ref = r;
  }
  return d;
}

}  // namespace kb::triton
