#include "backends/kernel.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace kb {

std::string to_string(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::f32;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  throw InputError(fmt::format("unknown dtype '{}' (expected f32, f16 or bf16)", s));
}

size_t dtype_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

std::string Shape::str() const { return label.empty() ? fmt::format("{}x{}x{}", M, N, K) : label; }

std::string to_string(const ParamValue& v) {
  if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto f = std::get_if<double>(&v)) return fmt::format("{}", *f);
  return std::get<std::string>(v);
}

ParamValue parse_param_value(const std::string& s) {
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos, 0);
    if (pos == s.size()) return int64_t(v);
  } catch (...) {
  }
  try {
    size_t pos = 0;
    double d = std::stod(s, &pos);
    if (pos == s.size()) return d;
  } catch (...) {
  }
  return s;
}

int64_t Params::get_int(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw InputError(fmt::format("parameter '{}' is not set", name));
  if (auto i = std::get_if<int64_t>(&it->second)) return *i;
  throw InputError(fmt::format("parameter '{}' = '{}' is not an integer", name, to_string(it->second)));
}

int64_t Params::get_int_or(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}

double Params::get_float(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw InputError(fmt::format("parameter '{}' is not set", name));
  if (auto f = std::get_if<double>(&it->second)) return *f;
  if (auto i = std::get_if<int64_t>(&it->second)) return double(*i);
  throw InputError(fmt::format("parameter '{}' = '{}' is not a number", name, to_string(it->second)));
}

const std::string& Params::get_string(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw InputError(fmt::format("parameter '{}' is not set", name));
  if (auto s = std::get_if<std::string>(&it->second)) return *s;
  throw InputError(fmt::format("parameter '{}' is not a string", name));
}

std::string Params::str() const {
  std::string s;
  for (const auto& [k, v] : values_) {
    if (!s.empty()) s += ',';
    s += k + "=" + to_string(v);
  }
  return s;
}

Params KernelDecl::complete(const Params& given) const {
  Params out;
  for (const auto& spec : params) out.set(spec.name, spec.default_value);
  for (const auto& [k, v] : given.values()) {
    const ParamSpec* spec = nullptr;
    for (const auto& s : params)
      if (s.name == k) spec = &s;
    if (!spec) {
      std::string known;
      for (const auto& s : params) known += (known.empty() ? "" : ", ") + s.name;
      throw InputError(fmt::format("kernel {}/{} has no parameter '{}' (parameters: {})", backend, name, k, known));
    }
    ParamValue val = v;
    if (spec->kind == ParamKind::Float) {
      if (auto i = std::get_if<int64_t>(&v)) val = double(*i);
    }
    bool ok = (spec->kind == ParamKind::Int && std::holds_alternative<int64_t>(val)) ||
              (spec->kind == ParamKind::Float && std::holds_alternative<double>(val)) ||
              (spec->kind == ParamKind::String && std::holds_alternative<std::string>(val));
    if (!ok) throw InputError(fmt::format("kernel {}/{}: parameter '{}' has the wrong type: '{}'", backend, name, k, to_string(v)));
    out.set(k, val);
  }
  return out;
}

std::optional<std::string> KernelDecl::language_mismatch(const std::string& toolchain, const std::string& kind) const {
  const bool triton_kernel = language == "triton", triton_tc = kind == "triton";
  if (triton_kernel == triton_tc) return std::nullopt;
  if (triton_kernel)
    return fmt::format("{} is a Triton kernel: it needs a toolchain of kind 'triton' ({} is {})", name, toolchain, kind);
  return fmt::format("{} is a {} kernel: toolchain {} (kind 'triton') compiles Triton kernels only", name, backend,
                     toolchain);
}

bool KernelDecl::supports(DType d) const {
  for (auto x : dtypes)
    if (x == d) return true;
  return false;
}

using json = nlohmann::json;

json params_to_json(const Params& p) {
  json j = json::object();
  for (const auto& [k, v] : p.values()) {
    if (auto i = std::get_if<int64_t>(&v)) j[k] = *i;
    else if (auto f = std::get_if<double>(&v)) j[k] = *f;
    else j[k] = std::get<std::string>(v);
  }
  return j;
}

Params params_from_json(const json& j) {
  Params p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_number_integer()) p.set(it.key(), json_int<int64_t>(*it, "params." + it.key()));
    else if (it->is_number()) p.set(it.key(), it->get<double>());
    else if (it->is_string()) p.set(it.key(), it->get<std::string>());
    else throw InputError(fmt::format("params.{} has an unsupported type", it.key()));
  }
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kb
