#include "nightly/nightly.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/toolchain.h"
#include "bisect/bisector.h"
#include "bisect/config.h"
#include "git/git.h"
#include "bisect/provider.h"
#include "bisect/report.h"
#include "harness/compare.h"
#include "core/error.h"
#include "report/html.h"
#include "core/fsutil.h"
#include "nightly/history.h"
#include "core/process.h"
#include "harness/results.h"
#include "harness/shard.h"
#include "harness/sweep.h"
#include "core/text.h"

namespace kb::nightly {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void say(const Log& log, const std::string& s) {
  if (log) log(s);
}

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

// A bisect config holding only the compiler (repo + provider): validates the provider with the bisector's
// own parser and gives the ProviderSpec the Provider needs.
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

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------- config

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
  c.name = root["name"] ? yaml_scalar(cx, root["name"], "name") : fs::path(origin).stem().string();
  if (c.name.empty()) cx.fail(root["name"], "'name' is empty");

  if (!root["sweep"]) throw InputError(fmt::format("{}: missing field 'sweep' (a sweep file)", origin));
  c.sweep = absolute_from(base, yaml_scalar(cx, root["sweep"], "sweep"));
  if (!file_exists(c.sweep)) cx.fail(root["sweep"], fmt::format("'sweep': file '{}' not found", c.sweep));
  if (root["filter"]) {
    c.filter = yaml_scalar(cx, root["filter"], "filter");
    try {
      std::regex re(c.filter);
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
  if (root["shards"]) c.shards = positive_int(cx, root["shards"], "shards");
  if (c.shards > 10000) cx.fail(root["shards"], "'shards' must be at most 10000");
  if (!root["output"]) throw InputError(fmt::format("{}: missing field 'output' (the nightly output root)", origin));
  c.root = absolute_from(base, yaml_scalar(cx, root["output"], "output"));
  c.history = root["history"] ? absolute_from(base, yaml_scalar(cx, root["history"], "history")) : c.root + "/history.sqlite";
  if (root["jobs"]) c.jobs = positive_int(cx, root["jobs"], "jobs");
  if (root["shard_timeout_s"]) {
    c.shard_timeout_s = yaml_number(cx, root["shard_timeout_s"], "shard_timeout_s");
    if (!(c.shard_timeout_s > 0)) cx.fail(root["shard_timeout_s"], "'shard_timeout_s' must be positive");
  }

  if (const auto cmp = root["compare"]) {
    if (!cmp.IsMap()) cx.fail(cmp, "'compare' must be a mapping {threshold, alpha}");
    check_yaml_keys(cx, cmp, "compare", {"threshold", "alpha"});
    if (cmp["threshold"]) {
      c.threshold = fraction(cx, cmp["threshold"], "compare.threshold");
      c.threshold_text = cmp["threshold"].Scalar();
      if (!(c.threshold > 0 && c.threshold < 10)) cx.fail(cmp["threshold"], "'compare.threshold' must be a positive fraction");
    }
    if (cmp["alpha"]) {
      c.alpha = yaml_number(cx, cmp["alpha"], "compare.alpha");
      if (!(c.alpha > 0 && c.alpha < 0.5)) cx.fail(cmp["alpha"], "'compare.alpha' must be in (0, 0.5)");
    }
  }
  if (const auto cp = root["changepoints"]) {
    if (!cp.IsMap()) cx.fail(cp, "'changepoints' must be a mapping");
    check_yaml_keys(cx, cp, "changepoints", {"last", "alpha", "min_segment", "permutations", "seed", "min_change"});
    if (cp["last"]) c.cp_last = positive_int(cx, cp["last"], "changepoints.last");
    if (cp["alpha"]) {
      c.cp.alpha = yaml_number(cx, cp["alpha"], "changepoints.alpha");
      if (!(c.cp.alpha > 0 && c.cp.alpha < 0.5)) cx.fail(cp["alpha"], "'changepoints.alpha' must be in (0, 0.5)");
    }
    if (cp["min_segment"]) c.cp.min_segment = positive_int(cx, cp["min_segment"], "changepoints.min_segment");
    if (cp["permutations"]) c.cp.permutations = positive_int(cx, cp["permutations"], "changepoints.permutations");
    if (cp["seed"]) c.cp.seed = uint64_t(positive_int(cx, cp["seed"], "changepoints.seed"));
    if (cp["min_change"]) c.cp.min_rel_change = fraction(cx, cp["min_change"], "changepoints.min_change");
  }
  if (const auto s = root["slurm"]) {
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
    if (s["poll_s"]) {
      c.slurm_poll_s = yaml_number(cx, s["poll_s"], "slurm.poll_s");
      if (!(c.slurm_poll_s > 0)) cx.fail(s["poll_s"], "'slurm.poll_s' must be positive");
    }
  }
  if (const auto cm = root["compiler"]) {
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
    try {
      bisect::parse_bisect_config(provider_probe_text(spec), origin);
    } catch (const InputError& e) {
      // The probe's own positions mean nothing to the user: point at the provider node instead.
      std::string msg = e.what();
      const std::string prefix = origin + ":";
      if (msg.rfind(prefix, 0) == 0) {
        auto p = msg.find(": ", prefix.size());
        if (p != std::string::npos) msg = msg.substr(p + 2);
      }
      cx.fail(cm["provider"], "compiler.provider: " + msg);
    }
    c.compiler = spec;
  }
  if (const auto b = root["bisect"]) {
    if (!b.IsMap()) cx.fail(b, "'bisect' must be a mapping {enabled, threshold, scheduler, budgets, measure, parallel}");
    check_yaml_keys(cx, b, "bisect", {"enabled", "threshold", "scheduler", "budgets", "measure", "parallel"});
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
    if (c.bisect.enabled && !c.compiler)
      cx.fail(b, "'bisect' needs a 'compiler' section (repo, ref, provider) to know what to bisect");
  }
  return c;
}

NightlyConfig load_nightly_config(const std::string& path) {
  if (!file_exists(path)) throw InputError(fmt::format("nightly config not found: {}", path));
  return parse_nightly_config(read_file(path), path);
}

// ------------------------------------------------------------------------------------------------ plan

void check_date(const std::string& date) {
  bool ok = !date.empty() && date.size() <= 64 && date[0] != '.' && date[0] != '-';
  for (char ch : date)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) ok = false;
  if (!ok) throw InputError(fmt::format("--date '{}' must be letters, digits, '.', '_' or '-' (it names a directory), e.g. 2026-12-02", date));
}

std::string today_utc() { return utc_time(std::time(nullptr), "%Y-%m-%d"); }

std::string Plan::shard_dir(int i) const { return fmt::format("{}/shard-{}", run_dir, i); }

json Plan::to_json() const {
  json j = {{"name", name},         {"date", date},           {"run_dir", run_dir},       {"scheduler", scheduler},
            {"config_file", config_file}, {"config_text", config_text}, {"sweep", sweep}, {"filter", filter},
            {"tier", tier},         {"toolchains", toolchains}, {"shards", shards},       {"history", history},
            {"kbisect", kbisect},   {"created", created}};
  if (!compiler_sha.empty())
    j["compiler"] = {{"repo", compiler_repo},         {"ref", compiler_ref},       {"sha", compiler_sha},
                     {"subject", compiler_subject},   {"toolchain_file", toolchain_file},
                     {"toolchain_name", toolchain_name}};
  return j;
}

Plan Plan::from_json(const json& j, const std::string& origin) {
  try {
    Plan p;
    p.name = j.at("name");
    p.date = j.at("date");
    p.run_dir = j.at("run_dir");
    p.scheduler = j.at("scheduler");
    p.config_file = j.at("config_file");
    p.config_text = j.at("config_text");
    p.sweep = j.at("sweep");
    p.filter = j.at("filter");
    p.tier = j.at("tier");
    p.toolchains = j.at("toolchains").get<std::vector<std::string>>();
    p.shards = j.at("shards");
    p.history = j.at("history");
    p.kbisect = j.at("kbisect");
    p.created = j.value("created", "");
    if (j.contains("compiler")) {
      const auto& c = j["compiler"];
      p.compiler_repo = c.at("repo");
      p.compiler_ref = c.at("ref");
      p.compiler_sha = c.at("sha");
      p.compiler_subject = c.value("subject", "");
      p.toolchain_file = c.at("toolchain_file");
      p.toolchain_name = c.at("toolchain_name");
    }
    return p;
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not a nightly plan ({})", origin, e.what()));
  }
}

Plan make_plan(const NightlyConfig& cfg, const std::string& date, const std::string& scheduler,
               const std::string& kbisect_binary, const Log& log) {
  check_date(date);
  Plan p;
  p.name = cfg.name;
  p.date = date;
  p.run_dir = cfg.root + "/" + date;
  p.scheduler = scheduler;
  p.config_file = fs::absolute(cfg.file).string();
  p.config_text = cfg.text;
  p.sweep = cfg.sweep;
  p.filter = cfg.filter;
  p.tier = cfg.tier;
  p.shards = cfg.shards;
  p.history = cfg.history;
  p.kbisect = kbisect_binary;
  p.created = now_iso8601();
  if (file_exists(p.run_dir + "/nightly.json"))
    throw InputError(fmt::format("{} already holds a finished nightly (nightly.json); choose another --date or remove the "
                                 "directory (re-run only the finish step with 'kbisect nightly-finish {}')",
                                 p.run_dir, p.run_dir));
  make_dirs(p.run_dir);
  // Leftovers of an attempt that died before its finish step must not be merged with tonight's shards.
  for (int i = 1; i <= p.shards; ++i)
    for (const std::string& f : {p.shard_dir(i) + "/results.json", p.shard_dir(i) + "/shard.json",
                                 fmt::format("{}/shard-{}.rc", p.run_dir, i), fmt::format("{}/shard-{}.log", p.run_dir, i)})
      if (fs::is_regular_file(f)) fs::remove(f);
  if (fs::is_regular_file(p.run_dir + "/shards.json")) fs::remove(p.run_dir + "/shards.json");
  if (cfg.compiler) {
    const CompilerSpec& c = *cfg.compiler;
    git::Repo repo(c.repo);
    p.compiler_repo = c.repo;
    p.compiler_ref = c.ref;
    p.compiler_sha = repo.resolve(c.ref, "compiler.ref");
    p.compiler_subject = repo.commit_info(p.compiler_sha).subject;
    say(log, fmt::format("compiler: {} {} ({})", p.compiler_sha.substr(0, 12), p.compiler_subject, c.ref));
    const bisect::BisectConfig probe = bisect::parse_bisect_config(provider_probe_text(c), cfg.file);
    bisect::Provider prov(probe, repo, cfg.root + "/toolchains");
    bisect::ToolchainAtCommit t = prov.get(p.compiler_sha);
    if (!t.ok)
      throw EnvError(fmt::format("tonight's compiler {} ({}): no toolchain: {}{}", p.compiler_sha.substr(0, 12), c.ref,
                                 t.reason, t.log_tail.empty() ? "" : "\n" + tail(t.log_tail, 1500)));
    if (t.built) say(log, fmt::format("compiler: built in {:.1f} s", t.build_s));
    p.toolchain_file = t.toolchain_file;
    auto tcs = load_toolchain_file(t.toolchain_file);
    if (tcs.size() != 1) throw InputError(fmt::format("{}: expected one toolchain", t.toolchain_file));
    p.toolchain_name = tcs[0].name;
    p.toolchains = {t.toolchain_file};
  } else {
    p.toolchains = cfg.toolchains;
  }
  write_file_atomic(p.run_dir + "/plan.json", p.to_json().dump(2) + "\n");
  return p;
}

Plan load_plan(const std::string& run_dir) {
  const std::string path = run_dir + "/plan.json";
  if (!file_exists(path)) throw InputError(fmt::format("{}: no plan.json (not a nightly run directory)", run_dir));
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  return Plan::from_json(j, path);
}

namespace {

// Shard argv with `idx` as the shard number text.
std::vector<std::string> shard_argv_text(const Plan& plan, const std::string& idx) {
  std::vector<std::string> a = {plan.kbisect, "sweep", plan.sweep,  "--shard", idx + "/" + std::to_string(plan.shards),
                                "-o",         plan.run_dir + "/shard-" + idx, "--format", "json"};
  if (!plan.filter.empty()) a.insert(a.end(), {"--filter", plan.filter});
  if (!plan.tier.empty()) a.insert(a.end(), {"--tier", plan.tier});
  for (const auto& t : plan.toolchains) a.insert(a.end(), {"--toolchain", t});
  return a;
}

}  // namespace

std::vector<std::string> shard_argv(const Plan& plan, int i) { return shard_argv_text(plan, std::to_string(i)); }

void run_shards_local(const NightlyConfig& cfg, const Plan& plan, int jobs, const Log& log) {
  const int n = plan.shards;
  std::vector<json> status(size_t(n), json::object());
  std::atomic<int> next{1};
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      const int i = next++;
      if (i > n) return;
      const auto argv = shard_argv(plan, i);
      {
        std::lock_guard<std::mutex> lk(mu);
        say(log, fmt::format("shard {}/{}: {}", i, n, argv_to_display(argv)));
      }
      RunOptions ro;
      ro.timeout_s = cfg.shard_timeout_s;
      json st = {{"shard", fmt::format("{}/{}", i, n)}};
      try {
        RunResult r = run_process(argv, ro);
        write_file_atomic(fmt::format("{}/shard-{}.log", plan.run_dir, i), r.out + r.err);
        st["exit_code"] = r.exit_code;
        st["status"] = r.status_text();
        st["ok"] = r.ok();
        st["wall_s"] = r.wall_s;
        if (!r.ok()) st["stderr_tail"] = tail(r.err, 1500);
      } catch (const Error& e) {
        st["ok"] = false;
        st["status"] = e.what();
      }
      std::lock_guard<std::mutex> lk(mu);
      say(log, fmt::format("shard {}/{}: {}", i, n, st["status"].get<std::string>()));
      status[size_t(i - 1)] = st;
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, std::min(jobs, n)); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  write_file_atomic(plan.run_dir + "/shards.json", json(status).dump(2) + "\n");
}

