#include "bisect/config.h"

#include "bisect/descend.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "harness/external.h"
#include "core/text.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "harness/sweep.h"

namespace kb::bisect {

namespace fs = std::filesystem;

namespace {

using Ctx = YamlCtx;

void check_keys(const Ctx& cx, const YAML::Node& n, const std::string& what, const std::vector<std::string>& known) {
  check_yaml_keys(cx, n, what, known);
}

std::string str(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) cx.fail(n, fmt::format("'{}' must be a string", field));
  return n.Scalar();
}

double num(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) cx.fail(n, fmt::format("'{}' must be a number", field));
  try {
    size_t pos = 0;
    double v = std::stod(n.Scalar(), &pos);
    if (pos == n.Scalar().size()) return v;
  } catch (...) {
  }
  cx.fail(n, fmt::format("'{}' = '{}' is not a number", field, n.Scalar()));
}

int positive_int(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  double v = num(cx, n, field);
  if (v < 1 || v != double(int64_t(v)) || v > 1e9) cx.fail(n, fmt::format("'{}' = '{}' must be a positive integer", field, n.Scalar()));
  return int(v);
}

bool boolean(const Ctx& cx, const YAML::Node& n, const std::string& field) {
  const std::string s = str(cx, n, field);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  cx.fail(n, fmt::format("'{}' = '{}' must be true or false", field, s));
}

Metric parse_metric(const Ctx& cx, const YAML::Node& n, std::string& column) {
  if (n.IsMap()) {
    if (n["static"] && n.size() == 1) {
      column = str(cx, n["static"], "metric.static");
      const bool name = !column.empty() && std::all_of(column.begin(), column.end(), [](char c) {
        return isalnum((unsigned char)c) || c == '_' || c == '.';
      });
      if (!name) cx.fail(n["static"], fmt::format("'metric.static' = '{}' is not a metric column's name", column));
      return Metric::column;
    }
    if (!n["external"] || n.size() != 1)
      cx.fail(n, "'metric' as a mapping must be {external: {command: [...], parse: ...}} or {static: COLUMN}");
    return Metric::external;
  }
  const std::string s = str(cx, n, "metric");
  for (Metric m : {Metric::time, Metric::tflops, Metric::registers, Metric::spills, Metric::stack, Metric::smem,
                   Metric::code_bytes, Metric::compile_time, Metric::max_error})
    if (to_string(m) == s) return m;
  cx.fail(n, fmt::format("metric '{}' is not one of time, tflops, registers, spills, stack, smem, code_bytes, "
                         "compile_time, max_error (or {{external: ...}}, or {{static: COLUMN}} for another static column)",
                         s));
}

std::string emit(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return e.c_str();
}

// The config's own lines for the given top-level keys, every other line blanked, so the sweep parser's
// line:col messages point into the config file.
std::string keep_top_level(const std::string& text, const std::vector<std::string>& keys) {
  std::istringstream in(text);
  std::string line, out;
  bool keep = false;
  while (std::getline(in, line)) {
    const bool top = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#' && line[0] != '-';
    if (top) {
      keep = false;
      for (const auto& k : keys)
        if (line.rfind(k + ":", 0) == 0) keep = true;
      if (line == "---" || line == "...") keep = false;
    }
    out += (keep ? line : std::string()) + "\n";
  }
  return out;
}

// `where` (provider.build.slurm, measure.slurm): every build, or every run, a Slurm job with these sbatch
// options; `gpus` also reads gres and gpus (a run's GPUs).
slurm::SubmitOptions read_slurm(const Ctx& cx, const YAML::Node& n, const std::string& where, double& poll_s, bool gpus) {
  std::vector<std::string> keys = {"partition", "time", "cpus_per_task", "mem", "extra", "poll_s"};
  if (gpus) keys.insert(keys.end(), {"gres", "gpus"});
  if (!n.IsMap())
    cx.fail(n, fmt::format("'{}' must be a mapping {{partition, time, cpus_per_task, mem, {}extra, poll_s}}", where,
                           gpus ? "gres, gpus, " : ""));
  check_keys(cx, n, where, keys);
  slurm::SubmitOptions o;
  if (n["partition"]) o.partition = str(cx, n["partition"], where + ".partition");
  if (n["time"]) o.time = str(cx, n["time"], where + ".time");
  if (n["cpus_per_task"]) o.cpus_per_task = positive_int(cx, n["cpus_per_task"], where + ".cpus_per_task");
  if (n["mem"]) o.mem = str(cx, n["mem"], where + ".mem");
  if (n["gres"]) o.gres = str(cx, n["gres"], where + ".gres");
  if (n["gpus"]) o.gpus = positive_int(cx, n["gpus"], where + ".gpus");
  if (const auto e = n["extra"]) {
    if (!e.IsSequence()) cx.fail(e, fmt::format("'{}.extra' must be a list of sbatch options", where));
    for (const auto& a : e) {
      const std::string v = str(cx, a, where + ".extra[]");
      if (v.empty() || v[0] != '-')
        cx.fail(a, fmt::format("'{}.extra' entry '{}' must be an sbatch option (starting with '-')", where, v));
      o.extra.push_back(v);
    }
  }
  for (const std::string& v : {o.partition, o.time, o.mem, o.gres})
    if (!v.empty() && v[0] == '-') cx.fail(n, fmt::format("'{}': '{}' is not a value", where, v));
  if (n["poll_s"]) {
    poll_s = num(cx, n["poll_s"], where + ".poll_s");
    if (!(poll_s > 0)) cx.fail(n["poll_s"], fmt::format("'{}.poll_s' must be positive", where));
  }
  return o;
}

