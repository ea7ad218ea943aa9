// One toolchain build as a Slurm job (provider.build.slurm): the build command runs as a batch script in
// the commit's worktree, with KBISECT_COMMIT, KBISECT_WORKTREE and KBISECT_OUT in its environment as for a
// local build, under the config's sbatch options (partition, time limit, cpus, memory, extra flags). The
// script and the job's output stay in WORKDIR/slurm/<sha>.{sh,out}; the script writes the command's exit
// status to <sha>.rc. The job is polled with squeue (no accounting database needed) and its end read with
// `scontrol show job`: a non-zero status is a failed build, a job Slurm killed at its time limit (TIMEOUT)
// a failed build that says so, a node failure (NODE_FAIL) is submitted once more (jobs go in with
// --no-requeue, so the retry is kbisect's, at once, not Slurm's requeue with its delay), and a job still queued
// or running after provider.build.timeout_s is cancelled (scancel) and counts as timed out.
// Resume: each build's job is named after the commit and the working directory (build_job_name), so a
// bisection resumed after kbisect died adopts its own job still queued or running instead of submitting
// it again, and takes the exit status a job that ended meanwhile left; a job that vanished is submitted
// again (once, as any job).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bisect/config.h"

namespace kb::bisect {

struct BuildJobResult {
  bool ok = false;
  std::string reason;  // why it failed, naming the job
  std::string log;     // the tail of the job's output
  double wall_s = 0;   // submit to end, queueing included
  std::string job_id, state;
  int attempts = 0;
  bool adopted = false;  // a job (or the exit status) a previous session left was taken
  bool cancelled = false;  // `cancel` turned true before the job ended: it was scancel'ed (state: what Slurm says)
};

// One batch script as a Slurm job, the part a build job and a run job (bisect/run_job.h) share. The job named
// `name` that a previous session left queued or running is adopted (waited for), as is the exit status its
// script left in STEM.rc when STEM.sh is there; otherwise write_script() writes STEM.sh and it is submitted
// with `sbatch_args` (plus --no-requeue). A node failure, or an adopted job that vanished without a status,
// is submitted once more. The job is cancelled (scancel) when `cancel` turns true (unless it ended first) or
// after timeout_s. Throws EnvError when Slurm's tools cannot run.
struct JobEnd {
  std::string job_id, state;  // the last job, and its JobState at the end ("" unknown)
  std::string rc;             // the exit status its script wrote ("" none)
  bool adopted = false, timed_out = false, cancelled = false;
  int attempts = 0;
  double wall_s = 0;          // submit (or adoption) to end, queueing included
};
JobEnd run_job(const std::vector<std::string>& sbatch_args, const std::string& name, const std::string& stem,
               double timeout_s, double poll_s, const std::atomic<bool>* cancel,
               const std::function<void()>& write_script);
// The exit status a job's script left in STEM.rc ("" when none).
std::string job_status(const std::string& stem);

// kbisect-build-<sha12>-<8 hex digits of the working directory's hash>.
std::string build_job_name(const std::string& sha, const std::string& workdir);

// True when a previous session left this build's job queued or running, or its exit status: the caller
// keeps the worktree (the job may be using it) and run_build_job adopts the job.
bool build_job_left(const std::string& sha, const std::string& workdir, const std::string& job_dir);

// The exit status a build job's script left in JOB_DIR/<sha>.rc ("0", "3", "143"), "" when it left none;
// and removing it (a cancelled job's, or a failure a later run must not adopt).
std::string build_job_status(const std::string& job_dir, const std::string& sha);
void forget_build_job_status(const std::string& job_dir, const std::string& sha);

// Throws EnvError when Slurm's tools cannot run (sbatch missing, or sbatch refusing the job). `cancel` (may
// be null): when it turns true while the job is queued or running, the job is scancel'ed and the result
// says cancelled (a job that ended first keeps its real result).
BuildJobResult run_build_job(const ProviderSpec& p, const std::string& sha, const std::string& worktree,
                             const std::string& out, const std::string& workdir, const std::string& job_dir,
                             const std::atomic<bool>* cancel = nullptr);

}  // namespace kb::bisect
