// The bisect configuration (YAML, yaml-cpp). Errors name file:line:col and the field.
//
//   repo: ../llvm-project          # relative to this file
//   good: v19.1.0                  # any ref git resolves
//   bad: main
//   first_parent: true             # walk bad's first-parent line (default)
//   provider:                      # exactly one of build / prebuilt / in_tree
//     build:
//       command: ninja -C "$KBISECT_OUT" clang   # run as /bin/sh -c COMMAND in a worktree at the commit;
//                                                # KBISECT_COMMIT / KBISECT_WORKTREE / KBISECT_OUT are set
//       timeout_s: 3600
//       store: /shared/kbisect/builds/llvm   # optional: builds shared by every run naming it (by sha)
//       toolchain: {name: clang-at-commit, backend: cpu, kind: clang, compiler: "{out}/bin/clang++",
//                   flags: [-O3, -march=x86-64-v3]}
//     # prebuilt: {path: /builds/{sha}, toolchain: {... "{out}/bin/clang++" ...}}   ({out} = path at sha)
//     # prebuilt: /builds/{sha}/toolchain.yaml
//     # in_tree: toolchains/kernel-compiler.yaml       # or {path: ..., name: NAME}
//   cases: {sweep: sweeps/smoke.yaml, filter: "matmul_tiled.*f32"}   # or inline `benchmarks:` (+ shape_sets)
//   metric: time        # time | tflops | registers | spills | stack | smem | code_bytes | compile_time | max_error
//                       # or {external: {command: [...], parse: "regex (one group)", better: higher, repeat: 1}}
//                       # or {static: COLUMN}: any static metric column the backend reports (ws_p1_maxnreg,
//                       #   tma_loads, vgprs, ...: docs/triton.md), larger is worse
//   threshold: 0.5%     # relative; integer metrics also take an absolute count (threshold: 8)
//   budgets: {max_builds: 40, max_samples_per_step: 2048, max_wall_s: 7200}
//   priors: {"llvm/lib/Target/NVPTX/**": 5, "**/docs/**": 0.05}   # path glob -> prior weight (default 1)
//   parallel: 3              # commits probed and measured per round (default 1)
//   scheduler: slurm         # builds as Slurm jobs (local: on this node; default local, or slurm when
//                            # provider.build.slurm is given)
//   builders: 8              # scheduler slurm: builds in flight, speculating ahead (default 1)
//   several_culprits: true   # search both sides of an intermediate level (default true)
//   report_improvements: false  # also find commits that make the metric better (default false)
//   measure: {mode: hot, warmup_s: 0.05, min_sample_s: 0.0005, min_samples: 16, block_rounds: 4,
//             placement: process, alpha: 0.05, max_step_s: 60, seed: 1}
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bisect/slurm.h"

namespace kb {
struct ExternalMetric;  // harness/external.h
}

