#include "harness/sweep.h"

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include <unistd.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/backend.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/text.h"
#include "core/fsutil.h"
#include "harness/sweep_axes.h"
#include "harness/tuned_table.h"

namespace kb {

namespace fs = std::filesystem;

namespace {

using Ctx = YamlCtx;

using sweep_yaml::Row;
using sweep_yaml::scalar_value;
using TcPtr = std::shared_ptr<const Toolchain>;

void check_keys(const Ctx& cx, const YAML::Node& n, const std::string& what, const std::vector<std::string>& known) {
  check_yaml_keys(cx, n, what, known);
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

// Per-tier budgets: `tiers: {l1: {budget_s: 60}, l2: {budget_s: 3600}}` (applied after expansion).
std::map<std::string, double> parse_tier_budgets(const Ctx& cx, const YAML::Node& t) {
  std::map<std::string, double> out;
  if (!t) return out;
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
    out[name] = b;
  }
  return out;
}

std::map<std::string, std::string> parse_shape_sets(const Ctx& cx, const YAML::Node& s) {
  std::map<std::string, std::string> sets;
  if (!s) return sets;
  if (!s.IsMap()) cx.fail(s, "'shape_sets' must be a mapping of name: file");
  for (auto it = s.begin(); it != s.end(); ++it) sets[it->first.as<std::string>()] = it->second.as<std::string>();
  return sets;
}

std::regex compile_filter(const std::string& pattern) {
  if (pattern.empty()) return {};
  try {
    return checked_regex(pattern);
  } catch (const std::regex_error& e) {
    throw InputError(fmt::format("--filter '{}': invalid regular expression: {}", pattern, e.what()));
  }
}

// Toolchains: resolved once each (identity hashes the compiler binary), shared by all benchmarks.
class ToolchainIndex {
 public:
  ToolchainIndex(const Ctx& cx, std::string base_dir, Sweep& sw) : cx_(cx), base_dir_(std::move(base_dir)), sw_(sw) {}

  TcPtr get(const std::string& spec, const YAML::Node* where, bool from_cli) {
    std::string resolved = spec;
    if (!from_cli && (spec.ends_with(".yaml") || spec.ends_with(".yml") || spec.find(".yaml:") != std::string::npos ||
                      spec.find(".yml:") != std::string::npos) &&
        !fs::path(spec).is_absolute())
      resolved = base_dir_ + "/" + spec;
    if (auto it = index_.find(resolved); it != index_.end()) return it->second;
    Toolchain tc;
    try {
      tc = find_toolchain(resolved);
      resolve_identity(tc);
    } catch (const InputError& e) {
      if (where) throw InputError(cx_.at(*where) + ": " + e.what());
      throw;
    } catch (const EnvError& e) {
      if (where) throw EnvError(cx_.at(*where) + ": " + e.what());
      throw;
    }
    auto ptr = std::make_shared<const Toolchain>(std::move(tc));
    sw_.toolchains.push_back(ptr);
    index_[resolved] = ptr;
    return ptr;
  }

