#include "harness/sweep.h"

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/backend.h"
#include "core/error.h"
#include "core/text.h"
#include "core/fsutil.h"

namespace kb {

namespace fs = std::filesystem;

namespace {

using Ctx = YamlCtx;

void check_keys(const Ctx& cx, const YAML::Node& n, const std::string& what, const std::vector<std::string>& known) {
  check_yaml_keys(cx, n, what, known);
}

ParamValue scalar_value(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) cx.fail(n, fmt::format("'{}': expected a value, got a {}", field, n.IsMap() ? "mapping" : "list"));
  return parse_param_value(n.Scalar());
}

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
    check_keys(cx, n, "axis '" + field + "'", {"range", "pow2", "values"});
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

using Row = std::map<std::string, ParamValue>;

// Cartesian product of plain axes, times a zipped group (equal-length lists that go together).
std::vector<Row> expand_axes(const Ctx& cx, const YAML::Node& plain, const YAML::Node& zip,
                             const std::set<std::string>& skip_keys = {}) {
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

std::vector<Shape> parse_shapes(const Ctx& cx, const YAML::Node& n, const std::string& base_dir,
                                const std::map<std::string, std::string>& sets);

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
    check_keys(cx, n, "shape set reference", {"set"});
    std::string name = n["set"].as<std::string>();
    auto it = sets.find(name);
    std::string ref = it != sets.end() ? it->second : name;
    try {
      return load_shape_set(ref, base_dir);
    } catch (const InputError& e) {
      cx.fail(n["set"], e.what());
    }
  }
  check_keys(cx, n, "shape", {"M", "N", "K", "zip"});
  std::vector<Shape> out;
  for (const auto& r : expand_axes(cx, n, n["zip"], {"zip"})) out.push_back(shape_from_row(cx, n, r));
  return out;
}

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

void apply_measure(const Ctx& cx, const YAML::Node& n, MeasureConfig& m) {
  if (!n) return;
  if (!n.IsMap()) cx.fail(n, "'measure' must be a mapping");
  check_keys(cx, n, "measure",
             {"mode", "warmup_s", "min_samples", "max_samples", "min_time_s", "max_time_s", "noise", "min_sample_s", "seed"});
  auto num = [&](const char* k) {
    auto v = scalar_value(cx, n[k], k);
    if (auto i = std::get_if<int64_t>(&v)) return double(*i);
    if (auto d = std::get_if<double>(&v)) return *d;
    cx.fail(n[k], fmt::format("measure.{} = '{}' is not a number", k, n[k].Scalar()));
  };
  if (n["mode"]) {
    m.mode = n["mode"].as<std::string>();
    if (m.mode != "hot" && m.mode != "cold") cx.fail(n["mode"], fmt::format("measure.mode '{}' must be hot or cold", m.mode));
  }
  if (n["warmup_s"]) m.warmup_s = num("warmup_s");
  if (n["min_sample_s"]) m.min_sample_s = num("min_sample_s");
  if (n["min_samples"]) m.min_samples = int(num("min_samples"));
  if (n["max_samples"]) m.max_samples = int(num("max_samples"));
  if (n["min_time_s"]) m.min_time_s = num("min_time_s");
  if (n["max_time_s"]) m.max_time_s = num("max_time_s");
  if (n["seed"]) m.seed = uint64_t(num("seed"));
  if (n["noise"]) {
    try {
      m.noise = parse_fraction(n["noise"].Scalar(), "measure.noise");
    } catch (const InputError& e) {
      cx.fail(n["noise"], e.what());
    }
  }
  if (m.min_samples < 1) cx.fail(n, "measure.min_samples must be >= 1");
  if (m.max_samples < m.min_samples) cx.fail(n, "measure.max_samples must be >= min_samples");
  if (m.max_time_s <= 0) cx.fail(n, "measure.max_time_s must be positive");
}

std::vector<std::string> string_list(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  std::vector<std::string> out;
  if (!n) return out;
  if (n.IsScalar()) out.push_back(n.Scalar());
  else if (n.IsSequence())
    for (const auto& x : n) {
      if (!x.IsScalar()) cx.fail(x, fmt::format("'{}' entries must be strings", field));
      out.push_back(x.Scalar());
    }
  else cx.fail(n, fmt::format("'{}' must be a string or a list of strings", field));
  return out;
}

