#include "presubmit/config.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"
#include "harness/sweep.h"

namespace kb::presubmit {

namespace fs = std::filesystem;

namespace {

std::string absolute_from(const std::string& base, const std::string& p) {
  fs::path q(p);
  if (q.is_relative()) q = fs::path(base) / q;
  return fs::weakly_canonical(q).string();
}

double fraction(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  try {
    return parse_fraction(yaml_scalar(cx, n, field), field);
  } catch (const InputError& e) {
    cx.fail(n, e.what());
  }
}

int count(const YamlCtx& cx, const YAML::Node& n, const std::string& field, int lo, int hi) {
  const double v = yaml_number(cx, n, field);
  if (!(v >= lo && v <= hi && v == std::floor(v)))
    cx.fail(n, fmt::format("'{}' = '{}' must be an integer in {}..{}", field, n.Scalar(), lo, hi));
  return int(v);
}

double positive(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  const double v = yaml_number(cx, n, field);
  if (!(v > 0)) cx.fail(n, fmt::format("'{}' = '{}' must be positive", field, n.Scalar()));
  return v;
}

CaseSet parse_case_set(const YamlCtx& cx, const YAML::Node& n, const std::string& base, const std::string& field) {
  if (!n.IsMap()) cx.fail(n, fmt::format("'{}' must be a mapping {{sweep, tier, filter}}", field));
  check_yaml_keys(cx, n, field, {"sweep", "tier", "filter"});
  CaseSet s;
  if (!n["sweep"]) cx.fail(n, fmt::format("'{}' is missing field 'sweep' (a sweep file)", field));
  s.sweep = absolute_from(base, yaml_scalar(cx, n["sweep"], field + ".sweep"));
  if (!file_exists(s.sweep)) cx.fail(n["sweep"], fmt::format("'{}.sweep': file '{}' not found", field, s.sweep));
  if (n["tier"]) {
    s.tier = yaml_scalar(cx, n["tier"], field + ".tier");
    if (s.tier != "l1" && s.tier != "l2" && s.tier != "l3")
      cx.fail(n["tier"], fmt::format("'{}.tier' = '{}' must be l1, l2 or l3", field, s.tier));
  }
  if (n["filter"]) {
    s.filter = yaml_scalar(cx, n["filter"], field + ".filter");
    try {
      (void)checked_regex(s.filter);
    } catch (const std::regex_error& e) {
      cx.fail(n["filter"], fmt::format("'{}.filter' = '{}' is not a valid regex: {}", field, s.filter, e.what()));
    }
  }
  return s;
}

void parse_cases(const YamlCtx& cx, const YAML::Node& n, const std::string& base, PresubmitConfig& c) {
  if (n.IsSequence()) {
    if (n.size() == 0) cx.fail(n, "'cases' is an empty list");
    for (size_t i = 0; i < n.size(); ++i) c.cases.push_back(parse_case_set(cx, n[i], base, fmt::format("cases[{}]", i)));
  } else {
    c.cases.push_back(parse_case_set(cx, n, base, "cases"));
  }
}

void parse_budget(const YamlCtx& cx, const YAML::Node& n, PresubmitConfig& c) {
  if (!n.IsMap()) cx.fail(n, "'budget' must be a mapping {gpu_minutes, cpu_minutes}");
  check_yaml_keys(cx, n, "budget", {"gpu_minutes", "cpu_minutes"});
  if (n.size() == 0) cx.fail(n, "'budget' needs gpu_minutes or cpu_minutes");
  auto minutes = [&](const char* k) {
    const double v = yaml_number(cx, n[k], std::string("budget.") + k);
    if (!(v >= 0 && v < 1e6)) cx.fail(n[k], fmt::format("'budget.{}' = '{}' must be 0 or more minutes", k, n[k].Scalar()));
    return v * 60;
  };
  if (n["gpu_minutes"]) c.gpu_budget_s = minutes("gpu_minutes");
  if (n["cpu_minutes"]) c.cpu_budget_s = minutes("cpu_minutes");
}

GateRule parse_gate_rule(const YamlCtx& cx, const std::string& metric, const YAML::Node& v) {
  GateRule r;
  bool known = false;
  for (bisect::Metric m : {bisect::Metric::registers, bisect::Metric::spills, bisect::Metric::stack,
                           bisect::Metric::smem, bisect::Metric::code_bytes})
    if (bisect::to_string(m) == metric) {
      r.metric = m;
      known = true;
    }
  if (!known) cx.fail(v, fmt::format("'gate.{}': not a static metric (registers, spills, stack, smem, code_bytes)", metric));
  const std::string field = "gate." + metric;
  r.text = yaml_scalar(cx, v, field);
  if (r.text == "new") {
    r.kind = GateRule::Kind::new_nonzero;
  } else if (r.text == "any") {
    r.kind = GateRule::Kind::any_increase;
  } else if (!r.text.empty() && r.text.back() == '%') {
    r.kind = GateRule::Kind::relative;
    r.amount = fraction(cx, v, field);
    if (!(r.amount > 0)) cx.fail(v, fmt::format("'{}' = '{}' must be a positive percentage", field, r.text));
  } else {
    r.kind = GateRule::Kind::absolute;
    try {
      r.amount = positive(cx, v, field);
    } catch (const InputError&) {
      cx.fail(v, fmt::format("'{}' = '{}' must be new, any, a percentage (10%) or an amount (8)", field, r.text));
    }
  }
  return r;
}

void parse_gate(const YamlCtx& cx, const YAML::Node& n, PresubmitConfig& c) {
  if (!n.IsMap()) cx.fail(n, "'gate' must be a mapping {metric: new | any | N% | N}");
  for (auto it = n.begin(); it != n.end(); ++it)
    c.gate.push_back(parse_gate_rule(cx, yaml_scalar(cx, it->first, "gate"), it->second));
}

void parse_weights(const YamlCtx& cx, const YAML::Node& n, PresubmitConfig& c) {
  if (!n.IsMap()) cx.fail(n, "'weights' must be a mapping {case-key regex: weight}");
  for (auto it = n.begin(); it != n.end(); ++it) {
    Weight w;
    w.pattern = yaml_scalar(cx, it->first, "weights");
    if (w.pattern.empty()) cx.fail(it->first, "'weights': empty pattern");
    try {
      w.re = checked_regex(w.pattern);
    } catch (const std::regex_error& e) {
      cx.fail(it->first, fmt::format("'weights': '{}' is not a valid regex: {}", w.pattern, e.what()));
    }
    w.weight = positive(cx, it->second, "weights." + w.pattern);
    c.weights.push_back(std::move(w));
  }
}

void parse_history(const YamlCtx& cx, const YAML::Node& n, const std::string& base, PresubmitConfig& c) {
  if (n.IsScalar()) {
    c.history = absolute_from(base, yaml_scalar(cx, n, "history"));
    return;
  }
  if (!n.IsMap()) cx.fail(n, "'history' must be a path or a mapping {db, last, changepoints}");
  check_yaml_keys(cx, n, "history", {"db", "last", "changepoints"});
  if (!n["db"]) cx.fail(n, "'history' is missing field 'db' (the nightly's SQLite history)");
  c.history = absolute_from(base, yaml_scalar(cx, n["db"], "history.db"));
  if (n["last"]) c.history_last = count(cx, n["last"], "history.last", 2, 100000);
  if (const auto cp = n["changepoints"]) {
    if (!cp.IsMap()) cx.fail(cp, "'history.changepoints' must be a mapping {alpha, min_segment, permutations, seed}");
    check_yaml_keys(cx, cp, "history.changepoints", {"alpha", "min_segment", "permutations", "seed"});
    if (cp["alpha"]) {
      c.cp.alpha = yaml_number(cx, cp["alpha"], "history.changepoints.alpha");
      if (!(c.cp.alpha > 0 && c.cp.alpha < 0.5)) cx.fail(cp["alpha"], "'history.changepoints.alpha' must be in (0, 0.5)");
    }
    if (cp["min_segment"]) c.cp.min_segment = count(cx, cp["min_segment"], "history.changepoints.min_segment", 1, 1000);
    if (cp["permutations"]) c.cp.permutations = count(cx, cp["permutations"], "history.changepoints.permutations", 1, 100000);
    if (cp["seed"]) c.cp.seed = uint64_t(count(cx, cp["seed"], "history.changepoints.seed", 0, 1 << 30));
  }
}

void parse_measure(const YamlCtx& cx, const YAML::Node& n, MeasurePlan& m) {
  if (!n.IsMap()) cx.fail(n, "'measure' must be a mapping");
  check_yaml_keys(cx, n, "measure", {"block_pairs", "min_blocks", "max_blocks", "alpha", "placement", "seed",
                                     "pilot_blocks", "block_overhead_s", "placement_sd"});
  if (n["block_pairs"]) m.block_pairs = count(cx, n["block_pairs"], "measure.block_pairs", 2, 4096);
  if (n["min_blocks"]) m.min_blocks = count(cx, n["min_blocks"], "measure.min_blocks", 2, 100000);
  if (n["max_blocks"]) m.max_blocks = count(cx, n["max_blocks"], "measure.max_blocks", 2, 100000);
  if (m.max_blocks < m.min_blocks)
    cx.fail(n, fmt::format("'measure.max_blocks' ({}) is below 'measure.min_blocks' ({})", m.max_blocks, m.min_blocks));
  if (n["alpha"]) {
    m.alpha = yaml_number(cx, n["alpha"], "measure.alpha");
    if (!(m.alpha > 0 && m.alpha < 0.5)) cx.fail(n["alpha"], "'measure.alpha' must be in (0, 0.5)");
  }
  if (n["placement"]) {
    m.placement = yaml_scalar(cx, n["placement"], "measure.placement");
    if (m.placement != "process" && m.placement != "loads")
      cx.fail(n["placement"], fmt::format("'measure.placement' = '{}' must be process or loads", m.placement));
  }
  if (n["seed"]) m.seed = uint64_t(count(cx, n["seed"], "measure.seed", 0, 1 << 30));
  if (n["pilot_blocks"]) m.pilot_blocks = count(cx, n["pilot_blocks"], "measure.pilot_blocks", 2, 64);
  if (n["block_overhead_s"]) {
    m.block_overhead_s = yaml_number(cx, n["block_overhead_s"], "measure.block_overhead_s");
    if (!(m.block_overhead_s >= 0)) cx.fail(n["block_overhead_s"], "'measure.block_overhead_s' must be 0 or more");
  }
  if (n["placement_sd"]) m.placement_sd = fraction(cx, n["placement_sd"], "measure.placement_sd");
  if (!(m.placement_sd >= 0 && m.placement_sd < 1)) cx.fail(n["placement_sd"], "'measure.placement_sd' must be in [0, 1)");
}

}  // namespace

PresubmitConfig parse_presubmit_config(const std::string& text, const std::string& origin) {
  YamlCtx cx{origin};
  const YAML::Node root = yaml_load(text, origin);
  if (!root.IsMap())
    throw InputError(fmt::format("{}: a presubmit config must be a mapping (compiler, cases, budget, ...)", origin));
  check_yaml_keys(cx, root, "presubmit config",
                  {"name", "description", "compiler", "cases", "threshold", "budget", "gate", "weights", "history",
                   "measure"});
  PresubmitConfig c;
  c.file = origin;
  const std::string base = fs::absolute(origin).parent_path().string();
  c.name = root["name"] ? yaml_scalar(cx, root["name"], "name") : fs::path(origin).stem().string();
  if (const auto cm = root["compiler"]) {
    if (cm.IsMap()) check_yaml_keys(cx, cm, "compiler", {"repo", "provider"});
    c.compiler = nightly::parse_compiler_spec(cx, cm, base);
  }
  if (!root["cases"]) throw InputError(fmt::format("{}: missing field 'cases' (the sweeps to cover)", origin));
  parse_cases(cx, root["cases"], base, c);
  if (const auto t = root["threshold"]) {
    c.threshold = fraction(cx, t, "threshold");
    if (!(c.threshold > 0 && c.threshold < 10)) cx.fail(t, "'threshold' must be a positive fraction");
  }
  if (!root["budget"]) throw InputError(fmt::format("{}: missing field 'budget' (gpu_minutes or cpu_minutes)", origin));
  parse_budget(cx, root["budget"], c);
  if (const auto n = root["gate"]) parse_gate(cx, n, c);
  if (const auto n = root["weights"]) parse_weights(cx, n, c);
  if (const auto n = root["history"]) parse_history(cx, n, base, c);
  if (const auto n = root["measure"]) parse_measure(cx, n, c.measure);
  return c;
}

PresubmitConfig load_presubmit_config(const std::string& path) {
  if (!file_exists(path)) throw InputError(fmt::format("presubmit config not found: {}", path));
  return parse_presubmit_config(read_file(path), path);
}

bisect::BisectConfig provider_config(const PresubmitConfig& c) {
  if (!c.compiler) throw InputError(fmt::format("{}: --base/--change need a 'compiler' section (repo, provider)", c.file));
  return bisect::parse_bisect_config(nightly::provider_probe_text(*c.compiler), c.file);
}

double weight_of(const PresubmitConfig& c, const std::string& key) {
  double w = 0;
  for (const auto& x : c.weights)
    if (std::regex_search(key, x.re)) w = std::max(w, x.weight);
  return w > 0 ? w : 1;
}

}  // namespace kb::presubmit
