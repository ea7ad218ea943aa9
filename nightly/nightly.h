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
// Config (YAML; errors name file:line:col and the field; paths are relative to the config file):
//
//   name: cpu-nightly                    # history label (default: the file name)
//   sweep: ../sweeps/smoke.yaml
//   filter: "matmul_tiled"               # optional regex on case ids, as `kbisect sweep --filter`
//   tier: l2                             # optional
//   toolchains: [clang-19]               # optional override; ignored for cases when `compiler:` is given
//   shards: 4
//   output: nightly-out                  # ROOT
//   history: nightly-out/history.sqlite  # default ROOT/history.sqlite
//   jobs: 2                              # local scheduler: shards at a time (default 1)
//   shard_timeout_s: 21600               # per shard (local) and the bound of every wait
//   compare: {threshold: 2%, alpha: 0.05}
//   changepoints: {last: 30, alpha: 0.01, min_segment: 3, permutations: 999, seed: 1, min_change: 1%}
//   slurm: {partition: gpu, gres: "gpu:1", gpus: 1, time: "02:00:00", cpus_per_task: 8,
//           extra: ["--exclusive"], finish_time: "00:30:00", poll_s: 5}
//   compiler:                            # optional: how to get tonight's toolchain
//     repo: ../llvm-project
//     ref: main                          # default HEAD
//     provider: {in_tree: toolchains/kc.yaml}   # same grammar as a bisect config's provider
//   bisect:                              # optional: auto-bisect alerts (needs compiler:)
//     enabled: true
//     threshold: 2%                      # default: compare.threshold
//     scheduler: inline                  # inline (inside the finish step) | slurm (a job per bisection)
//     budgets: {max_builds: 30}          # passed to the generated bisect config as written
//     measure: {min_samples: 16}
//     parallel: 4                        # passed through when present
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/changepoint.h"
#include "nightly/slurm.h"

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
  std::vector<std::pair<std::string, std::string>> passthrough;  // key -> emitted YAML (budgets, measure, parallel)
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