void read_build_slurm(const Ctx& cx, const YAML::Node& n, ProviderSpec& p) {
  p.slurm = read_slurm(cx, n, "provider.build.slurm", p.slurm_poll_s, false);
}

ProviderSpec parse_provider(const Ctx& cx, const YAML::Node& n) {
  if (!n.IsMap()) cx.fail(n, "'provider' must be a mapping with one of build, prebuilt, in_tree");
  check_keys(cx, n, "provider", {"build", "prebuilt", "in_tree"});
  if (n.size() != 1) cx.fail(n, "'provider' must have exactly one of build, prebuilt, in_tree");
  ProviderSpec p;
  auto toolchain_spec = [&](const YAML::Node& parent, const std::string& where) {
    const YAML::Node t = parent["toolchain"];
    if (!t) cx.fail(parent, fmt::format("'{}' is missing field 'toolchain' (a toolchain spec that may use {{out}})", where));
    if (!t.IsMap()) cx.fail(t, fmt::format("'{}.toolchain' must be a toolchain mapping (name, backend, kind, compiler, flags, ...)", where));
    p.toolchain_yaml = emit(t);
    p.toolchain_origin = cx.at(t);
  };
  if (const auto b = n["build"]) {
    p.kind = ProviderSpec::Kind::build;
    if (!b.IsMap()) cx.fail(b, "'provider.build' must be a mapping with command, toolchain, timeout_s, slurm, store");
    check_keys(cx, b, "provider.build", {"command", "toolchain", "timeout_s", "slurm", "store"});
    if (b["store"]) {
      const std::string st = str(cx, b["store"], "provider.build.store");
      if (st.empty()) cx.fail(b["store"], "'provider.build.store' is empty");
      // Relative to the config file, as repo is.
      p.store = fs::absolute(fs::path(cx.origin).parent_path() / st).lexically_normal().string();
    }
    if (!b["command"]) cx.fail(b, "'provider.build' is missing field 'command'");
    p.command = str(cx, b["command"], "provider.build.command");
    if (p.command.empty()) cx.fail(b["command"], "'provider.build.command' is empty");
    if (b["timeout_s"]) {
      p.timeout_s = num(cx, b["timeout_s"], "provider.build.timeout_s");
      if (!(p.timeout_s > 0)) cx.fail(b["timeout_s"], "'provider.build.timeout_s' must be positive");
    }
    toolchain_spec(b, "provider.build");
    if (const auto sl = b["slurm"]) read_build_slurm(cx, sl, p);
  } else if (const auto pb = n["prebuilt"]) {
    p.kind = ProviderSpec::Kind::prebuilt;
    if (pb.IsScalar()) {
      p.path = pb.Scalar();
    } else if (pb.IsMap()) {
      check_keys(cx, pb, "provider.prebuilt", {"path", "toolchain", "name"});
      if (!pb["path"]) cx.fail(pb, "'provider.prebuilt' is missing field 'path'");
      p.path = str(cx, pb["path"], "provider.prebuilt.path");
      if (pb["name"]) p.name = str(cx, pb["name"], "provider.prebuilt.name");
      if (pb["toolchain"]) toolchain_spec(pb, "provider.prebuilt");
    } else {
      cx.fail(pb, "'provider.prebuilt' must be a path pattern with {sha} or {path, toolchain}");
    }
    if (p.path.find("{sha}") == std::string::npos)
      cx.fail(pb, fmt::format("'provider.prebuilt' path '{}' must contain {{sha}}", p.path));
    const bool is_yaml = p.path.ends_with(".yaml") || p.path.ends_with(".yml");
    if (!is_yaml && p.toolchain_yaml.empty())
      cx.fail(pb, "'provider.prebuilt': a path that is not a .yaml toolchain file needs 'toolchain' (a spec using {out})");
  } else {
    const auto it = n["in_tree"];
    p.kind = ProviderSpec::Kind::in_tree;
    if (it.IsScalar()) {
      p.path = it.Scalar();
    } else if (it.IsMap()) {
      check_keys(cx, it, "provider.in_tree", {"path", "name"});
      if (!it["path"]) cx.fail(it, "'provider.in_tree' is missing field 'path'");
      p.path = str(cx, it["path"], "provider.in_tree.path");
      if (it["name"]) p.name = str(cx, it["name"], "provider.in_tree.name");
    } else {
      cx.fail(it, "'provider.in_tree' must be the path of a toolchain YAML inside the repository");
    }
    if (p.path.empty() || p.path[0] == '/') cx.fail(it, fmt::format("'provider.in_tree' path '{}' must be relative to the repository root", p.path));
  }
  return p;
}

}  // namespace