std::string check_tier(const Ctx& cx, const YAML::Node& n) {
  std::string t = n.as<std::string>();
  if (t != "l1" && t != "l2" && t != "l3") cx.fail(n, fmt::format("tier '{}' must be l1, l2 or l3", t));
  return t;
}

}  // namespace

double parse_fraction(const std::string& text, const std::string& what) {
  std::string s = text;
  bool pct = !s.empty() && s.back() == '%';
  if (pct) s.pop_back();
  try {
    size_t pos = 0;
    double v = std::stod(s, &pos);
    if (pos != s.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument("x");
    return pct ? v / 100.0 : v;
  } catch (const std::exception&) {
    throw InputError(fmt::format("{}: '{}' is not a fraction or percentage (e.g. 0.005 or 0.5%)", what, text));
  }
}

std::string sweeps_dir() {
  if (const char* d = getenv("KBISECT_SWEEPS_DIR"); d && *d) return d;
  std::string exe = executable_path();
  if (!exe.empty()) {
    fs::path installed = fs::path(exe).parent_path().parent_path() / "share" / "kbisect" / "sweeps";
    if (fs::is_directory(installed)) return installed.string();
  }
  return std::string(KBISECT_SOURCE_DIR) + "/sweeps";
}

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
  Ctx cx{path};
  const YAML::Node root = yaml_load(read_file(path), path);
  if (!root.IsMap() || !root["shapes"]) throw InputError(fmt::format("{}: a shape set needs a 'shapes' field", path));
  check_keys(cx, root, "shape set", {"name", "description", "shapes"});
  return parse_shapes(cx, root["shapes"], fs::path(path).parent_path().parent_path().string(), {});
}