Submission submit_slurm(const NightlyConfig& cfg, const Plan& plan) {
  const std::string sdir = plan.run_dir + "/slurm";
  make_dirs(sdir);
  // Shard task: the array index (0-based) + 1 is the shard; its exit status lands in shard-I.rc.
  const std::string marker = "\x01";
  auto quote_with_index = [&](const std::string& word) {
    std::string out;
    size_t i = 0;
    for (;;) {
      size_t j = word.find(marker, i);
      const std::string part = word.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (!part.empty()) out += slurm::sh_quote(part);
      if (j == std::string::npos) break;
      out += "\"$I\"";
      i = j + marker.size();
    }
    return out.empty() ? std::string("''") : out;
  };
  std::string body = "I=$((SLURM_ARRAY_TASK_ID + 1))\n";
  std::string cmd;
  for (const auto& w : shard_argv_text(plan, marker)) cmd += (cmd.empty() ? "" : " ") + quote_with_index(w);
  body += cmd + "\nrc=$?\n";
  body += "printf '%s\\n' \"$rc\" > " + quote_with_index(plan.run_dir + "/shard-" + marker + ".rc") + "\n";
  body += "exit \"$rc\"\n";
  slurm::write_script(sdir + "/shard.sh", {}, body);

  const std::vector<std::string> fin = {plan.kbisect, "nightly-finish", plan.run_dir};
  std::string fbody;
  for (const auto& w : fin) fbody += (fbody.empty() ? "" : " ") + slurm::sh_quote(w);
  slurm::write_script(sdir + "/finish.sh", {}, "exec " + fbody + "\n");

  Submission s;
  s.array_job = slurm::submit(slurm::sbatch_argv(cfg.slurm, "kbisect-" + plan.name, sdir + "/shard-%a.out",
                                                 fmt::format("0-{}", plan.shards - 1), ""),
                              sdir + "/shard.sh");
  slurm::SubmitOptions fo = cfg.slurm;
  if (!cfg.slurm_finish_time.empty()) fo.time = cfg.slurm_finish_time;
  try {
    s.finish_job = slurm::submit(slurm::sbatch_argv(fo, "kbisect-" + plan.name + "-finish", sdir + "/finish.out", "",
                                                    "afterany:" + s.array_job),
                                 sdir + "/finish.sh");
  } catch (...) {
    slurm::cancel(s.array_job);  // no shards without the step that reads them
    throw;
  }
  write_file_atomic(sdir + "/jobs.json",
                    json{{"array_job", s.array_job}, {"finish_job", s.finish_job}, {"submitted", now_iso8601()}}.dump(2) + "\n");
  return s;
}