std::string to_string(Metric m) {
  switch (m) {
    case Metric::time: return "time";
    case Metric::tflops: return "tflops";
    case Metric::registers: return "registers";
    case Metric::spills: return "spills";
    case Metric::stack: return "stack";
    case Metric::smem: return "smem";
    case Metric::code_bytes: return "code_bytes";
    case Metric::compile_time: return "compile_time";
    case Metric::max_error: return "max_error";
    case Metric::external: return "external";
    case Metric::column: return "static";
  }
  return "?";
}

bool is_timed(Metric m) {
  return m == Metric::time || m == Metric::tflops || m == Metric::compile_time || m == Metric::external;
}

bool is_integer(Metric m) {
  return m == Metric::registers || m == Metric::spills || m == Metric::stack || m == Metric::smem ||
         m == Metric::code_bytes || m == Metric::column;
}

std::string metric_label(Metric m, const std::string& column) {
  return m == Metric::column && !column.empty() ? column : to_string(m);
}

namespace {

// 'repo': an existing directory, relative to the config's folder.
std::string read_repo(const Ctx& cx, const YAML::Node& root, const std::string& base) {
  const YAML::Node r = root["repo"];
  if (!r) throw InputError(fmt::format("{}: missing field '{}'", cx.origin, "repo"));
  std::string repo = str(cx, r, "repo");
  if (repo.empty()) cx.fail(r, "'repo' is empty");
  fs::path p(repo);
  if (p.is_relative()) p = fs::path(base) / p;
  std::error_code ec;
  if (!fs::is_directory(p, ec)) cx.fail(r, fmt::format("'repo': directory '{}' does not exist", p.string()));
  return fs::weakly_canonical(p).string();
}

// The cases: a sweep file ('cases') or inline 'benchmarks' in the config itself.
void read_cases(const Ctx& cx, const YAML::Node& root, const std::string& text, const std::string& base, BisectConfig& c) {
  const std::string& origin = cx.origin;
  if (root["cases"] && root["benchmarks"])
    cx.fail(root["benchmarks"], "give either 'cases' (a sweep file) or inline 'benchmarks', not both");
  if (const auto cs = root["cases"]) {
    if (!cs.IsMap()) cx.fail(cs, "'cases' must be a mapping {sweep: FILE, filter: REGEX}");
    check_keys(cx, cs, "cases", {"sweep", "filter", "tier"});
    if (!cs["sweep"]) cx.fail(cs, "'cases' is missing field 'sweep'");
    fs::path sp(str(cx, cs["sweep"], "cases.sweep"));
    if (sp.is_relative()) sp = fs::path(base) / sp;
    if (!file_exists(sp.string())) cx.fail(cs["sweep"], fmt::format("'cases.sweep': file '{}' not found", sp.string()));
    c.sweep_origin = sp.string();
    c.sweep_text = read_file(c.sweep_origin);
    if (cs["filter"]) c.filter = str(cx, cs["filter"], "cases.filter");
    if (cs["tier"]) c.tier = str(cx, cs["tier"], "cases.tier");
  } else if (root["benchmarks"]) {
    c.sweep_origin = origin;
    c.sweep_text = keep_top_level(text, {"name", "benchmarks", "shape_sets", "user_kernels"});
  } else {
    throw InputError(fmt::format("{}: missing field 'cases' (a sweep file) or inline 'benchmarks'", origin));
  }
}

// 'threshold': a fraction (or percentage), or an absolute amount for integer and error metrics.
void read_threshold(const Ctx& cx, const YAML::Node& root, BisectConfig& c) {
  if (const auto t = root["threshold"]) {
    const std::string s = str(cx, t, "threshold");
    if (!s.empty() && s.back() != '%' && (is_integer(c.metric) || c.metric == Metric::max_error)) {
      c.threshold = num(cx, t, "threshold");
      c.threshold_absolute = true;
      if (!(c.threshold > 0)) cx.fail(t, fmt::format("'threshold' = '{}' must be positive", s));
    } else {
      try {
        c.threshold = parse_fraction(s, "threshold");
      } catch (const InputError& e) {
        cx.fail(t, e.what());
      }
      if (!(c.threshold > 0 && c.threshold < 10)) cx.fail(t, fmt::format("'threshold' = '{}' must be a positive fraction", s));
    }
  } else if (is_integer(c.metric)) {
    c.threshold = 1;  // any change of an integer metric
    c.threshold_absolute = true;
  }
}

void read_budgets(const Ctx& cx, const YAML::Node& b, Budgets& out) {
  if (!b.IsMap()) cx.fail(b, "'budgets' must be a mapping");
  check_keys(cx, b, "budgets", {"max_builds", "max_samples_per_step", "max_wall_s", "max_runs"});
  if (b["max_runs"]) out.max_runs = positive_int(cx, b["max_runs"], "budgets.max_runs");
  if (b["max_builds"]) out.max_builds = positive_int(cx, b["max_builds"], "budgets.max_builds");
  if (b["max_samples_per_step"])
    out.max_samples_per_step = positive_int(cx, b["max_samples_per_step"], "budgets.max_samples_per_step");
  if (b["max_wall_s"]) {
    out.max_wall_s = num(cx, b["max_wall_s"], "budgets.max_wall_s");
    if (!(out.max_wall_s > 0)) cx.fail(b["max_wall_s"], "'budgets.max_wall_s' must be positive");
  }
}

void read_measure(const Ctx& cx, const YAML::Node& m, MeasureSettings& s) {
  if (!m.IsMap()) cx.fail(m, "'measure' must be a mapping");
  check_keys(cx, m, "measure", {"mode", "warmup_s", "min_sample_s", "min_samples", "block_rounds", "placement", "alpha",
                                    "max_step_s", "seed", "sample_cost", "confidence", "run_cost", "slurm"});
  if (m["sample_cost"]) {
    s.sample_cost = str(cx, m["sample_cost"], "measure.sample_cost");
    if (s.sample_cost != "cheap" && s.sample_cost != "expensive")
      cx.fail(m["sample_cost"], fmt::format("'measure.sample_cost' = '{}' must be cheap or expensive", s.sample_cost));
  }
  if (m["confidence"]) {
    s.confidence = num(cx, m["confidence"], "measure.confidence");
    if (!(s.confidence >= 0.5 && s.confidence < 1)) cx.fail(m["confidence"], "'measure.confidence' must be in [0.5, 1)");
  }
  if (const auto rc = m["run_cost"]) {
    if (!rc.IsMap()) cx.fail(rc, "'measure.run_cost' must be a mapping {gpus, hours}");
    check_keys(cx, rc, "measure.run_cost", {"gpus", "hours"});
    if (rc["gpus"]) {
      s.run_gpus = num(cx, rc["gpus"], "measure.run_cost.gpus");
      if (!(s.run_gpus > 0)) cx.fail(rc["gpus"], "'measure.run_cost.gpus' must be positive");
    }
    if (rc["hours"]) {
      s.run_hours = num(cx, rc["hours"], "measure.run_cost.hours");
      if (!(s.run_hours > 0)) cx.fail(rc["hours"], "'measure.run_cost.hours' must be positive");
    }
  }
  if (m["slurm"]) s.slurm = read_slurm(cx, m["slurm"], "measure.slurm", s.slurm_poll_s, true);
  if (m["mode"]) {
    s.mode = str(cx, m["mode"], "measure.mode");
    if (*s.mode != "hot" && *s.mode != "cold") cx.fail(m["mode"], fmt::format("'measure.mode' = '{}' must be hot or cold", *s.mode));
  }
  if (m["warmup_s"]) s.warmup_s = num(cx, m["warmup_s"], "measure.warmup_s");
  if (m["min_sample_s"]) s.min_sample_s = num(cx, m["min_sample_s"], "measure.min_sample_s");
  if (m["min_samples"]) s.min_samples = positive_int(cx, m["min_samples"], "measure.min_samples");
  if (s.min_samples < 4) cx.fail(m["min_samples"], "'measure.min_samples' must be >= 4");
  if (m["block_rounds"]) {
    const double b = num(cx, m["block_rounds"], "measure.block_rounds");
    if (!(b == 0 || (b >= 2 && b <= 4096 && b == std::floor(b))))
      cx.fail(m["block_rounds"], fmt::format("'measure.block_rounds' = '{}' must be 0 (one load) or an integer in 2..4096",
                                             m["block_rounds"].Scalar()));
    s.block_rounds = int(b);
  }
  if (m["placement"]) {
    s.placement = str(cx, m["placement"], "measure.placement");
    if (s.placement != "loads" && s.placement != "process")
      cx.fail(m["placement"], fmt::format("'measure.placement' = '{}' must be loads or process", s.placement));
  }
  if (m["alpha"]) {
    s.alpha = num(cx, m["alpha"], "measure.alpha");
    if (!(s.alpha > 0 && s.alpha < 0.5)) cx.fail(m["alpha"], "'measure.alpha' must be in (0, 0.5)");
  }
  if (m["max_step_s"]) {
    s.max_step_s = num(cx, m["max_step_s"], "measure.max_step_s");
    if (!(s.max_step_s > 0)) cx.fail(m["max_step_s"], "'measure.max_step_s' must be positive");
  }
  if (m["seed"]) s.seed = uint64_t(num(cx, m["seed"], "measure.seed"));
}

void read_priors(const Ctx& cx, const YAML::Node& pr, std::vector<std::pair<std::string, double>>& out) {
  if (!pr.IsMap()) cx.fail(pr, "'priors' must be a mapping {path glob: weight}");
  for (auto it = pr.begin(); it != pr.end(); ++it) {
    const std::string glob = str(cx, it->first, "priors");
    if (glob.empty()) cx.fail(it->first, "'priors': empty path glob");
    const double w = num(cx, it->second, "priors." + glob);
    if (!(w > 0) || !std::isfinite(w)) cx.fail(it->second, fmt::format("'priors.{}' = '{}' must be a positive weight", glob, it->second.Scalar()));
    out.emplace_back(glob, w);
  }
}

}  // namespace

