// A thin driver for Slurm's command-line tools (sbatch, squeue, scontrol, scancel), argv only through the project's
// process runner. Batch scripts are files written into a run directory with every value single-quoted, so
// nothing the user wrote (paths, filters, dates) is ever read as shell syntax; sbatch never gets --wrap.
// Job state is polled with `squeue -h -j ID` (no accounting database needed; sacct is not used), and every
// wait is bounded by a timeout. While the controller cannot be reached (it died and is restarting) every
// command is tried again for up to kControllerGraceS. Set SLURM_CONF in the environment for clusters without
// DNS SRV records.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kb::slurm {

// How long a command waits for a controller that cannot be reached (down or restarting) before it fails:
// every call below tries again every 2 s until then.
inline constexpr double kControllerGraceS = 600;

// Options from a nightly config's `slurm:` section (or a bisect config's provider.build.slurm), turned into
// sbatch arguments.
struct SubmitOptions {
  std::string partition;               // --partition
  std::string gres;                    // --gres (e.g. "gpu:1")
  int gpus = 0;                        // --gpus (0: not given)
  std::string time;                    // --time (e.g. "02:00:00")
  int cpus_per_task = 0;               // --cpus-per-task (0: not given)
  std::string mem;                     // --mem (e.g. "64G")
  std::vector<std::string> extra;      // further sbatch arguments, passed as given (argv, no shell)
};

// The sbatch argv (without the script) for the options plus job name, output file pattern, array spec
// ("0-3", empty: not an array) and dependency ("afterany:123", empty: none).
std::vector<std::string> sbatch_argv(const SubmitOptions& o, const std::string& job_name, const std::string& output,
                                     const std::string& array, const std::string& dependency);

// Runs `sbatch --parsable ARGS SCRIPT` and returns the job id (the part before ';' of the parsable
// output). Throws EnvError when sbatch is missing, Error with sbatch's stderr when it refuses the job.
std::string submit(const std::vector<std::string>& sbatch_args, const std::string& script_path,
                   double timeout_s = 60);

// Jobs (and array tasks) still known to the controller: id -> state ("PENDING", "RUNNING", ...), from
// `squeue -h -j ID -o %i|%T`. An empty map means the job has left the queue (finished, failed or
// cancelled). Throws EnvError when squeue cannot run; an id the controller forgot counts as gone.
std::map<std::string, std::string> queued(const std::string& job_id, double timeout_s = 30);

// Ids of the jobs named `name` still known to the controller (`squeue -h -n NAME -o %i`), for adopting a
// job a killed run left behind. Throws EnvError when squeue cannot run.
std::vector<std::string> jobs_named(const std::string& name, double timeout_s = 30);

// Polls queued() every poll_s until every job in `job_ids` has left the queue, timeout_s passed, or `stop`
// (when given; looked at every 50 ms) returns true. Returns true when all left; false on timeout or stop
// (the jobs are left alone; the caller decides).
bool wait_gone(const std::vector<std::string>& job_ids, double timeout_s, double poll_s = 1.0,
               const std::function<bool()>& stop = nullptr);

// What `scontrol show job -o ID` says of a job: JobState (COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL,
// ...) and ExitCode ("2:0"). When the controller no longer knows the job (it forgets finished jobs after
// MinJobAge), the accounting database's record through `sacct -X -P -n -j ID -o State,ExitCode` where the
// cluster has one ("CANCELLED by 0" read as CANCELLED); both empty when neither knows it.
struct JobInfo {
  std::string state, exit_code;
};
JobInfo job_info(const std::string& job_id, double timeout_s = 30);

// `scancel ID` (best effort; returns false when scancel failed).
bool cancel(const std::string& job_id);

// POSIX shell single quoting: 'it'\''s'. For the batch scripts this module writes, never for a shell
// command built from user text elsewhere.
std::string sh_quote(const std::string& s);

// A batch script: "#!/bin/sh", `set -u`, environment lines (name=value, values quoted), then `body`
// (already quoted by the caller with sh_quote). Written atomically, mode 0755.
void write_script(const std::string& path, const std::map<std::string, std::string>& env, const std::string& body);

// A batch script (as write_script, no environment) whose body is `exec ARGV`, every word sh_quote'd.
void write_exec_script(const std::string& path, const std::vector<std::string>& argv);

// True when sbatch and squeue are in PATH.
bool available(std::string* reason = nullptr);

}  // namespace kb::slurm