std::string regex_escape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : s) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}


// ---------------------------------------------------------------------------------------------- finish

namespace {

struct Alert {
  std::string case_id, match;  // match: regex of the case (kernel[params]/dtype/shape/) for the bisect filter
  std::vector<std::string> reasons;
  std::optional<CaseComparison> cmp;
  std::optional<ChangePoint> cp;
  RunRow good, bad;  // the nightlies on either side of the change
  bool has_range = false;
  bool known = false;  // the same change point was alerted by an earlier nightly
};

struct BisectRecord {
  std::string dir, config, good_sha, bad_sha, good_date, bad_date;
  std::vector<std::string> cases;
  std::string status;  // ran | submitted | skipped | error
  std::string note, final_line, job_id, report_html, report_md;
  json result;
};

struct Context {
  Plan plan;
  NightlyConfig cfg;
  bool complete = false;
  std::string merge_error;
  std::vector<std::string> shard_notes;
  std::optional<RunResults> merged;
  int64_t run_id = 0;
  std::optional<RunRow> prev;
  std::optional<Comparison> cmp;
  std::vector<RunRow> window;  // label's runs up to tonight (last cp_last)
  std::map<std::string, std::vector<SeriesPoint>> series;
  std::map<std::string, std::vector<ChangePoint>> cps;
  std::vector<std::string> notes;
  std::vector<Alert> alerts;  // new and known
  std::vector<BisectRecord> bisections;
  Outcome outcome = Outcome::quiet;
  std::string summary;
};

std::string case_match(const CaseResult& c) {
  return regex_escape(fmt::format("{}[{}]/{}/{}/", c.kernel, c.params.str(), to_string(c.dtype), c.shape.str()));
}

std::string shard_note(const Plan& plan, int i, const json& local_status) {
  std::string why;
  if (local_status.is_array() && size_t(i - 1) < local_status.size()) {
    const auto& st = local_status[size_t(i - 1)];
    why = st.value("status", "");
    if (st.contains("stderr_tail")) why += ": " + trim(tail(st["stderr_tail"].get<std::string>(), 300));
  }
  const std::string rc = fmt::format("{}/shard-{}.rc", plan.run_dir, i);
  if (why.empty() && file_exists(rc)) why = "exit " + trim(read_file(rc));
  const std::string out = fmt::format("{}/slurm/shard-{}.out", plan.run_dir, i - 1);
  if (file_exists(out)) {
    const std::string t = trim(tail(read_file(out), 300));
    if (!t.empty()) why += (why.empty() ? "" : "; ") + std::string("log: ") + t;
  }
  if (why.empty()) why = "never ran or was killed (no exit status recorded)";
  return fmt::format("shard {}/{} produced no results: {}", i, plan.shards, why);
}

std::string pct(double frac, int prec = 2) { return fmt::format("{:+.{}f}%", 100 * frac, prec); }

std::string fmt_ms(double s) { return format_seconds(s); }

// Inline SVG: the case's nightly medians with change points marked.
std::string trend_svg(const std::vector<SeriesPoint>& pts, const std::vector<ChangePoint>& cps, int64_t tonight) {
  const double W = 640, H = 220, L = 70, R = 20, T = 20, B = 40;
  std::vector<const SeriesPoint*> ok;
  for (const auto& p : pts)
    if (p.status == "ok" && p.median_s > 0) ok.push_back(&p);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">"
      "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>",
      W, H, W, H);
  if (ok.empty()) return svg + "<text x=\"10\" y=\"20\">no data</text></svg>";
  double lo = ok[0]->median_s, hi = lo;
  for (auto* p : ok) lo = std::min(lo, p->median_s), hi = std::max(hi, p->median_s);
  if (hi - lo < 1e-12 * hi) hi = lo * 1.01 + 1e-12, lo = lo * 0.99;
  const double pad = 0.08 * (hi - lo);
  lo -= pad, hi += pad;
  const size_t n = ok.size();
  auto x = [&](size_t i) { return n == 1 ? L + (W - L - R) / 2 : L + (W - L - R) * double(i) / double(n - 1); };
  auto y = [&](double v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); };
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>", L, H - B, W - R, H - B);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>", L, T, L, H - B);
  for (double v : {lo + pad, hi - pad})
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>", L - 4, y(v) + 4,
                       html_escape(format_seconds(v)));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", L, H - B + 16, html_escape(ok.front()->date));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>", W - R, H - B + 16,
                     html_escape(ok.back()->date));
  for (const auto& cp : cps) {
    size_t k = 0;
    while (k < n && ok[k]->run_id != cp.run_id) ++k;
    if (k == n || k == 0) continue;
    const double cx = (x(k - 1) + x(k)) / 2;
    const std::string color = cp.rel_change > 0 ? "#c0392b" : "#27ae60";
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"{}\" stroke-dasharray=\"4 3\"/>", cx, T,
                       cx, H - B, color);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" fill=\"{}\">change {} (p={:.3g})</text>", cx + 3, T + 10,
                       color, html_escape(pct(cp.rel_change, 1)), cp.p_value);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>",
                       x(0), y(cp.before), cx, y(cp.before), color);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>", cx,
                       y(cp.after), x(n - 1), y(cp.after), color);
  }
  std::string poly;
  for (size_t i = 0; i < n; ++i) poly += fmt::format("{:.1f},{:.1f} ", x(i), y(ok[i]->median_s));
  svg += "<polyline fill=\"none\" stroke=\"#2c3e50\" stroke-width=\"1.2\" points=\"" + poly + "\"/>";
  for (size_t i = 0; i < n; ++i) {
    const bool last = ok[i]->run_id == tonight;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} {}</title></circle>", x(i),
                       y(ok[i]->median_s), last ? 4 : 2.5, last ? "#c0392b" : "#2c3e50", html_escape(ok[i]->date),
                       html_escape(format_seconds(ok[i]->median_s)));
  }
  return svg + "</svg>";
}