BisectConfig parse_bisect_config(const std::string& text, const std::string& origin) {
  Ctx cx{origin};
  const YAML::Node root = yaml_load(text, origin);
  if (!root.IsMap()) throw InputError(fmt::format("{}: a bisect config must be a mapping (repo, good, bad, provider, ...)", origin));
  check_keys(cx, root, "bisect config",
             {"name", "description", "repo", "good", "bad", "first_parent", "provider", "cases", "benchmarks", "user_kernels",
              "shape_sets", "metric", "threshold", "budgets", "measure", "descend", "priors", "parallel",
              "scheduler", "builders", "several_culprits", "report_improvements"});
  BisectConfig c;
  c.file = origin;
  c.text_hash = sha256_hex(text);
  const std::string base = fs::absolute(origin).parent_path().string();
  auto require = [&](const char* k) {
    if (!root[k]) throw InputError(fmt::format("{}: missing field '{}'", origin, k));
    return root[k];
  };
  c.name = root["name"] ? str(cx, root["name"], "name") : fs::path(origin).stem().string();
  c.repo = read_repo(cx, root, base);
  c.good = str(cx, require("good"), "good");
  c.bad = str(cx, require("bad"), "bad");
  if (c.good.empty()) cx.fail(root["good"], "'good' is empty");
  if (c.bad.empty()) cx.fail(root["bad"], "'bad' is empty");
  if (root["first_parent"]) c.first_parent = boolean(cx, root["first_parent"], "first_parent");
  c.provider = parse_provider(cx, require("provider"));

  read_cases(cx, root, text, base, c);

  c.metric = root["metric"] ? parse_metric(cx, root["metric"], c.metric_column) : Metric::time;
  if (c.metric == Metric::external)
    c.external = std::make_shared<const ExternalMetric>(parse_external_metric(cx, root["metric"]["external"], base));
  read_threshold(cx, root, c);

  if (const auto b = root["budgets"]) read_budgets(cx, b, c.budgets);
  if (const auto m = root["measure"]) read_measure(cx, m, c.measure);
  if (const auto pr = root["priors"]) read_priors(cx, pr, c.priors);
  if (root["parallel"]) {
    c.parallel = positive_int(cx, root["parallel"], "parallel");
    if (c.parallel > 64) cx.fail(root["parallel"], fmt::format("'parallel' = '{}' must be at most 64", c.parallel));
  }
  if (expensive_samples(c) && c.metric != Metric::external)
    cx.fail(root["measure"]["sample_cost"], fmt::format("'measure.sample_cost' = 'expensive' needs an external metric (metric "
                                                        "is {}; kernel timing keeps cheap samples: docs/bisect.md, \"L3\")",
                                                        to_string(c.metric)));
  if (c.measure.slurm && !expensive_samples(c))
    cx.fail(root["measure"]["slurm"], "'measure.slurm' runs each run of an expensive sample as a Slurm job: it needs "
                                      "measure.sample_cost: expensive (the default for an external metric)");
  if (c.provider.slurm || c.measure.slurm) c.scheduler = "slurm";
  if (root["scheduler"]) set_scheduler(c, str(cx, root["scheduler"], "scheduler"), cx.at(root["scheduler"]) + ": 'scheduler'");
  if (root["builders"]) {
    c.builders = positive_int(cx, root["builders"], "builders");
    set_builders(c, c.builders, cx.at(root["builders"]) + ": 'builders'");
  }
  if (root["several_culprits"]) c.several_culprits = boolean(cx, root["several_culprits"], "several_culprits");
  if (root["report_improvements"]) c.report_improvements = boolean(cx, root["report_improvements"], "report_improvements");
  if (root["descend"])
    c.descend = parse_descend(cx, root["descend"], base, [&](const YAML::Node& n) { return parse_provider(cx, n); });
  if (c.budgets.max_samples_per_step < c.measure.min_samples)
    throw InputError(fmt::format("{}: budgets.max_samples_per_step ({}) is below measure.min_samples ({})", origin,
                                 c.budgets.max_samples_per_step, c.measure.min_samples));
  return c;
}

