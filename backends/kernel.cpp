#include "backends/kernel.h"
#include "backends/param_yaml.h"

#include <charconv>
#include <cmath>
#include <optional>

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

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(isalnum((unsigned char)c) || c == '_')) return false;
  return true;
}

std::string float_text(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  std::string t = fmt::format("{}", f);  // the shortest text that reads back to the same double
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

// An integer in Python's literal spellings (decimal with optional sign, 0x / 0o / 0b); nullopt when the
// text is not one; InputError when it is one that does not fit in 64 bits.
std::optional<int64_t> read_integer(const std::string& s) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  int base = 10;
  if (s.size() > i + 2 && s[i] == '0' && std::string("xXoObB").find(s[i + 1]) != std::string::npos) {
    base = std::tolower(s[i + 1]) == 'x' ? 16 : std::tolower(s[i + 1]) == 'o' ? 8 : 2;
    i += 2;
  }
  if (i >= s.size()) return std::nullopt;
  unsigned __int128 v = 0;
  for (size_t j = i; j < s.size(); ++j) {
    const char c = char(std::tolower((unsigned char)s[j]));
    const int d = isdigit((unsigned char)c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    v = v * base + d;
    if (v > (unsigned __int128)(1) << 64) v = (unsigned __int128)(1) << 64;  // saturate: too large either way
  }
  const unsigned __int128 limit = neg ? (unsigned __int128)(1) << 63 : ((unsigned __int128)(1) << 63) - 1;
  if (v > limit)
    throw InputError(fmt::format("integer {} does not fit in 64 bits (kbisect carries integers from -2^63 to 2^63-1 "
                                 "exactly, and nothing it would have to round)", s));
  return neg ? int64_t(-(__int128)v) : int64_t(v);
}

// A float in Python's or YAML's spellings; nullopt when the text is not one; InputError when it is one that
// a double cannot hold (1e400, 1e-400: Python would make them inf and 0.0, which is not what was written).
std::optional<double> read_float(std::string s) {
  std::string low;
  for (char c : s) low += char(std::tolower((unsigned char)c));
  const bool neg = !low.empty() && low[0] == '-';
  std::string body = (!low.empty() && (low[0] == '-' || low[0] == '+')) ? low.substr(1) : low;
  if (body == "inf" || body == ".inf" || body == "infinity") return neg ? -HUGE_VAL : HUGE_VAL;
  if (body == "nan" || body == ".nan") return std::nan("");
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos ||
      body.find_first_of("0123456789") == std::string::npos)
    return std::nullopt;
  if (!s.empty() && s[0] == '+') s = s.substr(1);
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (end != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range)
    throw InputError(fmt::format("float {} does not fit in a double: it cannot be carried exactly", s));
  if (ec != std::errc()) return std::nullopt;
  return d;
}

}  // namespace

std::string to_string(const ParamValue& v) {
  if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto f = std::get_if<double>(&v)) return float_text(*f);
  if (auto b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (std::holds_alternative<NoneValue>(v)) return "None";
  if (auto d = std::get_if<DtypeValue>(&v)) return "tl." + d->name;
  const std::string& s = std::get<std::string>(v);
  bool plain = s.find_first_of(",=\"\n") == std::string::npos && s.find_first_not_of(" \t") != std::string::npos &&
               isspace((unsigned char)s.front()) == 0 && isspace((unsigned char)s.back()) == 0 && s[0] != '\'';
  if (plain) {
    try {
      plain = std::holds_alternative<std::string>(parse_param_value(s));
    } catch (const InputError&) {
      plain = false;
    }
  }
  return plain ? s : quoted(s);
}

std::string value_kind(const ParamValue& v) {
  static const char* names[] = {"int", "float", "str", "bool", "None", "dtype"};
  return names[v.index()];
}

ParamValue parse_param_value(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) {
        ++i;
        out += s[i] == 'n' ? '\n' : s[i];
      } else {
        out += s[i];
      }
    }
    return out;
  }
  if (s == "True" || s == "true" || s == "TRUE") return true;
  if (s == "False" || s == "false" || s == "FALSE") return false;
  if (s == "None" || s == "null" || s == "Null" || s == "NULL" || s == "~") return NoneValue{};
  if (s.rfind("tl.", 0) == 0 && is_identifier(s.substr(3))) return DtypeValue{s.substr(3)};
  if (auto i = read_integer(s)) return *i;
  if (auto f = read_float(s)) return *f;
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
    bool ok = spec->kind == ParamKind::Any || (spec->kind == ParamKind::Int && std::holds_alternative<int64_t>(val)) ||
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
    else if (auto f = std::get_if<double>(&v)) j[k] = std::isfinite(*f) ? json(*f) : json{{"float", to_string(v)}};
    else if (auto b = std::get_if<bool>(&v)) j[k] = *b;
    else if (std::holds_alternative<NoneValue>(v)) j[k] = nullptr;
    else if (auto d = std::get_if<DtypeValue>(&v)) j[k] = {{"dtype", d->name}};
    else j[k] = std::get<std::string>(v);
  }
  return j;
}

Params params_from_json(const json& j) {
  Params p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string field = "params." + it.key();
    if (it->is_number_integer()) p.set(it.key(), json_int<int64_t>(*it, field));
    else if (it->is_number()) p.set(it.key(), it->get<double>());
    else if (it->is_string()) p.set(it.key(), it->get<std::string>());
    else if (it->is_boolean()) p.set(it.key(), it->get<bool>());
    else if (it->is_null()) p.set(it.key(), NoneValue{});
    else if (it->is_object() && it->size() == 1 && it->contains("dtype") && (*it)["dtype"].is_string())
      p.set(it.key(), DtypeValue{(*it)["dtype"].get<std::string>()});
    else if (it->is_object() && it->size() == 1 && it->contains("float") && (*it)["float"].is_string()) {
      const ParamValue f = parse_param_value((*it)["float"].get<std::string>());
      if (!std::holds_alternative<double>(f)) throw InputError(fmt::format("{}: '{}' is not a float", field, it->dump()));
      p.set(it.key(), f);
    } else {
      throw InputError(fmt::format("{} has an unsupported type: {}", field, it->dump()));
    }
  }
  return p;
}

ParamValue yaml_param_value(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar())
    cx.fail(n, fmt::format("'{}': expected a value, got a {}", field, n.IsMap() ? "mapping" : n.IsSequence() ? "list" : "null"));
  if (n.Tag() == "!") return n.Scalar();  // quoted: a string, whatever it spells
  try {
    return parse_param_value(n.Scalar());
  } catch (const InputError& e) {
    cx.fail(n, fmt::format("'{}': {}", field, e.what()));
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kb