 private:
  const Ctx& cx_;
  std::string base_dir_;
  Sweep& sw_;
  std::map<std::string, TcPtr> index_;
};

// `tuned_table: FILE` (relative to the sweep), else $KBISECT_TUNED_TABLE; null when neither names a file.
std::shared_ptr<const TunedTable> load_tuned_table(const Ctx& cx, const YAML::Node& n, const std::string& base_dir) {
  std::string path = n ? yaml_scalar(cx, n, "tuned_table") : default_tuned_table_path();
  if (path.empty()) return nullptr;
  if (n && !fs::path(path).is_absolute()) path = base_dir + "/" + path;
  if (!file_exists(path)) {
    if (n) cx.fail(n, fmt::format("tuned_table: file not found: {}", path));
    return nullptr;
  }
  return std::make_shared<const TunedTable>(TunedTable::load(path));
}

// What the whole sweep file gives every benchmark.
struct SweepDefaults {
  const YAML::Node& root;
  std::string base_dir;
  std::string tier;
  MeasureConfig measure;
  std::map<std::string, std::string> shape_sets;
  std::vector<TcPtr> cli_toolchains;
  std::vector<std::string> toolchain_names;
  std::regex filter;
  std::shared_ptr<const TunedTable> tuned;  // for `config: tuned` (null: no table)
};

void check_kernel_declared(const Ctx& cx, const YAML::Node& b, const std::string& kname, const std::string& want_backend) {
  if (!want_backend.empty() && !find_backend(want_backend))
    cx.fail(b["backend"], fmt::format("backend '{}' is not built into this kbisect", want_backend));
  for (const auto* k : all_kernels())
    if (k->name == kname && (want_backend.empty() || k->backend == want_backend)) return;
  std::string names;
  for (const auto* k : all_kernels()) names += (names.empty() ? "" : ", ") + k->backend + "/" + k->name;
  cx.fail(b["kernel"], fmt::format("unknown kernel '{}' (kernels: {})", kname, names));
}

std::vector<TcPtr> benchmark_toolchains(const Ctx& cx, const YAML::Node& b, const SweepDefaults& d, ToolchainIndex& tcs) {
  if (!d.cli_toolchains.empty()) return d.cli_toolchains;
  std::vector<TcPtr> out;
  auto names = b["toolchains"] ? string_list(cx, b["toolchains"], "toolchains") : d.toolchain_names;
  const YAML::Node where = b["toolchains"] ? b["toolchains"] : d.root["toolchains"] ? d.root["toolchains"] : YAML::Node(b);
  if (names.empty()) cx.fail(b, "no toolchains: give 'toolchains' in the sweep or benchmark, or --toolchain");
  for (const auto& nm : names) out.push_back(tcs.get(nm, &where, false));
  return out;
}

std::vector<DType> benchmark_dtypes(const Ctx& cx, const YAML::Node& b) {
  std::vector<DType> dtypes;
  for (const auto& d : string_list(cx, b["dtypes"], "dtypes")) {
    try {
      dtypes.push_back(parse_dtype(d));
    } catch (const InputError& e) {
      cx.fail(b["dtypes"], e.what());
    }
  }
  if (dtypes.empty()) dtypes.push_back(DType::f32);
  return dtypes;
}

// The named built-in config's params; nullopt for `config: tuned` (resolved per case, tuned_params).
std::optional<Params> config_params(const Ctx& cx, const YAML::Node& b, const KernelDecl& k) {
  if (!b["config"]) return Params{};
  std::string cfg = b["config"].as<std::string>();
  if (cfg == "tuned") return std::nullopt;
  for (const auto& [nm, p] : k.configs)
    if (nm == cfg) return p;
  cx.fail(b["config"], fmt::format("kernel {}/{} has no config '{}' (or 'tuned')", k.backend, k.name, cfg));
}

// `config: tuned`: the table's entry for the case, its nearest shape, or the built-in default with the reason.
Params tuned_params(const SweepDefaults& d, const KernelDecl& k, const Toolchain& tc, DType dt, const Shape& sh,
                    std::string& note) {
  if (!d.tuned) {
    note = "fallback: no tuned table (give 'tuned_table' in the sweep or set $KBISECT_TUNED_TABLE)";
    return k.configs.front().second;
  }
  TunedResolution r = d.tuned->resolve({machine_key(tc), k.backend, k.name, tc.identity, dt, sh});
  note = r.how + (r.reason.empty() ? "" : ": " + r.reason);
  return r.how == "fallback" ? k.configs.front().second : r.params;
}

// `user_kernels: [file.yaml, ...]`: users' own Triton kernels (docs/triton.md), relative to the sweep file.
void load_user_kernels(const Ctx& cx, const YAML::Node& n, const std::string& base_dir) {
  if (!n) return;
  if (!n.IsSequence()) cx.fail(n, "'user_kernels' must be a list of triton_kernel YAML files");
  for (const auto& f : n) {
    const std::string rel = f.as<std::string>();
    const fs::path p = fs::path(rel).is_absolute() ? fs::path(rel) : fs::path(base_dir) / rel;
    if (!fs::exists(p)) cx.fail(f, fmt::format("user_kernels: '{}' does not exist ({})", rel, p.string()));
    triton::load_user_kernel(p.string());
  }
}

const KernelDecl* find_kernel_any(const std::string& name) {
  for (const auto* k : all_kernels())
    if (k->name == name) return k;
  return nullptr;
}

// A user kernel's shape axis: the file's shapes, or those a benchmark names in `shapes:`.
std::vector<Shape> user_kernel_shapes(const Ctx& cx, const YAML::Node& b, const triton::UserKernel& u) {
  if (u.shapes.empty()) {  // compile-only (an imported trace without launches): static metrics, nothing to run
    if (b["shapes"]) cx.fail(b["shapes"], fmt::format("kernel '{}' ({}) declares no shapes", u.name, u.file));
    Shape s;
    s.label = "compile-only";
    return {s};
  }
  if (!b["shapes"]) return u.shapes;
  std::vector<Shape> out;
  for (const auto& name : string_list(cx, b["shapes"], "shapes")) {
    bool found = false;
    for (const auto& s : u.shapes)
      if (s.label == name) out.push_back(s), found = true;
    if (!found) {
      std::string names;
      for (const auto& s : u.shapes) names += (names.empty() ? "" : ", ") + s.label;
      cx.fail(b["shapes"], fmt::format("kernel '{}' has no shape named '{}' (its shapes: {})", u.name, name, names));
    }
  }
  return out;
}

// One benchmark's axes, expanded for one kernel and toolchain.
struct BenchmarkPlan {
  const YAML::Node& b;
  std::string tier;
  MeasureConfig measure;
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<Row> rows;
};

// The complete params of one row (over `base`), or the sweep error naming the params.
Params row_params(const Ctx& cx, const BenchmarkPlan& bp, const KernelDecl* k, Params given, const Row& row) {
  for (const auto& [pk, pv] : row) given.set(pk, pv);
  try {
    return k->complete(given);
  } catch (const InputError& e) {
    cx.fail(bp.b["params"] ? bp.b["params"] : bp.b, e.what());
  }
}

void expand_for_toolchain(const Ctx& cx, const BenchmarkPlan& bp, const KernelDecl* k, const TcPtr& tc,
                          const SweepDefaults& d, const std::string& filter, Sweep& sw) {
  const std::optional<Params> base = config_params(cx, bp.b, *k);
  for (DType dt : bp.dtypes) {
    for (const auto& row : bp.rows) {
      for (const auto& sh : bp.shapes) {
        PlannedCase pc;
        const Params full = row_params(cx, bp, k, base ? *base : tuned_params(d, *k, *tc, dt, sh, pc.tuned), row);
        std::optional<std::string> why;
        if (!k->supports(dt)) why = fmt::format("dtype {} not supported by {}/{}", to_string(dt), k->backend, k->name);
        if (!why) why = k->language_mismatch(tc->name, tc->kind);
        if (!why && k->check_params) why = k->check_params(full, dt, tc->target);
        pc.c.kernel = k;
        pc.c.params = full;
        pc.c.shape = sh;
        pc.c.dtype = dt;
        pc.c.toolchain = tc->name;
        pc.c.tier = bp.tier;
        pc.toolchain = tc;
        pc.measure = bp.measure;
        pc.skip_reason = why;
        if (!pc.skip_reason && k->check_shape) pc.skip_reason = k->check_shape(full, dt, sh);
        if (!pc.skip_reason) pc.skip_reason = shape_memory_reason(sh);
        if (!filter.empty() && !std::regex_search(pc.c.id(), d.filter)) continue;
        sw.cases.push_back(std::move(pc));
      }
    }
  }
}

void expand_benchmark(const Ctx& cx, const YAML::Node& b, const SweepDefaults& d, const SweepOptions& opts,
                      ToolchainIndex& tc_index, Sweep& sw) {
  if (!b.IsMap()) cx.fail(b, "each benchmark must be a mapping with 'kernel'");
  check_keys(cx, b, "benchmark",
             {"kernel", "backend", "config", "params", "zip", "dtypes", "shapes", "tier", "toolchains", "measure"});
  if (!b["kernel"]) cx.fail(b, "benchmark is missing field 'kernel'");
  const std::string kname = b["kernel"].as<std::string>();
  const std::string want_backend = b["backend"] ? b["backend"].as<std::string>() : "";
  check_kernel_declared(cx, b, kname, want_backend);
  BenchmarkPlan bp{b, b["tier"] ? check_tier(cx, b["tier"]) : d.tier, d.measure, {}, {}, {}};
  if (!opts.tier.empty() && bp.tier != opts.tier) return;
  apply_measure(cx, b["measure"], bp.measure);
  const std::vector<TcPtr> tcs = benchmark_toolchains(cx, b, d, tc_index);
  bp.dtypes = benchmark_dtypes(cx, b);
  if (const triton::UserKernel* u = triton::find_user_kernel(kname)) {
    bp.shapes = user_kernel_shapes(cx, b, *u);
    if (!b["dtypes"]) bp.dtypes = find_kernel_any(kname)->dtypes;  // its signature fixes the dtype
  } else {
    if (!b["shapes"]) cx.fail(b, "benchmark is missing field 'shapes'");
    bp.shapes = sweep_yaml::parse_shapes(cx, b["shapes"], d.base_dir, d.shape_sets);
  }
  bp.rows = sweep_yaml::expand_axes(cx, b["params"], b["zip"]);

  bool matched_any = false;
  for (const TcPtr& tc : tcs) {
    if (!want_backend.empty() && tc->backend != want_backend) continue;
    const KernelDecl* k = nullptr;
    for (const auto* kd : all_kernels())
      if (kd->name == kname && kd->backend == tc->backend) k = kd;
    if (!k) continue;
    matched_any = true;
    expand_for_toolchain(cx, bp, k, tc, d, opts.filter, sw);
  }
  if (!matched_any) {
    std::string tn;
    for (const auto& t : tcs) tn += (tn.empty() ? "" : ", ") + t->name + " (" + t->backend + ")";
    cx.fail(b["kernel"], fmt::format("kernel '{}' has no toolchain of its backend among: {}", kname, tn));
  }
}

// A tier budget caps the measuring time of that tier's runnable cases together: each of its n cases gets
// at most budget_s / n (warm-up at most a quarter of that). Compile and correctness time come on top.
void apply_tier_budgets(Sweep& sw) {
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
}

// Bytes in decimal units with three digits: "12 TB", "1.2 GB".
std::string byte_text(double b) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  size_t u = 0;
  while (b >= 1000 && u + 1 < std::size(units)) {
    b /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}", b, units[u]);
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0;
}

}  // namespace