std::string relpath(const std::string& path, const std::string& base) {
  return fs::path(path).lexically_relative(base).string();
}

json alert_json(const Alert& a) {
  json j = {{"case", a.case_id}, {"reasons", a.reasons}, {"known", a.known}};
  if (a.cmp)
    j["compare"] = {{"verdict", stats::to_string(a.cmp->decision.verdict)},
                    {"effect_pct", 100 * a.cmp->decision.effect_pct()},
                    {"ci_pct", {100 * a.cmp->decision.ci_lo_pct(), 100 * a.cmp->decision.ci_hi_pct()}}};
  if (a.cp)
    j["changepoint"] = {{"run_id", a.cp->run_id}, {"date", a.cp->date}, {"rel_change", a.cp->rel_change},
                        {"p_value", a.cp->p_value}, {"before_s", a.cp->before}, {"after_s", a.cp->after}};
  if (a.has_range) {
    j["good"] = {{"run_id", a.good.id}, {"date", a.good.date}, {"compiler_commits", a.good.compiler_commits}};
    j["bad"] = {{"run_id", a.bad.id}, {"date", a.bad.date}, {"compiler_commits", a.bad.compiler_commits}};
  }
  return j;
}

std::string verdict_cell(const CaseComparison& cc) {
  if (!cc.compared) return "not compared: " + cc.reason;
  return stats::to_string(cc.decision.verdict);
}