Sweep parse_sweep(const std::string& text, const std::string& origin, const SweepOptions& opts) {
  Ctx cx{origin};
  const YAML::Node root = yaml_load(text, origin);
  if (!root.IsMap()) throw InputError(fmt::format("{}: a sweep must be a mapping with 'benchmarks'", origin));
  check_keys(cx, root, "sweep", {"name", "description", "tier", "tiers", "toolchains", "measure", "shape_sets", "benchmarks"});
  const std::string base_dir = fs::absolute(origin).parent_path().string();

  Sweep sw;
  sw.file = origin;
  sw.name = root["name"] ? root["name"].as<std::string>() : fs::path(origin).stem().string();
  std::string default_tier = root["tier"] ? check_tier(cx, root["tier"]) : "l1";
  // Per-tier budgets: `tiers: {l1: {budget_s: 60}, l2: {budget_s: 3600}}` (applied after expansion below).
  if (auto t = root["tiers"]) {
    if (!t.IsMap()) cx.fail(t, "'tiers' must be a mapping like {l1: {budget_s: 60}}");
    for (auto it = t.begin(); it != t.end(); ++it) {
      const std::string name = check_tier(cx, it->first);
      const YAML::Node spec = it->second;
      if (!spec.IsMap()) cx.fail(spec, fmt::format("'tiers.{}' must be a mapping {{budget_s: SECONDS}}", name));
      check_keys(cx, spec, "tiers." + name, {"budget_s"});
      if (!spec["budget_s"]) cx.fail(spec, fmt::format("'tiers.{}' is missing field 'budget_s'", name));
      double b = 0;
      try {
        b = spec["budget_s"].as<double>();
      } catch (const YAML::Exception&) {
        cx.fail(spec["budget_s"], fmt::format("'tiers.{}.budget_s' must be a number of seconds", name));
      }
      if (!(b > 0) || !std::isfinite(b)) cx.fail(spec["budget_s"], fmt::format("'tiers.{}.budget_s' must be positive", name));
      sw.tier_budget_s[name] = b;
    }
  }
  MeasureConfig base_measure;
  apply_measure(cx, root["measure"], base_measure);
  std::map<std::string, std::string> sets;
  if (auto s = root["shape_sets"]) {
    if (!s.IsMap()) cx.fail(s, "'shape_sets' must be a mapping of name: file");
    for (auto it = s.begin(); it != s.end(); ++it) sets[it->first.as<std::string>()] = it->second.as<std::string>();
  }
  std::regex filter;
  if (!opts.filter.empty()) {
    try {
      filter = std::regex(opts.filter);
    } catch (const std::regex_error& e) {
      throw InputError(fmt::format("--filter '{}': invalid regular expression: {}", opts.filter, e.what()));
    }
  }

  // Toolchains: resolved once each (identity hashes the compiler binary), shared by all benchmarks.
  std::map<std::string, std::shared_ptr<const Toolchain>> tc_index;
  using TcPtr = std::shared_ptr<const Toolchain>;
  auto get_toolchain = [&](const std::string& spec, const YAML::Node* where, bool from_cli) -> TcPtr {
    std::string resolved = spec;
    if (!from_cli && (spec.ends_with(".yaml") || spec.ends_with(".yml") || spec.find(".yaml:") != std::string::npos ||
                      spec.find(".yml:") != std::string::npos) &&
        !fs::path(spec).is_absolute())
      resolved = base_dir + "/" + spec;
    if (auto it = tc_index.find(resolved); it != tc_index.end()) return it->second;
    Toolchain tc;
    try {
      tc = find_toolchain(resolved);
      resolve_identity(tc);
    } catch (const InputError& e) {
      if (where) throw InputError(cx.at(*where) + ": " + e.what());
      throw;
    } catch (const EnvError& e) {
      if (where) throw EnvError(cx.at(*where) + ": " + e.what());
      throw;
    }
    auto ptr = std::make_shared<const Toolchain>(std::move(tc));
    sw.toolchains.push_back(ptr);
    tc_index[resolved] = ptr;
    return ptr;
  };
  std::vector<TcPtr> cli_tcs;
  for (const auto& t : opts.toolchains) cli_tcs.push_back(get_toolchain(t, nullptr, true));
  std::vector<std::string> sweep_tc_names = string_list(cx, root["toolchains"], "toolchains");

  auto benches = root["benchmarks"];
  if (!benches || !benches.IsSequence() || benches.size() == 0) {
    if (benches) cx.fail(benches, "'benchmarks' must be a non-empty list");
    throw InputError(fmt::format("{}: missing field 'benchmarks'", origin));
  }
  for (const auto& b : benches) {
    if (!b.IsMap()) cx.fail(b, "each benchmark must be a mapping with 'kernel'");
    check_keys(cx, b, "benchmark",
               {"kernel", "backend", "config", "params", "zip", "dtypes", "shapes", "tier", "toolchains", "measure"});
    if (!b["kernel"]) cx.fail(b, "benchmark is missing field 'kernel'");
    std::string kname = b["kernel"].as<std::string>();
    std::string want_backend = b["backend"] ? b["backend"].as<std::string>() : "";
    if (!want_backend.empty() && !find_backend(want_backend))
      cx.fail(b["backend"], fmt::format("backend '{}' is not built into this kbisect", want_backend));
    bool declared = false;
    for (const auto* k : all_kernels())
      if (k->name == kname && (want_backend.empty() || k->backend == want_backend)) declared = true;
    if (!declared) {
      std::string names;
      for (const auto* k : all_kernels()) names += (names.empty() ? "" : ", ") + k->backend + "/" + k->name;
      cx.fail(b["kernel"], fmt::format("unknown kernel '{}' (kernels: {})", kname, names));
    }
    std::string tier = b["tier"] ? check_tier(cx, b["tier"]) : default_tier;
    if (!opts.tier.empty() && tier != opts.tier) continue;
    MeasureConfig mc = base_measure;
    apply_measure(cx, b["measure"], mc);

    std::vector<TcPtr> tcs = cli_tcs;
    if (tcs.empty()) {
      auto names = b["toolchains"] ? string_list(cx, b["toolchains"], "toolchains") : sweep_tc_names;
      const YAML::Node where = b["toolchains"] ? b["toolchains"] : root["toolchains"] ? root["toolchains"] : YAML::Node(b);
      if (names.empty()) cx.fail(b, "no toolchains: give 'toolchains' in the sweep or benchmark, or --toolchain");
      for (const auto& nm : names) tcs.push_back(get_toolchain(nm, &where, false));
    }
    std::vector<DType> dtypes;
    for (const auto& d : string_list(cx, b["dtypes"], "dtypes")) {
      try {
        dtypes.push_back(parse_dtype(d));
      } catch (const InputError& e) {
        cx.fail(b["dtypes"], e.what());
      }
    }
    if (dtypes.empty()) dtypes.push_back(DType::f32);
    if (!b["shapes"]) cx.fail(b, "benchmark is missing field 'shapes'");
    std::vector<Shape> shapes = parse_shapes(cx, b["shapes"], base_dir, sets);
    std::vector<Row> rows = expand_axes(cx, b["params"], b["zip"]);

    bool matched_any = false;
    for (const TcPtr& tc : tcs) {
      if (!want_backend.empty() && tc->backend != want_backend) continue;
      const KernelDecl* k = nullptr;
      for (const auto* kd : all_kernels())
        if (kd->name == kname && kd->backend == tc->backend) k = kd;
      if (!k) continue;
      matched_any = true;
      Params base;
      if (b["config"]) {
        std::string cfg = b["config"].as<std::string>();
        bool found = false;
        for (const auto& [nm, p] : k->configs)
          if (nm == cfg) {
            base = p;
            found = true;
          }
        if (!found) cx.fail(b["config"], fmt::format("kernel {}/{} has no config '{}'", k->backend, k->name, cfg));
      }
      for (DType dt : dtypes) {
        for (const auto& row : rows) {
          Params given = base;
          for (const auto& [pk, pv] : row) given.set(pk, pv);
          Params full;
          try {
            full = k->complete(given);
          } catch (const InputError& e) {
            cx.fail(b["params"] ? b["params"] : b, e.what());
          }
          std::optional<std::string> why;
          if (!k->supports(dt)) why = fmt::format("dtype {} not supported by {}/{}", to_string(dt), k->backend, k->name);
          if (!why && k->check_params) why = k->check_params(full, dt, tc->target);
          for (const auto& sh : shapes) {
            PlannedCase pc;
            pc.c.kernel = k;
            pc.c.params = full;
            pc.c.shape = sh;
            pc.c.dtype = dt;
            pc.c.toolchain = tc->name;
            pc.c.tier = tier;
            pc.toolchain = tc;
            pc.measure = mc;
            pc.skip_reason = why;
            if (!pc.skip_reason && k->check_shape) pc.skip_reason = k->check_shape(full, sh);
            if (!opts.filter.empty() && !std::regex_search(pc.c.id(), filter)) continue;
            sw.cases.push_back(std::move(pc));
          }
        }
      }
    }
    if (!matched_any) {
      std::string tn;
      for (const auto& t : tcs) tn += (tn.empty() ? "" : ", ") + t->name + " (" + t->backend + ")";
      cx.fail(b["kernel"], fmt::format("kernel '{}' has no toolchain of its backend among: {}", kname, tn));
    }
  }
  // A tier budget caps the measuring time of that tier's runnable cases together: each of its n cases gets
  // at most budget_s / n (warm-up at most a quarter of that). Compile and correctness time come on top.
  for (const auto& [tier, budget] : sw.tier_budget_s) {
    size_t n = 0;
    for (const auto& pc : sw.cases)
      if (pc.c.tier == tier && !pc.skip_reason) ++n;
    if (n == 0) continue;
    const double cap = budget / double(n);
    for (auto& pc : sw.cases) {
      if (pc.c.tier != tier) continue;
      pc.measure.max_time_s = std::min(pc.measure.max_time_s, cap);
      pc.measure.min_time_s = std::min(pc.measure.min_time_s, cap);
      pc.measure.warmup_s = std::min(pc.measure.warmup_s, cap / 4);
    }
  }
  return sw;
}

Sweep load_sweep(const std::string& path, const SweepOptions& opts) {
  if (!file_exists(path)) throw InputError(fmt::format("sweep file not found: {}", path));
  return parse_sweep(read_file(path), path, opts);
}

}  // namespace kb
