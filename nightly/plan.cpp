// Tonight's plan: the run directory, the compiler commit and toolchain, RUN/plan.json; the shards' argv.
#include <cctype>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "backends/toolchain.h"
#include "bisect/config.h"
#include "bisect/provider.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"
#include "git/git.h"
#include "harness/results.h"
#include "nightly/context.h"

namespace kb::nightly {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

namespace {

// A fresh RUN directory: refuses one that holds a finished nightly; removes what an attempt that died before
// its finish step left (it must not be merged with tonight's shards).
void prepare_run_dir(const Plan& p) {
  if (file_exists(p.run_dir + "/nightly.json"))
    throw InputError(fmt::format("{} already holds a finished nightly (nightly.json); choose another --date or remove the "
                                 "directory (re-run only the finish step with 'kbisect nightly-finish {}')",
                                 p.run_dir, p.run_dir));
  make_dirs(p.run_dir);
  for (int i = 1; i <= p.shards; ++i)
    for (const std::string& f : {p.shard_dir(i) + "/results.json", p.shard_dir(i) + "/shard.json",
                                 fmt::format("{}/shard-{}.rc", p.run_dir, i), fmt::format("{}/shard-{}.log", p.run_dir, i)})
      if (fs::is_regular_file(f)) fs::remove(f);
  if (fs::is_regular_file(p.run_dir + "/shards.json")) fs::remove(p.run_dir + "/shards.json");
}

// Tonight's compiler commit and its toolchain (built or fetched by bisect/provider under ROOT/toolchains).
void resolve_compiler(const NightlyConfig& cfg, Plan& p, const Log& log) {
  const CompilerSpec& c = *cfg.compiler;
  git::Repo repo(c.repo);
  p.compiler_repo = c.repo;
  p.compiler_ref = c.ref;
  p.compiler_sha = repo.resolve(c.ref, "compiler.ref");
  p.compiler_subject = repo.commit_info(p.compiler_sha).subject;
  say(log, fmt::format("compiler: {} {} ({})", git::short_sha(p.compiler_sha), p.compiler_subject, c.ref));
  const bisect::BisectConfig probe = bisect::parse_bisect_config(provider_probe_text(c), cfg.file);
  bisect::Provider prov(probe, repo, cfg.root + "/toolchains");
  bisect::ToolchainAtCommit t = prov.get(p.compiler_sha);
  if (!t.ok)
    throw EnvError(fmt::format("tonight's compiler {} ({}): no toolchain: {}{}", git::short_sha(p.compiler_sha), c.ref,
                               t.reason, t.log_tail.empty() ? "" : "\n" + tail(t.log_tail, 1500)));
  if (t.built) say(log, fmt::format("compiler: built in {:.1f} s", t.build_s));
  p.toolchain_file = t.toolchain_file;
  auto tcs = load_toolchain_file(t.toolchain_file);
  if (tcs.size() != 1) throw InputError(fmt::format("{}: expected one toolchain", t.toolchain_file));
  p.toolchain_name = tcs[0].name;
  p.toolchains = {t.toolchain_file};
}

}  // namespace

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
  prepare_run_dir(p);
  if (cfg.compiler)
    resolve_compiler(cfg, p, log);
  else
    p.toolchains = cfg.toolchains;
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

std::vector<std::string> sweep_shard_argv(const Plan& plan, const std::string& idx) {
  std::vector<std::string> a = {plan.kbisect, "sweep", plan.sweep,  "--shard", idx + "/" + std::to_string(plan.shards),
                                "-o",         plan.run_dir + "/shard-" + idx, "--format", "json"};
  if (!plan.filter.empty()) a.insert(a.end(), {"--filter", plan.filter});
  if (!plan.tier.empty()) a.insert(a.end(), {"--tier", plan.tier});
  for (const auto& t : plan.toolchains) a.insert(a.end(), {"--toolchain", t});
  return a;
}

std::vector<std::string> shard_argv(const Plan& plan, int i) { return sweep_shard_argv(plan, std::to_string(i)); }

}  // namespace kb::nightly
