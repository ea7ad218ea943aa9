// The nightly config (YAML): parse_nightly_config and its sections.
#include <cmath>
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "bisect/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"
#include "harness/sweep.h"
#include "nightly/context.h"

namespace kb::nightly {

namespace fs = std::filesystem;

namespace {

int positive_int(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  const double v = yaml_number(cx, n, field);
  if (!(v >= 1 && v == std::floor(v) && v < 1e6)) cx.fail(n, fmt::format("'{}' = '{}' must be a positive integer", field, n.Scalar()));
  return int(v);
}

double fraction(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  const std::string s = yaml_scalar(cx, n, field);
  try {
    return parse_fraction(s, field);
  } catch (const InputError& e) {
    cx.fail(n, e.what());
  }
}

bool boolean(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  const std::string s = yaml_scalar(cx, n, field);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  cx.fail(n, fmt::format("'{}' = '{}' must be true or false", field, s));
}

// A number read from `n` that `ok` accepts; else fails with "'FIELD' " + `must`.
template <class Ok>
double checked_number(const YamlCtx& cx, const YAML::Node& n, const std::string& field, Ok ok, const char* must) {
  const double v = yaml_number(cx, n, field);
  if (!ok(v)) cx.fail(n, fmt::format("'{}' {}", field, must));
  return v;
}

std::vector<std::string> string_list(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  std::vector<std::string> v;
  if (n.IsScalar()) {
    v.push_back(n.Scalar());
    return v;
  }
  if (!n.IsSequence()) cx.fail(n, fmt::format("'{}' must be a list of strings", field));
  for (const auto& e : n) v.push_back(yaml_scalar(cx, e, field + "[]"));
  return v;
}

std::string emit_flow(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

std::string absolute_from(const std::string& base_dir, const std::string& p) {
  fs::path q(p);
  if (q.is_relative()) q = fs::path(base_dir) / q;
  return fs::weakly_canonical(q).string();
}

// name, sweep, filter, tier, toolchains.
void parse_cases(const YamlCtx& cx, const YAML::Node& root, const std::string& base, NightlyConfig& c) {
  const std::string& origin = cx.origin;
  c.name = root["name"] ? yaml_scalar(cx, root["name"], "name") : fs::path(origin).stem().string();
  if (c.name.empty()) cx.fail(root["name"], "'name' is empty");

  if (!root["sweep"]) throw InputError(fmt::format("{}: missing field 'sweep' (a sweep file)", origin));
  c.sweep = absolute_from(base, yaml_scalar(cx, root["sweep"], "sweep"));
  if (!file_exists(c.sweep)) cx.fail(root["sweep"], fmt::format("'sweep': file '{}' not found", c.sweep));
  if (root["filter"]) {
    c.filter = yaml_scalar(cx, root["filter"], "filter");
    try {
      (void)checked_regex(c.filter);
    } catch (const std::regex_error& e) {
      cx.fail(root["filter"], fmt::format("'filter' = '{}' is not a valid regex: {}", c.filter, e.what()));
    }
  }
  if (root["tier"]) {
    c.tier = yaml_scalar(cx, root["tier"], "tier");
    if (c.tier != "l1" && c.tier != "l2" && c.tier != "l3") cx.fail(root["tier"], fmt::format("'tier' = '{}' must be l1, l2 or l3", c.tier));
  }
  if (root["toolchains"]) {
    for (auto t : string_list(cx, root["toolchains"], "toolchains")) {
      // A toolchain file relative to the config; a preset name stays as it is.
      const bool looks_like_file = t.find('/') != std::string::npos || t.ends_with(".yaml") || t.ends_with(".yml");
      c.toolchains.push_back(looks_like_file ? absolute_from(base, t) : t);
    }
  }
}

// shards, output, history, jobs, shard_timeout_s.
void parse_layout(const YamlCtx& cx, const YAML::Node& root, const std::string& base, NightlyConfig& c) {
  if (root["shards"]) c.shards = positive_int(cx, root["shards"], "shards");
  if (c.shards > 10000) cx.fail(root["shards"], "'shards' must be at most 10000");
  if (!root["output"]) throw InputError(fmt::format("{}: missing field 'output' (the nightly output root)", cx.origin));
  c.root = absolute_from(base, yaml_scalar(cx, root["output"], "output"));
  c.history = root["history"] ? absolute_from(base, yaml_scalar(cx, root["history"], "history")) : c.root + "/history.sqlite";
  if (root["jobs"]) c.jobs = positive_int(cx, root["jobs"], "jobs");
  if (root["shard_timeout_s"])
    c.shard_timeout_s = checked_number(cx, root["shard_timeout_s"], "shard_timeout_s", [](double v) { return v > 0; },
                                       "must be positive");
}

void parse_compare(const YamlCtx& cx, const YAML::Node& cmp, NightlyConfig& c) {
  if (!cmp.IsMap()) cx.fail(cmp, "'compare' must be a mapping {threshold, alpha}");
  check_yaml_keys(cx, cmp, "compare", {"threshold", "alpha"});
  if (cmp["threshold"]) {
    c.threshold = fraction(cx, cmp["threshold"], "compare.threshold");
    c.threshold_text = cmp["threshold"].Scalar();
    if (!(c.threshold > 0 && c.threshold < 10)) cx.fail(cmp["threshold"], "'compare.threshold' must be a positive fraction");
  }
  if (cmp["alpha"])
    c.alpha = checked_number(cx, cmp["alpha"], "compare.alpha", [](double v) { return v > 0 && v < 0.5; }, "must be in (0, 0.5)");
}

void parse_changepoints(const YamlCtx& cx, const YAML::Node& cp, NightlyConfig& c) {
  if (!cp.IsMap()) cx.fail(cp, "'changepoints' must be a mapping");
  check_yaml_keys(cx, cp, "changepoints", {"last", "alpha", "min_segment", "permutations", "seed", "min_change"});
  if (cp["last"]) c.cp_last = positive_int(cx, cp["last"], "changepoints.last");
  if (cp["alpha"])
    c.cp.alpha = checked_number(cx, cp["alpha"], "changepoints.alpha", [](double v) { return v > 0 && v < 0.5; },
                                "must be in (0, 0.5)");
  if (cp["min_segment"]) c.cp.min_segment = positive_int(cx, cp["min_segment"], "changepoints.min_segment");
  if (cp["permutations"]) c.cp.permutations = positive_int(cx, cp["permutations"], "changepoints.permutations");
  if (cp["seed"]) c.cp.seed = uint64_t(positive_int(cx, cp["seed"], "changepoints.seed"));
  if (cp["min_change"]) c.cp.min_rel_change = fraction(cx, cp["min_change"], "changepoints.min_change");
}

void parse_slurm(const YamlCtx& cx, const YAML::Node& s, NightlyConfig& c) {
  if (!s.IsMap()) cx.fail(s, "'slurm' must be a mapping");
  check_yaml_keys(cx, s, "slurm", {"partition", "gres", "gpus", "time", "cpus_per_task", "extra", "finish_time", "poll_s"});
  if (s["partition"]) c.slurm.partition = yaml_scalar(cx, s["partition"], "slurm.partition");
  if (s["gres"]) c.slurm.gres = yaml_scalar(cx, s["gres"], "slurm.gres");
  if (s["gpus"]) c.slurm.gpus = positive_int(cx, s["gpus"], "slurm.gpus");
  if (s["time"]) c.slurm.time = yaml_scalar(cx, s["time"], "slurm.time");
  if (s["cpus_per_task"]) c.slurm.cpus_per_task = positive_int(cx, s["cpus_per_task"], "slurm.cpus_per_task");
  if (s["extra"]) {
    c.slurm.extra = string_list(cx, s["extra"], "slurm.extra");
    for (const auto& a : c.slurm.extra)
      if (a.empty() || a[0] != '-')
        cx.fail(s["extra"], fmt::format("'slurm.extra' entry '{}' must be an sbatch option (starting with '-')", a));
  }
  if (s["finish_time"]) c.slurm_finish_time = yaml_scalar(cx, s["finish_time"], "slurm.finish_time");
  if (s["poll_s"])
    c.slurm_poll_s = checked_number(cx, s["poll_s"], "slurm.poll_s", [](double v) { return v > 0; }, "must be positive");
}

// Parses `probe_text`, a bisect config made of this config's parts, with the bisector's parser. The probe's
// own positions mean nothing to the user: an error points at `node` and names `field` instead.
void probe(const YamlCtx& cx, const std::string& probe_text, const YAML::Node& node, const std::string& field) {
  try {
    bisect::parse_bisect_config(probe_text, cx.origin);
  } catch (const InputError& e) {
    std::string msg = e.what();
    const std::string prefix = cx.origin + ":";
    if (msg.rfind(prefix, 0) == 0) {
      auto p = msg.find(": ", prefix.size());
      if (p != std::string::npos) msg = msg.substr(p + 2);
    }
    cx.fail(node, field + ": " + msg);
  }
}

// bisect.descend: copied into the generated bisect configs with its repo made absolute (they live under
// ROOT/<date>/bisect/K/), validated by the bisector's own parser against the compiler's repository.
void parse_bisect_descend(const YamlCtx& cx, const YAML::Node& d, const std::string& base, NightlyConfig& c) {
  if (!d.IsMap()) cx.fail(d, "'bisect.descend' must be a mapping {pin_file, repo, provider}");
  YAML::Node copy = YAML::Clone(d);
  if (d["repo"]) copy["repo"] = absolute_from(base, yaml_scalar(cx, d["repo"], "bisect.descend.repo"));
  const std::string text = emit_flow(copy);
  if (c.compiler) probe(cx, provider_probe_text(*c.compiler) + "\ndescend: " + text + "\n", d, "bisect.descend");
  c.bisect.passthrough.emplace_back("descend", text);
}

void parse_bisect(const YamlCtx& cx, const YAML::Node& b, const std::string& base, NightlyConfig& c) {
  if (!b.IsMap())
    cx.fail(b, "'bisect' must be a mapping {enabled, threshold, scheduler, budgets, measure, parallel, descend}");
  check_yaml_keys(cx, b, "bisect", {"enabled", "threshold", "scheduler", "budgets", "measure", "parallel", "descend"});
  if (b["enabled"]) c.bisect.enabled = boolean(cx, b["enabled"], "bisect.enabled");
  if (b["threshold"]) {
    fraction(cx, b["threshold"], "bisect.threshold");
    c.bisect.threshold = b["threshold"].Scalar();
  }
  if (b["scheduler"]) {
    c.bisect.scheduler = yaml_scalar(cx, b["scheduler"], "bisect.scheduler");
    if (c.bisect.scheduler != "inline" && c.bisect.scheduler != "slurm")
      cx.fail(b["scheduler"], fmt::format("'bisect.scheduler' = '{}' must be inline or slurm", c.bisect.scheduler));
  }
  for (const char* k : {"budgets", "measure", "parallel"})
    if (b[k]) c.bisect.passthrough.emplace_back(k, emit_flow(b[k]));
  if (b["descend"]) parse_bisect_descend(cx, b["descend"], base, c);
  if (c.bisect.enabled && !c.compiler)
    cx.fail(b, "'bisect' needs a 'compiler' section (repo, ref, provider) to know what to bisect");
}

}  // namespace

std::string provider_probe_text(const CompilerSpec& c) {
  YAML::Node root;
  root["repo"] = c.repo;
  root["good"] = "HEAD";
  root["bad"] = "HEAD";
  root["provider"] = YAML::Load(c.provider_yaml);
  root["benchmarks"] = YAML::Load("[]");
  YAML::Emitter e;
  e << root;
  return e.c_str();
}

CompilerSpec parse_compiler_spec(const YamlCtx& cx, const YAML::Node& cm, const std::string& base) {
  if (!cm.IsMap()) cx.fail(cm, "'compiler' must be a mapping {repo, ref, provider}");
  check_yaml_keys(cx, cm, "compiler", {"repo", "ref", "provider"});
  CompilerSpec spec;
  if (!cm["repo"]) cx.fail(cm, "'compiler' is missing field 'repo'");
  spec.repo = absolute_from(base, yaml_scalar(cx, cm["repo"], "compiler.repo"));
  std::error_code ec;
  if (!fs::is_directory(spec.repo, ec)) cx.fail(cm["repo"], fmt::format("'compiler.repo': directory '{}' does not exist", spec.repo));
  if (cm["ref"]) spec.ref = yaml_scalar(cx, cm["ref"], "compiler.ref");
  if (spec.ref.empty() || spec.ref[0] == '-') cx.fail(cm["ref"], fmt::format("'compiler.ref' = '{}' is not a ref", spec.ref));
  if (!cm["provider"]) cx.fail(cm, "'compiler' is missing field 'provider' (build, prebuilt or in_tree)");
  spec.provider_yaml = emit_flow(cm["provider"]);
  probe(cx, provider_probe_text(spec), cm["provider"], "compiler.provider");
  return spec;
}

NightlyConfig parse_nightly_config(const std::string& text, const std::string& origin) {
  YamlCtx cx{origin};
  const YAML::Node root = yaml_load(text, origin);
  if (!root.IsMap()) throw InputError(fmt::format("{}: a nightly config must be a mapping (sweep, shards, output, ...)", origin));
  check_yaml_keys(cx, root, "nightly config",
                  {"name", "description", "sweep", "filter", "tier", "toolchains", "shards", "output", "history", "jobs",
                   "shard_timeout_s", "compare", "changepoints", "slurm", "compiler", "bisect"});
  NightlyConfig c;
  c.file = origin;
  c.text = text;
  const std::string base = fs::absolute(origin).parent_path().string();
  parse_cases(cx, root, base, c);
  parse_layout(cx, root, base, c);
  if (const auto n = root["compare"]) parse_compare(cx, n, c);
  if (const auto n = root["changepoints"]) parse_changepoints(cx, n, c);
  if (const auto n = root["slurm"]) parse_slurm(cx, n, c);
  if (const auto n = root["compiler"]) c.compiler = parse_compiler_spec(cx, n, base);
  if (const auto n = root["bisect"]) parse_bisect(cx, n, base, c);
  return c;
}

NightlyConfig load_nightly_config(const std::string& path) {
  if (!file_exists(path)) throw InputError(fmt::format("nightly config not found: {}", path));
  return parse_nightly_config(read_file(path), path);
}

}  // namespace kb::nightly