void render(Context& cx, FinishResult& fr) {
  const Plan& p = cx.plan;
  std::vector<const Alert*> fresh, known;
  for (const auto& a : cx.alerts) (a.known ? known : fresh).push_back(&a);

  // ---- JSON
  json j = {{"name", p.name}, {"date", p.date}, {"complete", cx.complete}, {"outcome", to_string(cx.outcome)},
            {"summary", cx.summary}, {"history", p.history}, {"run_id", cx.run_id}, {"notes", cx.notes},
            {"shard_problems", cx.shard_notes}};
  if (!cx.merge_error.empty()) j["merge_error"] = cx.merge_error;
  if (!p.compiler_sha.empty()) j["compiler"] = {{"sha", p.compiler_sha}, {"subject", p.compiler_subject}, {"toolchain", p.toolchain_name}};
  if (cx.prev) j["previous"] = {{"run_id", cx.prev->id}, {"date", cx.prev->date}};
  if (cx.cmp) j["compare"] = comparison_to_json(*cx.cmp);
  j["alerts"] = json::array();
  for (const auto& a : cx.alerts) j["alerts"].push_back(alert_json(a));
  j["bisections"] = json::array();
  for (const auto& b : cx.bisections)
    j["bisections"].push_back({{"dir", b.dir}, {"config", b.config}, {"good", b.good_sha}, {"bad", b.bad_sha},
                               {"good_date", b.good_date}, {"bad_date", b.bad_date}, {"cases", b.cases},
                               {"status", b.status}, {"note", b.note}, {"final_line", b.final_line},
                               {"job_id", b.job_id}, {"result", b.result}});

  // ---- Markdown
  std::string md = fmt::format("# kbisect nightly: {} — {}\n\n**{}**\n\n", md_escape(p.name), md_escape(p.date), md_escape(cx.summary));
  if (!p.compiler_sha.empty())
    md += fmt::format("Compiler: `{}` {} ({} {})\n\n", p.compiler_sha.substr(0, 12), md_escape(p.compiler_subject),
                      md_escape(p.toolchain_name), md_escape(p.compiler_ref));
  md += fmt::format("Scheduler: {}, {} shard(s); history: `{}`", p.scheduler, p.shards, md_escape(p.history));
  md += cx.prev ? fmt::format("; previous nightly: {}\n\n", md_escape(cx.prev->date)) : "; first nightly of this name\n\n";
  if (!cx.complete) {
    md += "## Incomplete nightly\n\n";
    for (const auto& s : cx.shard_notes) md += "- " + md_escape(s) + "\n";
    md += "\nMerge: " + md_escape(cx.merge_error) + "\n\n";
  }
  for (const auto& n : cx.notes) md += "> " + md_escape(n) + "\n\n";
  md += "## Alerts\n\n";
  if (fresh.empty()) md += "None.\n\n";
  for (const auto* a : fresh) md += "- " + md_escape(a->case_id) + ": " + md_escape(fmt::format("{}", fmt::join(a->reasons, "; "))) + "\n";
  if (!known.empty()) {
    md += "\nStill regressed (alerted before, same change point):\n\n";
    for (const auto* a : known) md += "- " + md_escape(a->case_id) + ": " + md_escape(fmt::format("{}", fmt::join(a->reasons, "; "))) + "\n";
  }
  md += "\n";
  if (!cx.bisections.empty()) {
    md += "## Bisections\n\n";
    for (const auto& b : cx.bisections) {
      md += fmt::format("- {}..{} ({} → {}), {} case(s): **{}**", b.good_sha.substr(0, 12), b.bad_sha.substr(0, 12),
                        md_escape(b.good_date), md_escape(b.bad_date), b.cases.size(), md_escape(b.status));
      if (!b.final_line.empty()) md += " — " + md_escape(b.final_line);
      if (!b.note.empty()) md += " — " + md_escape(b.note);
      if (!b.report_md.empty()) md += fmt::format(" ([report]({}))", relpath(b.report_md, p.run_dir));
      md += "\n";
    }
    md += "\n";
  }
  if (cx.cmp) {
    md += fmt::format("## Verdicts vs {} (threshold {}, alpha {})\n\n", md_escape(cx.prev->date), md_escape(cx.cfg.threshold_text),
                      cx.cfg.alpha);
    md += "| case | last | tonight | effect | 95% CI | verdict |\n|---|---:|---:|---:|---|---|\n";
    for (const auto& cc : cx.cmp->cases) {
      if (cc.compared)
        md += fmt::format("| {} | {} | {} | {:+.2f}% | [{:+.2f}%, {:+.2f}%] | {} |\n", md_escape(cc.key), fmt_ms(cc.base_median_s),
                          fmt_ms(cc.new_median_s), 100 * cc.decision.effect_pct(), 100 * cc.decision.ci_lo_pct(),
                          100 * cc.decision.ci_hi_pct(), verdict_cell(cc));
      else
        md += fmt::format("| {} | | | | | {} |\n", md_escape(cc.key), md_escape(verdict_cell(cc)));
    }
    md += "\n";
  } else if (cx.merged) {
    md += "## Tonight\n\n| case | median | samples | status |\n|---|---:|---:|---|\n";
    for (const auto& c : cx.merged->cases)
      md += fmt::format("| {} | {} | {} | {} |\n", md_escape(c.id()), c.status == CaseStatus::ok ? fmt_ms(c.summary.median_s) : "",
                        c.summary.samples, md_escape(to_string(c.status) + (c.reason.empty() ? "" : ": " + c.reason)));
    md += "\n";
  }
  if (!cx.alerts.empty()) {
    md += "## Trends\n\nSee report.html for the plots. Change points (last " + std::to_string(cx.window.size()) + " nightlies):\n\n";
    for (const auto& a : cx.alerts) {
      md += "- " + md_escape(a.case_id) + ":";
      const auto it = cx.cps.find(a.case_id);
      if (it == cx.cps.end() || it->second.empty()) md += " none";
      else
        for (const auto& c : it->second) md += fmt::format(" {} {} (p={:.3g});", md_escape(c.date), pct(c.rel_change, 1), c.p_value);
      md += "\n";
    }
  }

  // ---- HTML
  std::string h = report::page_begin("kbisect nightly " + p.name + " " + p.date,
                                     ".worse{background:#fdecea}.better{background:#eafaf1}.unsure{background:#fef9e7}"
                                     ".alert{color:#c0392b}");
  h += "<h1>kbisect nightly: " + html_escape(p.name) + " — " + html_escape(p.date) + "</h1>";
  h += "<p><b>" + html_escape(cx.summary) + "</b></p>";
  if (!p.compiler_sha.empty())
    h += "<p>Compiler: <code>" + html_escape(p.compiler_sha.substr(0, 12)) + "</code> " + html_escape(p.compiler_subject) + " (" +
         html_escape(p.toolchain_name) + ")</p>";
  h += fmt::format("<p>Scheduler: {}, {} shard(s). {}</p>", html_escape(p.scheduler), p.shards,
                   cx.prev ? "Previous nightly: " + html_escape(cx.prev->date) : std::string("First nightly of this name."));
  if (!cx.complete) {
    h += "<h2 class=\"alert\">Incomplete nightly</h2><ul>";
    for (const auto& s : cx.shard_notes) h += "<li>" + html_escape(s) + "</li>";
    h += "</ul><pre>" + html_escape(cx.merge_error) + "</pre>";
  }
  for (const auto& n : cx.notes) h += "<p><i>" + html_escape(n) + "</i></p>";
  h += "<h2>Alerts</h2>";
  if (fresh.empty()) h += "<p>None.</p>";
  else {
    h += "<ul>";
    for (const auto* a : fresh)
      h += "<li class=\"alert\"><code>" + html_escape(a->case_id) + "</code>: " + html_escape(fmt::format("{}", fmt::join(a->reasons, "; "))) + "</li>";
    h += "</ul>";
  }
  if (!known.empty()) {
    h += "<p>Still regressed (alerted before, same change point):</p><ul>";
    for (const auto* a : known)
      h += "<li><code>" + html_escape(a->case_id) + "</code>: " + html_escape(fmt::format("{}", fmt::join(a->reasons, "; "))) + "</li>";
    h += "</ul>";
  }
  if (!cx.bisections.empty()) {
    h += "<h2>Bisections</h2><ul>";
    for (const auto& b : cx.bisections) {
      h += fmt::format("<li><code>{}</code>..<code>{}</code> ({} → {}), {} case(s): <b>{}</b>", html_escape(b.good_sha.substr(0, 12)),
                       html_escape(b.bad_sha.substr(0, 12)), html_escape(b.good_date), html_escape(b.bad_date), b.cases.size(),
                       html_escape(b.status));
      if (!b.final_line.empty()) h += " — " + html_escape(b.final_line);
      if (!b.note.empty()) h += " — " + html_escape(b.note);
      if (!b.report_html.empty()) h += " (<a href=\"" + html_escape(relpath(b.report_html, p.run_dir)) + "\">report</a>)";
      h += "</li>";
    }
    h += "</ul>";
  }
  if (!cx.alerts.empty()) {
    h += "<h2>Trends of alerted cases</h2>";
    for (const auto& a : cx.alerts) {
      h += "<h3><code>" + html_escape(a.case_id) + "</code></h3>";
      const auto s = cx.series.find(a.case_id);
      const auto c = cx.cps.find(a.case_id);
      h += trend_svg(s == cx.series.end() ? std::vector<SeriesPoint>{} : s->second,
                     c == cx.cps.end() ? std::vector<ChangePoint>{} : c->second, cx.run_id);
    }
  }
  if (cx.cmp) {
    h += "<h2>Verdicts vs " + html_escape(cx.prev->date) + "</h2><table><tr><th>case</th><th>last</th><th>tonight</th><th>effect</th>"
         "<th>95% CI</th><th>verdict</th></tr>";
    for (const auto& cc : cx.cmp->cases) {
      const std::string cls = cc.compared ? stats::to_string(cc.decision.verdict) : "";
      if (cc.compared)
        h += fmt::format("<tr class=\"{}\"><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:+.2f}%</td>"
                         "<td>[{:+.2f}%, {:+.2f}%]</td><td>{}</td></tr>",
                         cls, html_escape(cc.key), html_escape(fmt_ms(cc.base_median_s)), html_escape(fmt_ms(cc.new_median_s)),
                         100 * cc.decision.effect_pct(), 100 * cc.decision.ci_lo_pct(), 100 * cc.decision.ci_hi_pct(),
                         html_escape(verdict_cell(cc)));
      else
        h += "<tr><td><code>" + html_escape(cc.key) + "</code></td><td></td><td></td><td></td><td></td><td>" + html_escape(verdict_cell(cc)) + "</td></tr>";
    }
    h += "</table>";
  }
  h += report::page_end();

  fr.report_md = p.run_dir + "/report.md";
  fr.report_html = p.run_dir + "/report.html";
  fr.nightly_json = p.run_dir + "/nightly.json";
  write_file_atomic(fr.report_md, md);
  write_file_atomic(fr.report_html, h);
  write_file_atomic(fr.nightly_json, j.dump(2) + "\n");
}