void set_scheduler(BisectConfig& c, const std::string& scheduler, const std::string& where, bool override) {
  if (scheduler == "local" && override) {
    c.provider.slurm.reset();
    c.measure.slurm.reset();
    c.builders = 1;
  }
  if (scheduler == "local") {
    if (c.provider.slurm)
      throw InputError(fmt::format("{} = 'local', but provider.build.slurm asks for Slurm builds; remove one", where));
    if (c.measure.slurm)
      throw InputError(fmt::format("{} = 'local', but measure.slurm asks for runs as Slurm jobs; remove one", where));
    c.scheduler = scheduler;
    if (c.builders > 1)
      throw InputError(fmt::format("{} = 'local' with builders {}: building ahead needs scheduler slurm", where, c.builders));
    return;
  }
  if (scheduler != "slurm") throw InputError(fmt::format("{} = '{}' is not local or slurm", where, scheduler));
  if (c.provider.kind != ProviderSpec::Kind::build && !c.measure.slurm)
    throw InputError(fmt::format("{} = 'slurm' needs provider.build (the builds it submits as jobs) or measure.slurm "
                                 "(the runs)", where));
  // Builds as jobs with the cluster's default partition and limits unless provider.build.slurm says more.
  if (c.provider.kind == ProviderSpec::Kind::build && !c.provider.slurm) c.provider.slurm = slurm::SubmitOptions{};
  c.scheduler = scheduler;
}

void set_builders(BisectConfig& c, int builders, const std::string& where) {
  if (builders < 1 || builders > 64) throw InputError(fmt::format("{} = '{}' must be 1 to 64", where, builders));
  if (builders > 1 && c.scheduler != "slurm")
    throw InputError(fmt::format("{} = '{}' needs scheduler slurm (local builds share this node's cores: use 'parallel')",
                                 where, builders));
  c.builders = builders;
}

bool expensive_samples(const BisectConfig& c) {
  return c.measure.sample_cost == "expensive" || (c.measure.sample_cost.empty() && c.metric == Metric::external);
}

int block_rounds_of(const BisectConfig& c) {
  return c.metric == Metric::time || c.metric == Metric::tflops ? c.measure.block_rounds : 0;
}

BisectConfig load_bisect_config(const std::string& path) {
  if (!file_exists(path)) throw InputError(fmt::format("bisect config not found: {}", path));
  return parse_bisect_config(read_file(path), path);
}

}  // namespace kb::bisect
