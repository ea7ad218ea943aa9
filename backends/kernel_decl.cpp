#include "backends/kernel_decl.h"

#include <stdexcept>

#include <fmt/format.h>

namespace kb {

KernelDeclBuilder::KernelDeclBuilder(std::string backend, std::string name) {
  decl_.backend = std::move(backend);
  decl_.name = std::move(name);
  decl_.check_shape = [](const Params&, DType, const Shape&) -> std::optional<std::string> { return std::nullopt; };
}

KernelDeclBuilder& KernelDeclBuilder::source(std::string path, std::vector<std::string> headers) {
  decl_.source = std::move(path);
  decl_.extra_sources = std::move(headers);
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::description(std::string text) {
  decl_.description = std::move(text);
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::int_param(std::string name, int64_t default_value, std::string help) {
  return param(std::move(name), ParamKind::Int, default_value, std::move(help));
}

KernelDeclBuilder& KernelDeclBuilder::param(std::string name, ParamKind kind, ParamValue default_value, std::string help) {
  decl_.params.push_back({std::move(name), kind, std::move(default_value), std::move(help)});
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::tile_params(int64_t bm, int64_t bn, int64_t bk, const std::string& unit) {
  int_param("BM", bm, "rows of C per " + unit);
  int_param("BN", bn, "columns of C per " + unit);
  return int_param("BK", bk, "depth per " + unit);
}

KernelDeclBuilder& KernelDeclBuilder::dtypes(std::vector<DType> d) {
  decl_.dtypes = std::move(d);
  return *this;
}

Params KernelDeclBuilder::defaults() const {
  Params p;
  for (const auto& spec : decl_.params) p.set(spec.name, spec.default_value);
  return p;
}

KernelDeclBuilder& KernelDeclBuilder::defaults_config(std::string name) {
  decl_.configs.emplace_back(std::move(name), defaults());
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::config(std::string name,
                                             std::initializer_list<std::pair<const std::string, ParamValue>> set) {
  Params p = defaults();
  for (const auto& [k, v] : set) p.set(k, v);
  decl_.configs.emplace_back(std::move(name), std::move(p));
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::tolerance(ToleranceSpec spec, std::string reason) {
  decl_.tolerance = spec;
  decl_.tolerance_reason = std::move(reason);
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::check_params(ParamsCheck f) {
  decl_.check_params = std::move(f);
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::tunable(const std::string& name, std::vector<int64_t> values) {
  return tunable_values(name, std::vector<ParamValue>(values.begin(), values.end()));
}

KernelDeclBuilder& KernelDeclBuilder::tunable_values(const std::string& name, std::vector<ParamValue> values) {
  bool declared = false;
  for (const auto& spec : decl_.params) declared = declared || spec.name == name;
  // A declaration error is the kernel author's, found by the first test that lists kernels.
  if (!declared || values.empty())
    throw std::logic_error(fmt::format("{}/{}: tunable '{}' is {}", decl_.backend, decl_.name, name,
                                       declared ? "given no values" : "not a declared parameter"));
  decl_.space.push_back({name, std::move(values)});
  return *this;
}

KernelDeclBuilder& KernelDeclBuilder::tunable_range(const std::string& name, int64_t lo, int64_t hi, int64_t step) {
  std::vector<int64_t> values;
  for (int64_t v = lo; step > 0 && v <= hi; v += step) values.push_back(v);
  return tunable(name, std::move(values));
}

KernelDeclBuilder& KernelDeclBuilder::check_shape(ShapeCheck f) {
  decl_.check_shape = std::move(f);
  return *this;
}

std::optional<std::string> check_positive(const Params& p, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (p.get_int(n) <= 0) return fmt::format("{}={} must be positive", n, p.get_int(n));
  return std::nullopt;
}

}  // namespace kb
