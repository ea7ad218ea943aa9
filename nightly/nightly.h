// The nightly pipeline (`kbisect nightly CONFIG --scheduler slurm|local`):
//
//   plan    resolve tonight's compiler commit and toolchain (bisect/provider), write ROOT/<date>/plan.json
//   shards  `kbisect sweep SWEEP --shard I/N -o ROOT/<date>/shard-I` for I = 1..N: one `sbatch --array=0-(N-1)`
//           job (task T runs shard T+1), or local processes (at most --jobs at a time)
//   finish  `kbisect nightly-finish ROOT/<date>` (a Slurm job with --dependency=afterany on the array, or
//           in-process locally): merge the shards -> record in the history (SQLite) -> compare with the
//           previous nightly (harness/compare) -> change points over the last N nightlies per case ->
//           alerts -> auto-bisect (compiler commit of the last good and the first bad nightly) -> report
//           (ROOT/<date>/report.md, report.html, nightly.json)
//
// The config grammar (YAML; errors name file:line:col and the field; paths relative to the config file)
// is in docs/nightly.md, "Nightly pipeline"; examples/nightly-cpu.yaml runs here.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/slurm.h"
#include "core/text.h"
#include "stats/changepoint.h"

namespace kb::nightly {

struct CompilerSpec {
  std::string repo;           // absolute
  std::string ref = "HEAD";
  std::string provider_yaml;  // the provider node re-emitted (for the generated bisect configs)
};

struct BisectSpec {
  bool enabled = true;
  std::optional<std::string> threshold;  // as written ("2%"); default: compare threshold
  std::string scheduler = "inline";      // inline | slurm
  std::vector<std::pair<std::string, std::string>> passthrough;  // key -> emitted YAML (budgets, measure, parallel, descend)
};

struct NightlyConfig {
  std::string file, text;     // origin and text (kept in the plan; the finish step re-parses it)
  std::string name;
  std::string sweep;          // absolute
  std::string filter, tier;
  std::vector<std::string> toolchains;
  int shards = 1;
  std::string root, history;  // absolute
  int jobs = 1;
  double shard_timeout_s = 6 * 3600;
  double threshold = 0.02, alpha = 0.05;
  std::string threshold_text = "2%";
  int cp_last = 30;
  ChangePointConfig cp;
  slurm::SubmitOptions slurm;
  std::string slurm_finish_time;
  double slurm_poll_s = 5;
  std::optional<CompilerSpec> compiler;
  BisectSpec bisect;
};

// The `compiler:` section {repo, ref, provider} (presubmit's config reads it too): repo made absolute from
// `base`, the provider validated by the bisector's own parser. Throws InputError at the node.
CompilerSpec parse_compiler_spec(const YamlCtx& cx, const YAML::Node& n, const std::string& base);
// A bisect config holding only the compiler (repo + provider): parsed by the bisector's parser, it gives the
// ProviderSpec the Provider needs.
std::string provider_probe_text(const CompilerSpec& c);

NightlyConfig load_nightly_config(const std::string& path);
NightlyConfig parse_nightly_config(const std::string& text, const std::string& origin);

struct Plan {
  std::string name, date, run_dir, scheduler;
  std::string config_file, config_text;
  std::string sweep, filter, tier;
  std::vector<std::string> toolchains;  // --toolchain arguments of every shard
  int shards = 1;
  std::string history;
  std::string kbisect;                  // the binary the shards and the finish step run
  // Tonight's compiler (when the config has `compiler:`).
  std::string compiler_repo, compiler_ref, compiler_sha, compiler_subject, toolchain_file, toolchain_name;
  std::string created;

  std::string shard_dir(int i) const;   // 1-based: RUN/shard-I
  nlohmann::json to_json() const;
  static Plan from_json(const nlohmann::json& j, const std::string& origin);
};

using Log = std::function<void(const std::string&)>;

// "2026-12-02"-like: letters, digits, '.', '_', '-' (it names a directory). Throws InputError.
void check_date(const std::string& date);
std::string today_utc();

// Resolves the compiler (rev-parse of ref, toolchain via bisect/provider cached under ROOT/toolchains) and
// writes RUN/plan.json. Throws InputError/EnvError when the compiler cannot be provided.
Plan make_plan(const NightlyConfig& cfg, const std::string& date, const std::string& scheduler,
               const std::string& kbisect_binary, const Log& log = nullptr);
Plan load_plan(const std::string& run_dir);

// argv of shard i (1-based).
std::vector<std::string> shard_argv(const Plan& plan, int i);

// Local scheduler: runs the shards as processes, at most `jobs` at a time, each bounded by the config's
// shard_timeout_s; writes RUN/shards.json (exit status per shard). Never throws for a failed shard.
void run_shards_local(const NightlyConfig& cfg, const Plan& plan, int jobs, const Log& log = nullptr);

struct Submission {
  std::string array_job, finish_job;
};
// Slurm: writes RUN/slurm/shard.sh and finish.sh, submits the array and the dependent finish job;
// records the ids in RUN/slurm/jobs.json.
Submission submit_slurm(const NightlyConfig& cfg, const Plan& plan);

// How a finished nightly came out (the command maps it to its exit status).
enum class Outcome { quiet, alerts, incomplete };
std::string to_string(Outcome o);            // "quiet", "alerts", "incomplete"
Outcome parse_outcome(const std::string& s);  // throws InputError

struct FinishResult {
  Outcome outcome = Outcome::quiet;  // quiet: no new alert; alerts; incomplete: a shard missing or failed
  std::string summary;      // one line
  std::string report_md, report_html, nightly_json;
};
// The finish step over RUN (reads plan.json). Writes the report even for an incomplete nightly.
FinishResult finish(const std::string& run_dir, const Log& log = nullptr);

// Regex-escapes text (for the generated bisect configs' case filters).
std::string regex_escape(const std::string& s);

}  // namespace kb::nightly