std::string commit_of(const RunRow& r, const std::string& toolchain) {
  auto it = r.compiler_commits.find(toolchain);
  if (it != r.compiler_commits.end()) return it->second;
  return r.compiler_commits.size() == 1 ? r.compiler_commits.begin()->second : "";
}

void auto_bisect(Context& cx, const Log& log) {
  const Plan& p = cx.plan;
  const NightlyConfig& cfg = cx.cfg;
  // One bisection per (good, bad) compiler range, over every new alert with that range.
  std::map<std::pair<std::string, std::string>, std::vector<const Alert*>> groups;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> dates;
  for (const auto& a : cx.alerts) {
    if (a.known || !a.has_range) continue;
    const std::string g = commit_of(a.good, p.toolchain_name), b = commit_of(a.bad, p.toolchain_name);
    if (g.empty() || b.empty()) {
      cx.notes.push_back(fmt::format("{}: no compiler commit recorded for nightly {} or {}; not bisected", a.case_id, a.good.date, a.bad.date));
      continue;
    }
    if (g == b) {
      cx.notes.push_back(fmt::format("{}: the compiler did not change between nightlies {} and {} ({}); not a compiler "
                                     "regression, not bisected",
                                     a.case_id, a.good.date, a.bad.date, g.substr(0, 12)));
      continue;
    }
    groups[{g, b}].push_back(&a);
    dates[{g, b}] = {a.good.date, a.bad.date};
  }
  int k = 0;
  for (const auto& [range, alerts] : groups) {
    ++k;
    BisectRecord br;
    br.dir = fmt::format("{}/bisect/{}", p.run_dir, k);
    br.good_sha = range.first;
    br.bad_sha = range.second;
    br.good_date = dates[range].first;
    br.bad_date = dates[range].second;
    make_dirs(br.dir);
    std::string filter;
    for (const auto* a : alerts) {
      br.cases.push_back(a->case_id);
      filter += (filter.empty() ? "" : "|") + a->match;
    }
    YAML::Node root;
    root["name"] = fmt::format("{}-{}-{}", p.name, p.date, k);
    root["repo"] = p.compiler_repo;
    root["good"] = br.good_sha;
    root["bad"] = br.bad_sha;
    root["provider"] = YAML::Load(cfg.compiler->provider_yaml);
    YAML::Node cases;
    cases["sweep"] = p.sweep;
    cases["filter"] = "^(?:" + filter + ")";
    if (!p.tier.empty()) cases["tier"] = p.tier;
    root["cases"] = cases;
    root["metric"] = "time";
    root["threshold"] = cfg.bisect.threshold.value_or(cfg.threshold_text);
    for (const auto& [key, text] : cfg.bisect.passthrough) root[key] = YAML::Load(text);
    YAML::Emitter e;
    e << root;
    br.config = br.dir + "/bisect.yaml";
    write_file_atomic(br.config, std::string("# generated by kbisect nightly-finish\n") + e.c_str() + "\n");
    const std::string workdir = br.dir + "/work";
    say(log, fmt::format("auto-bisect {}..{} for {} case(s): {}", br.good_sha.substr(0, 12), br.bad_sha.substr(0, 12),
                         br.cases.size(), br.config));
    try {
      if (cfg.bisect.scheduler == "slurm") {
        std::string body;
        for (const auto& w : std::vector<std::string>{p.kbisect, "bisect", br.config, "--workdir", workdir})
          body += (body.empty() ? "" : " ") + slurm::sh_quote(w);
        slurm::write_script(br.dir + "/bisect.sh", {}, "exec " + body + "\n");
        br.job_id = slurm::submit(slurm::sbatch_argv(cfg.slurm, "kbisect-bisect-" + p.name, br.dir + "/bisect.out", "", ""),
                                  br.dir + "/bisect.sh");
        br.status = "submitted";
        br.note = "Slurm job " + br.job_id + "; report at " + relpath(workdir + "/report.html", p.run_dir);
        br.report_html = workdir + "/report.html";
        br.report_md = workdir + "/report.md";
      } else {
        const bisect::BisectConfig bc = bisect::load_bisect_config(br.config);
        bisect::BisectRun run = bisect::bisect(bc, workdir, false, log);
        br.status = "ran";
        br.final_line = bisect::final_line(run.outcome, run.commits);
        br.report_html = run.report_html;
        br.report_md = run.report_md;
        if (file_exists(run.result_json)) br.result = json::parse(read_file(run.result_json));
        const json spent = br.result.value("spent", json::object());
        br.note = fmt::format("{} build(s), {} step(s) visited, {} measured{}", spent.value("builds", run.outcome.builds),
                              spent.value("visited_steps", run.outcome.visited), spent.value("measured_steps", run.outcome.measured_steps),
                              spent.contains("rounds") ? fmt::format(", {} round(s)", spent["rounds"].dump()) : "");
      }
    } catch (const Error& ex) {
      br.status = "error";
      br.note = ex.what();
    }
    cx.bisections.push_back(std::move(br));
  }
}

}  // namespace

