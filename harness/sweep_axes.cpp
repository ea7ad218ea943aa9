#include "harness/sweep_axes.h"

#include <filesystem>

#include <fmt/format.h>

#include "backends/param_yaml.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/sweep.h"

namespace kb {

namespace fs = std::filesystem;

namespace sweep_yaml {

using Ctx = YamlCtx;

ParamValue scalar_value(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  return yaml_param_value(cx, n, field);
}

namespace {

int64_t int_value(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  auto v = scalar_value(cx, n, field);
  if (auto i = std::get_if<int64_t>(&v)) return *i;
  cx.fail(n, fmt::format("'{}': expected an integer, got '{}'", field, n.Scalar()));
}

// An axis: scalar, list, {range: [start, stop, step]} (stop inclusive), {pow2: [lo, hi]} (powers of two
// from lo to hi inclusive), or {values: [...]}.
std::vector<ParamValue> axis_values(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  std::vector<ParamValue> out;
  if (n.IsScalar()) {
    out.push_back(scalar_value(cx, n, field));
  } else if (n.IsSequence()) {
    if (n.size() == 0) cx.fail(n, fmt::format("'{}': empty list", field));
    for (const auto& x : n) out.push_back(scalar_value(cx, x, field));
  } else if (n.IsMap()) {
    check_yaml_keys(cx, n, "axis '" + field + "'", {"range", "pow2", "values"});
    if (n["values"]) return axis_values(cx, n["values"], field);
    if (auto r = n["range"]) {
      if (!r.IsSequence() || (r.size() != 2 && r.size() != 3))
        cx.fail(r, fmt::format("'{}': range must be [start, stop] or [start, stop, step]", field));
      int64_t a = int_value(cx, r[0], field), b = int_value(cx, r[1], field);
      int64_t step = r.size() == 3 ? int_value(cx, r[2], field) : 1;
      if (step <= 0) cx.fail(r, fmt::format("'{}': range step must be positive, got {}", field, step));
      if (b < a) cx.fail(r, fmt::format("'{}': range stop {} is below start {}", field, b, a));
      if ((b - a) / step > 100000) cx.fail(r, fmt::format("'{}': range has more than 100000 values", field));
      for (int64_t v = a; v <= b; v += step) out.push_back(v);
    } else if (auto p = n["pow2"]) {
      if (!p.IsSequence() || p.size() != 2) cx.fail(p, fmt::format("'{}': pow2 must be [lo, hi]", field));
      int64_t lo = int_value(cx, p[0], field), hi = int_value(cx, p[1], field);
      auto is_pow2 = [](int64_t x) { return x > 0 && (x & (x - 1)) == 0; };
      if (!is_pow2(lo) || !is_pow2(hi) || hi < lo)
        cx.fail(p, fmt::format("'{}': pow2 bounds must be powers of two with lo <= hi, got [{}, {}]", field, lo, hi));
      for (int64_t v = lo; v <= hi; v *= 2) out.push_back(v);
    } else {
      cx.fail(n, fmt::format("'{}': axis mapping needs range, pow2 or values", field));
    }
  } else {
    cx.fail(n, fmt::format("'{}': missing value", field));
  }
  return out;
}

}  // namespace

std::vector<Row> expand_axes(const Ctx& cx, const YAML::Node& plain, const YAML::Node& zip,
                             const std::set<std::string>& skip_keys) {
  std::vector<Row> rows{Row{}};
  if (plain && plain.IsMap()) {
    for (auto it = plain.begin(); it != plain.end(); ++it) {
      std::string k = it->first.as<std::string>();
      if (skip_keys.count(k)) continue;
      auto vals = axis_values(cx, it->second, k);
      std::vector<Row> next;
      for (const auto& r : rows)
        for (const auto& v : vals) {
          Row x = r;
          x[k] = v;
          next.push_back(std::move(x));
        }
      rows = std::move(next);
    }
  } else if (plain && !plain.IsNull()) {
    cx.fail(plain, "expected a mapping of name: values");
  }
  if (zip) {
    if (!zip.IsMap()) cx.fail(zip, "'zip' must be a mapping of name: list");
    std::vector<std::pair<std::string, std::vector<ParamValue>>> cols;
    size_t len = 0;
    for (auto it = zip.begin(); it != zip.end(); ++it) {
      std::string k = it->first.as<std::string>();
      auto vals = axis_values(cx, it->second, k);
      cols.emplace_back(k, vals);
      len = std::max(len, vals.size());
    }
    for (auto& [k, v] : cols) {
      if (v.size() == 1) v.assign(len, v[0]);  // a scalar broadcasts
      if (v.size() != len)
        cx.fail(zip[k], fmt::format("zip: '{}' has {} values but others have {}", k, v.size(), len));
    }
    std::vector<Row> next;
    for (const auto& r : rows)
      for (size_t i = 0; i < len; ++i) {
        Row x = r;
        for (auto& [k, v] : cols) x[k] = v[i];
        next.push_back(std::move(x));
      }
    rows = std::move(next);
  }
  return rows;
}

namespace {

Shape shape_from_row(const Ctx& cx, const YAML::Node& where, const Row& r) {
  Shape s;
  for (const char* d : {"M", "N", "K"}) {
    auto it = r.find(d);
    if (it == r.end()) cx.fail(where, fmt::format("shape is missing '{}'", d));
    auto i = std::get_if<int64_t>(&it->second);
    if (!i) cx.fail(where, fmt::format("shape {} = '{}' is not an integer", d, to_string(it->second)));
    if (*i <= 0) cx.fail(where, fmt::format("shape {} = {} must be positive", d, *i));
    (d[0] == 'M' ? s.M : d[0] == 'N' ? s.N : s.K) = *i;
  }
  return s;
}

std::vector<Shape> parse_shape_item(const Ctx& cx, const YAML::Node& n, const std::string& base_dir,
                                    const std::map<std::string, std::string>& sets) {
  if (n.IsSequence()) {
    // [M, N, K]
    if (n.size() != 3) cx.fail(n, fmt::format("a shape list must be [M, N, K], got {} values", n.size()));
    Row r{{"M", int_value(cx, n[0], "M")}, {"N", int_value(cx, n[1], "N")}, {"K", int_value(cx, n[2], "K")}};
    return {shape_from_row(cx, n, r)};
  }
  if (!n.IsMap()) cx.fail(n, "a shape must be [M, N, K], {M:, N:, K:}, {set: NAME} or {zip: {...}}");
  if (n["set"]) {
    check_yaml_keys(cx, n, "shape set reference", {"set"});
    std::string name = n["set"].as<std::string>();
    auto it = sets.find(name);
    std::string ref = it != sets.end() ? it->second : name;
    try {
      return load_shape_set(ref, base_dir);
    } catch (const InputError& e) {
      cx.fail(n["set"], e.what());
    }
  }
  check_yaml_keys(cx, n, "shape", {"M", "N", "K", "zip"});
  std::vector<Shape> out;
  for (const auto& r : expand_axes(cx, n, n["zip"], {"zip"})) out.push_back(shape_from_row(cx, n, r));
  return out;
}

}  // namespace

std::vector<Shape> parse_shapes(const Ctx& cx, const YAML::Node& n, const std::string& base_dir,
                                const std::map<std::string, std::string>& sets) {
  if (!n) return {};
  // A list of items, or a single [M, N, K], or a single mapping item.
  if (n.IsSequence() && n.size() > 0 && n[0].IsScalar()) return parse_shape_item(cx, n, base_dir, sets);
  if (n.IsSequence()) {
    std::vector<Shape> out;
    for (const auto& x : n) {
      auto v = parse_shape_item(cx, x, base_dir, sets);
      out.insert(out.end(), v.begin(), v.end());
    }
    if (out.empty()) cx.fail(n, "'shapes' is empty");
    return out;
  }
  return parse_shape_item(cx, n, base_dir, sets);
}

}  // namespace sweep_yaml

std::vector<Shape> load_shape_set(const std::string& name_or_path, const std::string& relative_to) {
  std::vector<std::string> candidates;
  if (name_or_path.find('/') != std::string::npos || fs::path(name_or_path).has_extension()) {
    candidates.push_back(fs::path(name_or_path).is_absolute() ? name_or_path : relative_to + "/" + name_or_path);
  } else {
    candidates.push_back(relative_to + "/shapes/" + name_or_path + ".yaml");
    candidates.push_back(sweeps_dir() + "/shapes/" + name_or_path + ".yaml");
  }
  std::string path;
  for (const auto& c : candidates)
    if (file_exists(c)) {
      path = c;
      break;
    }
  if (path.empty()) throw InputError(fmt::format("shape set '{}' not found (looked in {})", name_or_path, candidates.back()));
  YamlCtx cx{path};
  const YAML::Node root = yaml_load(read_file(path), path);
  if (!root.IsMap() || !root["shapes"]) throw InputError(fmt::format("{}: a shape set needs a 'shapes' field", path));
  check_yaml_keys(cx, root, "shape set", {"name", "description", "shapes"});
  return sweep_yaml::parse_shapes(cx, root["shapes"], fs::path(path).parent_path().parent_path().string(), {});
}

}  // namespace kb