std::optional<std::string> shape_memory_reason(const Shape& s, double memory_bytes) {
  const double M = double(s.M), N = double(s.N), K = double(s.K);
  const double need = (M * K + K * N + M * N) * sizeof(float);
  if (memory_bytes <= 0) memory_bytes = physical_memory_bytes();
  if (memory_bytes <= 0 || need <= memory_bytes) return std::nullopt;
  return fmt::format("needs {} of operands, more than the {} of memory", byte_text(need), byte_text(memory_bytes));
}

Sweep parse_sweep(const std::string& text, const std::string& origin, const SweepOptions& opts) {
  Ctx cx{origin};
  const YAML::Node root = yaml_load(text, origin);
  if (!root.IsMap()) throw InputError(fmt::format("{}: a sweep must be a mapping with 'benchmarks'", origin));
  check_keys(cx, root, "sweep", {"name", "description", "tier", "tiers", "toolchains", "measure", "shape_sets", "tuned_table",
                               "user_kernels", "benchmarks"});

  Sweep sw;
  sw.file = origin;
  sw.name = root["name"] ? root["name"].as<std::string>() : fs::path(origin).stem().string();
  SweepDefaults d{root, fs::absolute(origin).parent_path().string(), root["tier"] ? check_tier(cx, root["tier"]) : "l1",
                  {}, {}, {}, {}, {}, {}};
  sw.tier_budget_s = parse_tier_budgets(cx, root["tiers"]);
  load_user_kernels(cx, root["user_kernels"], d.base_dir);
  apply_measure(cx, root["measure"], d.measure);
  d.shape_sets = parse_shape_sets(cx, root["shape_sets"]);
  d.filter = compile_filter(opts.filter);
  ToolchainIndex tc_index(cx, d.base_dir, sw);
  for (const auto& t : opts.toolchains) d.cli_toolchains.push_back(tc_index.get(t, nullptr, true));
  d.toolchain_names = string_list(cx, root["toolchains"], "toolchains");
  d.tuned = load_tuned_table(cx, root["tuned_table"], d.base_dir);

  auto benches = root["benchmarks"];
  if (!benches || !benches.IsSequence() || benches.size() == 0) {
    if (benches) cx.fail(benches, "'benchmarks' must be a non-empty list");
    throw InputError(fmt::format("{}: missing field 'benchmarks'", origin));
  }
  for (const auto& b : benches) expand_benchmark(cx, b, d, opts, tc_index, sw);
  apply_tier_budgets(sw);
  return sw;
}


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

Sweep load_sweep(const std::string& path, const SweepOptions& opts) {
  if (!file_exists(path)) throw InputError(fmt::format("sweep file not found: {}", path));
  return parse_sweep(read_file(path), path, opts);
}

}  // namespace kb