namespace kb::bisect {

enum class Metric { time, tflops, registers, spills, stack, smem, code_bytes, compile_time, max_error, external, column };
std::string to_string(Metric m);
// Timing metrics (time, tflops, compile_time) and external (tier l3: a user command's output, see
// harness/external.h) are sampled and decided statistically; the others are static (one value per binary).
bool is_timed(Metric m);
// Integer-valued static metrics accept an absolute threshold.
bool is_integer(Metric m);
// The metric's name in messages and reports: the column's own name for {static: COLUMN}.
std::string metric_label(Metric m, const std::string& column);

struct ProviderSpec {
  enum class Kind { build, prebuilt, in_tree };
  Kind kind = Kind::in_tree;
  std::string command;         // build: run with /bin/sh -c in a worktree at the commit
  double timeout_s = 3600;     // build: per commit
  std::string toolchain_yaml;  // build / prebuilt-dir: toolchain spec (YAML text), may use {out} {sha} {repo}
  std::string toolchain_origin;  // where that spec is in the config ("file:line:col")
  std::string path;            // prebuilt: pattern with {sha}; in_tree: path inside the repo
  std::string name;            // in_tree / prebuilt file: which toolchain when the file holds several
  // build: with provider.build.slurm, every build is a Slurm job (bisect/provider.cpp): sbatch of the
  // command in its worktree with these limits, its output kept in WORKDIR/slurm/.
  std::optional<slurm::SubmitOptions> slurm;
  double slurm_poll_s = 2;     // how often the job's state is polled
  // build: provider.build.store (absolute; "" none): builds shared by every bisection and nightly that
  // names the same store (bisect/provider.h).
  std::string store;
};

// `descend:` (bisect/descend.h): when the culprit moves a pin file, bisect the pinned dependency too.
//   descend: {pin_file: cmake/llvm-hash.txt, repo: ../llvm-project, provider: {build: ...} | {prebuilt: ...} | {in_tree: ...}}
struct DescendSpec {
  std::string pin_file;   // path in the outer repository holding the dependency's commit (first token)
  std::string repo;       // absolute
  ProviderSpec provider;  // the dependency's toolchain at a commit (same grammar as `provider`)
  std::string origin;     // "file:line:col" of the descend mapping
};

struct Budgets {
  int max_builds = 40;             // toolchain builds (cached ones are free)
  int max_samples_per_step = 2048; // rounds (samples of each executable) per measured step
  double max_wall_s = 0;           // 0 = no limit
  int max_runs = 200;              // expensive samples: runs of the metric in all (reproduce, search, verify)
};

struct MeasureSettings {
  // Overrides of the cases' own measure settings (empty = keep the sweep's).
  std::optional<std::string> mode;
  std::optional<double> warmup_s, min_sample_s;
  uint64_t seed = 1;
  int min_samples = 16;    // first look of the sequential decision (rounds)
  // time / tflops: rounds per block, every block with fresh loads of all executables (bisect/oracle.h);
  // 0 = one load per commit for the whole bisection (decisions on rounds; biased by placement). The same in a
  // worker as in this process: a worker's blocks of 4 rounds are now as quiet as this process's, and the
  // decisions need blocks, not rounds (docs/statistics.md, "Quiet worker blocks").
  int block_rounds = 4;
  // Where each block is measured (MeasureConfig::placement): "process" (a kbisect-worker per block of CPU
  // loads: every block samples the placement of everything, the process's own included) or "loads" (this
  // process, only the loads re-placed; its CIs leave out what the process fixes).
  std::string placement = "process";
  double alpha = 0.05;     // error rate of the sequential decisions, spread over their looks
  double max_step_s = 120; // wall time cap for one measured step
  // cheap: a sample costs little next to a build (kernel timing: blocks, sequential paired decisions);
  // expensive: one run is a training job (the default for external metrics): probabilistic bisection over
  // single runs (docs/bisect.md, "L3"). Empty: the metric's default.
  std::string sample_cost;
  double confidence = 0.999;  // expensive: the posterior probability at which a position is taken
  // expensive: what one run costs, for the reports' GPU-hours: GPUs it holds and hours it takes (0: the
  // measured wall time of each run).
  double run_gpus = 1, run_hours = 0;
  // expensive with scheduler slurm: every run a Slurm job with these sbatch options (bisect/run_job.h).
  std::optional<slurm::SubmitOptions> slurm;
  double slurm_poll_s = 2;
};

struct BisectConfig {
  std::string file;        // the config file ("" for text)
  std::string name;
  std::string repo;        // absolute
  std::string good, bad;   // refs as written
  bool first_parent = true;
  ProviderSpec provider;
  // Cases: a sweep text (a sweep file's contents, or the inline benchmarks of the config with other lines
  // blanked so that line numbers still point into the config file) and its origin for messages.
  std::string sweep_text, sweep_origin;
  std::string filter, tier;
  Metric metric = Metric::time;
  std::shared_ptr<const ExternalMetric> external;  // metric == external: the command and its parser
  std::string metric_column;  // metric == column: the static metric's name in an artifact's metrics
  double threshold = 0.005;   // relative fraction, or absolute count when threshold_absolute
  bool threshold_absolute = false;
  Budgets budgets;
  MeasureSettings measure;
  std::string text_hash;      // sha256 of the config text (journal compatibility check)
  std::vector<std::pair<std::string, double>> priors;  // path glob -> weight, in file order
  int parallel = 1;
  std::string scheduler = "local";  // local | slurm (provider.slurm set)
  int builders = 1;                 // builds in flight (> 1: speculation, scheduler slurm only)
  bool several_culprits = true;
  bool report_improvements = false;
  std::optional<DescendSpec> descend;  // set when the config has `descend:`
};

BisectConfig load_bisect_config(const std::string& path);
// `scheduler` (local | slurm) and `builders` from the config or the command line (`where` names the
// source in errors: "--scheduler"). slurm needs provider.build; builders > 1 needs slurm. In the config,
// local beside provider.build.slurm is a contradiction; on the command line (override) local drops the
// config's Slurm options and builders. Throws InputError.
void set_scheduler(BisectConfig& c, const std::string& scheduler, const std::string& where, bool override = false);
void set_builders(BisectConfig& c, int builders, const std::string& where);
// True when one sample is expensive (measure.sample_cost, by default expensive for an external metric).
bool expensive_samples(const BisectConfig& c);
// Rounds per block of this config's measurements: measure.block_rounds for the metrics that time loaded
// executables (time, tflops), 0 for the others (compile time and external metrics run fresh processes:
// their units are rounds).
int block_rounds_of(const BisectConfig& c);
BisectConfig parse_bisect_config(const std::string& text, const std::string& origin);

}  // namespace kb::bisect