FinishResult finish(const std::string& run_dir_in, const Log& log) {
  const std::string run_dir = fs::weakly_canonical(fs::absolute(run_dir_in)).string();
  Context cx;
  cx.plan = load_plan(run_dir);
  cx.plan.run_dir = run_dir;
  cx.cfg = parse_nightly_config(cx.plan.config_text, cx.plan.config_file);
  const Plan& p = cx.plan;
  FinishResult fr;

  // Earlier result of this finish step (a re-run must not record the night twice).
  std::optional<json> earlier;
  if (file_exists(run_dir + "/nightly.json")) {
    try {
      earlier = json::parse(read_file(run_dir + "/nightly.json"));
    } catch (...) {
    }
  }

  // 1. Shards -> merge.
  json local_status;
  if (file_exists(run_dir + "/shards.json")) {
    try {
      local_status = json::parse(read_file(run_dir + "/shards.json"));
    } catch (...) {
    }
  }
  std::vector<RunResults> shards;
  std::vector<std::string> origins;
  for (int i = 1; i <= p.shards; ++i) {
    const std::string f = p.shard_dir(i) + "/results.json";
    if (!file_exists(f)) {
      cx.shard_notes.push_back(shard_note(p, i, local_status));
      continue;
    }
    try {
      shards.push_back(load_results(f));
      origins.push_back(f);
    } catch (const InputError& e) {
      cx.shard_notes.push_back(fmt::format("shard {}/{}: unreadable results: {}", i, p.shards, e.what()));
    }
  }
  if (shards.empty()) {
    cx.merge_error = fmt::format("no shard of {} produced results", p.shards);
  } else {
    try {
      cx.merged = merge_results(shards, origins);
    } catch (const InputError& e) {
      cx.merge_error = e.what();
    }
  }
  if (!cx.merged) {
    cx.outcome = Outcome::incomplete;
    cx.summary = fmt::format("incomplete nightly: {} of {} shard(s) missing or unusable; not recorded", cx.shard_notes.size(), p.shards);
    say(log, cx.summary);
    render(cx, fr);
    fr.outcome = cx.outcome;
    fr.summary = cx.summary;
    return fr;
  }
  cx.complete = true;
  save_results(*cx.merged, run_dir + "/merged/results.json");

  // 2. History.
  History hist(p.history);
  if (earlier && earlier->value("run_id", int64_t(0)) > 0 && hist.run(earlier->value("run_id", int64_t(0))))
    cx.run_id = earlier->value("run_id", int64_t(0));
  if (cx.run_id == 0) {
    RunMeta meta;
    meta.date = p.date;
    meta.label = p.name;
    if (!p.compiler_sha.empty()) meta.compiler_commits[p.toolchain_name] = p.compiler_sha;
    cx.run_id = hist.record(*cx.merged, meta);
  }
  say(log, fmt::format("recorded nightly {} as run {} in {}", p.date, cx.run_id, p.history));
  std::vector<RunRow> mine;
  for (const auto& r : hist.runs()) {
    if (r.label != p.name) continue;
    mine.push_back(r);
    if (r.id == cx.run_id) break;
  }
  if (mine.empty() || mine.back().id != cx.run_id) throw Error(fmt::format("{}: run {} not found after recording", p.history, cx.run_id));
  if (mine.size() >= 2) cx.prev = mine[mine.size() - 2];
  const size_t first = mine.size() > size_t(cx.cfg.cp_last) ? mine.size() - size_t(cx.cfg.cp_last) : 0;
  cx.window.assign(mine.begin() + long(first), mine.end());
  std::set<int64_t> window_ids;
  for (const auto& r : cx.window) window_ids.insert(r.id);

  // 3. Compare with the previous nightly.
  std::map<std::string, const CaseResult*> tonight;  // by id
  for (const auto& c : cx.merged->cases) tonight[c.id()] = &c;
  auto find_case = [&](const std::string& key) -> const CaseResult* {
    auto it = tonight.find(key);
    if (it != tonight.end()) return it->second;
    for (const auto& c : cx.merged->cases)
      if (c.key() == key || c.id() == key) return &c;
    return nullptr;
  };
  std::map<std::string, Alert> alerts;
  if (cx.prev) {
    std::optional<RunResults> base = hist.load_run(cx.prev->id);
    if (base) {
      CompareOptions co;
      co.threshold = cx.cfg.threshold;
      co.alpha = cx.cfg.alpha;
      cx.cmp = compare_sets(sample_set_from_results(*base, "nightly " + cx.prev->date),
                            sample_set_from_results(*cx.merged, "nightly " + p.date), co);
      finish_comparison(*cx.cmp);
      for (const auto& cc : cx.cmp->cases) {
        if (!cc.compared || cc.decision.verdict != stats::Verdict::worse) continue;
        const CaseResult* c = find_case(cc.key);
        if (!c) continue;
        Alert& a = alerts[c->id()];
        a.case_id = c->id();
        a.match = case_match(*c);
        a.cmp = cc;
        a.reasons.push_back(fmt::format("slower than {} by {:+.2f}% (95% CI [{:+.2f}%, {:+.2f}%]) beyond the {} threshold",
                                        cx.prev->date, 100 * cc.decision.effect_pct(), 100 * cc.decision.ci_lo_pct(),
                                        100 * cc.decision.ci_hi_pct(), cx.cfg.threshold_text));
        a.good = *cx.prev;
        a.bad = mine.back();
        a.has_range = true;
      }
    }
  }

  // 4. Change points over the window, per case of tonight.
  // (case, change-point run) of the previous nightly's change-point alerts: the same change seen again (its
  // estimated position may move by a night or two as nights are added) is not a new alert.
  std::set<std::pair<std::string, int64_t>> alerted_before;
  if (cx.prev) {
    const std::string prev_json = cx.cfg.root + "/" + cx.prev->date + "/nightly.json";
    if (file_exists(prev_json)) {
      try {
        json pj = json::parse(read_file(prev_json));
        for (const auto& a : pj.value("alerts", json::array()))
          if (a.contains("changepoint")) alerted_before.insert({a.value("case", ""), a["changepoint"].value("run_id", int64_t(0))});
      } catch (...) {
      }
    }
  }
  for (auto& [cid, pts] : hist.series_by_case(".*", 0)) {
    if (!tonight.count(cid)) continue;
    std::vector<SeriesPoint> kept;
    for (const auto& pt : pts)
      if (window_ids.count(pt.run_id)) kept.push_back(pt);
    cx.series[cid] = kept;
    try {
      cx.cps[cid] = detect_in_series(kept, cx.cfg.cp);
    } catch (const InputError& e) {
      cx.notes.push_back(fmt::format("{}: change points not computed: {}", cid, e.what()));
      continue;
    }
    const auto& cps = cx.cps[cid];
    if (cps.empty()) continue;
    const ChangePoint& last = cps.back();
    if (!(last.rel_change > 0) || last.rel_change < cx.cfg.cp.min_rel_change) continue;
    Alert& a = alerts[cid];
    a.case_id = cid;
    a.match = case_match(*tonight[cid]);
    a.cp = last;
    a.reasons.push_back(fmt::format("change point at nightly {}: {} (median {} -> {}, p={:.3g}, last {} nightlies)", last.date,
                                    pct(last.rel_change), format_seconds(last.before), format_seconds(last.after), last.p_value,
                                    cx.window.size()));
    if (!a.cmp) {
      std::map<int64_t, long> pos;
      for (size_t i = 0; i < mine.size(); ++i) pos[mine[i].id] = long(i);
      const long here = pos.count(last.run_id) ? pos[last.run_id] : -1;
      for (const auto& [c, rid] : alerted_before)
        if (c == cid && pos.count(rid) && here >= 0 && std::abs(pos[rid] - here) <= cx.cfg.cp.min_segment) a.known = true;
      // The range to bisect: from one nightly before the change point's "before" neighbour (its position is
      // an estimate) to tonight (the slow segment reaches tonight by construction).
      if (here >= 1) {
        a.good = mine[size_t(std::max(0L, here - 2))];
        a.bad = mine.back();
        a.has_range = true;
      }
    }
  }
  for (auto& [cid, a] : alerts) cx.alerts.push_back(std::move(a));
  const size_t n_new = size_t(std::count_if(cx.alerts.begin(), cx.alerts.end(), [](const Alert& a) { return !a.known; }));

  // 5. Auto-bisect.
  if (n_new > 0 && cx.cfg.compiler && cx.cfg.bisect.enabled) auto_bisect(cx, log);

  cx.outcome = n_new > 0 ? Outcome::alerts : Outcome::quiet;
  cx.summary = fmt::format("{} case(s), {} alert(s){}{}", cx.merged->cases.size(), n_new,
                           cx.alerts.size() > n_new ? fmt::format(" ({} still regressed from before)", cx.alerts.size() - n_new) : "",
                           cx.bisections.empty() ? "" : fmt::format(", {} bisection(s)", cx.bisections.size()));
  for (const auto& b : cx.bisections)
    if (!b.final_line.empty()) cx.summary += "; " + b.final_line;
  say(log, cx.summary);
  render(cx, fr);
  fr.outcome = cx.outcome;
  fr.summary = cx.summary;
  return fr;
}

std::string to_string(Outcome o) {
  switch (o) {
    case Outcome::quiet: return "quiet";
    case Outcome::alerts: return "alerts";
    case Outcome::incomplete: return "incomplete";
  }
  return "?";
}

Outcome parse_outcome(const std::string& s) {
  for (Outcome o : {Outcome::quiet, Outcome::alerts, Outcome::incomplete})
    if (to_string(o) == s) return o;
  throw InputError(fmt::format("nightly outcome '{}' is not quiet, alerts or incomplete", s));
}

}  // namespace kb::nightly
