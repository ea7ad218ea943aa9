// Single runs of an expensive metric (measure.sample_cost: expensive; docs/bisect.md, "L3"): the runs a
// bisection has in flight (RunPool: each run on a thread of its own, up to `parallel` at once, collected in the
// order they end), and one run as a Slurm job (measure.slurm: the user's command as a batch script with the
// commit's toolchain in its environment, its output parsed when the job ends). A run job is named after the
// commit, the run's ordinal and the working directory, so a bisection resumed after kbisect died adopts the
// job still queued or running (or the status it left) instead of submitting it again.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bisect/oracle.h"
#include "bisect/slurm.h"
#include "harness/external.h"

namespace kb::bisect {

class RunPool {
 public:
  RunPool() = default;
  ~RunPool();  // cancels what is in flight and joins the threads
  RunPool(const RunPool&) = delete;
  RunPool& operator=(const RunPool&) = delete;
  // Runs `fn` on a thread of its own (it gets the pool's cancel flag); returns the run's ticket.
  int start(const std::string& sha, std::function<RunDone(const std::atomic<bool>& cancel)> fn);
  // The next run to end (its ticket and sha set); rethrows what a run threw. std::logic_error when none is
  // in flight.
  RunDone wait();
  // Asks the runs in flight to stop (those that can: a Slurm job is scancel'ed); wait() still returns each.
  void cancel();

 private:
  struct Done {
    RunDone run;
    std::exception_ptr error;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Done> done_;
  std::map<int, std::thread> threads_;  // by ticket; joined when its run is collected
  std::atomic<bool> cancel_{false};
  int next_ = 0, in_flight_ = 0;
};

// kbisect-run-<sha12>-<ordinal>-<8 hex digits of the working directory's hash>.
std::string run_job_name(const std::string& sha, int ordinal, const std::string& workdir);

// One run of `m` as a Slurm job with `o`: the script (JOB_DIR/<sha12>-<ordinal>.sh) cds into the metric's cwd
// and runs the command `c` with its environment; stdout and stderr go to .out and .err, the exit status to .rc.
// Returns the parsed value as the command printed it (not inverted) and the job's wall time, or `cancelled`.
// Throws Error naming the job for a failed or timed-out run (and EnvError when Slurm's tools cannot run).
RunDone run_external_job(const ExternalMetric& m, const ExternalCommand& c, const slurm::SubmitOptions& o, double poll_s,
                         const std::string& sha, int ordinal, const std::string& workdir, const std::string& job_dir,
                         const std::atomic<bool>* cancel);

}  // namespace kb::bisect
