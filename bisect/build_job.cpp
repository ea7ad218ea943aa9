#include "bisect/build_job.h"

#include <filesystem>

#include <fmt/format.h>

#include "bisect/slurm.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"

namespace kb::bisect {

std::string build_job_name(const std::string& sha, const std::string& workdir) {
  return "kbisect-build-" + sha.substr(0, 12) + "-" + sha256_hex(workdir).substr(0, 8);
}

std::string job_status(const std::string& stem) {
  const std::string path = stem + ".rc";
  if (!file_exists(path)) return "";
  std::string rc = read_file(path);
  while (!rc.empty() && (rc.back() == '\n' || rc.back() == ' ')) rc.pop_back();
  return rc;
}

std::string build_job_status(const std::string& job_dir, const std::string& sha) { return job_status(job_dir + "/" + sha); }

void forget_build_job_status(const std::string& job_dir, const std::string& sha) {
  std::error_code ec;
  std::filesystem::remove(job_dir + "/" + sha + ".rc", ec);
}

bool build_job_left(const std::string& sha, const std::string& workdir, const std::string& job_dir) {
  const std::string stem = job_dir + "/" + sha;
  if (file_exists(stem + ".sh") && file_exists(stem + ".rc")) return true;
  return !slurm::jobs_named(build_job_name(sha, workdir)).empty();
}

JobEnd run_job(const std::vector<std::string>& sbatch_args, const std::string& name, const std::string& stem,
               double timeout_s, double poll_s, const std::atomic<bool>* cancel,
               const std::function<void()>& write_script) {
  JobEnd r;
  auto forget = [&] {
    std::error_code ec;
    std::filesystem::remove(stem + ".rc", ec);
  };
  // Resume: this job from a previous session, still known to Slurm, or the status it left.
  const std::vector<std::string> left = slurm::jobs_named(name);
  const bool left_status = left.empty() && file_exists(stem + ".sh") && file_exists(stem + ".rc");
  r.adopted = !left.empty() || left_status;
  if (!r.adopted) write_script();
  const double t0 = now_s();
  for (r.attempts = 1; r.attempts <= 2; ++r.attempts) {
    const bool adopt_now = r.attempts == 1 && r.adopted;
    r.job_id.clear();
    if (adopt_now && !left.empty()) {
      r.job_id = left.front();
    } else if (!adopt_now) {
      forget();
      // Not requeued by Slurm after a node failure (a requeued job waits minutes before it may start
      // again): kbisect submits it once more itself, at once.
      std::vector<std::string> args = sbatch_args;
      args.insert(args.begin(), "--no-requeue");
      r.job_id = slurm::submit(args, stem + ".sh");
    }
    auto cancelled = [cancel] { return cancel && cancel->load(); };
    const bool gone = r.job_id.empty() ? true : slurm::wait_gone({r.job_id}, timeout_s, poll_s, cancelled);
    r.wall_s = now_s() - t0;
    if (!gone && cancelled()) {
      slurm::cancel(r.job_id);
      slurm::wait_gone({r.job_id}, 30, 0.2);
      r.wall_s = now_s() - t0;
      r.state = slurm::job_info(r.job_id).state;
      // A job that ended on its own before scancel reached it (COMPLETED, FAILED) counts as any other. A
      // cancelled one may still have written a status (its command killed by SIGTERM: 143): Slurm's state
      // decides, and where Slurm forgot the job, only a status of 0 counts as ended.
      const bool ended_first = r.state == "COMPLETED" || r.state == "FAILED" || (r.state.empty() && job_status(stem) == "0");
      if (!ended_first) {
        forget();  // a resumed run must not adopt a cancelled job's status
        r.cancelled = true;
        return r;
      }
    }
    if (!gone && !cancelled()) {
      slurm::cancel(r.job_id);
      r.timed_out = true;
      return r;
    }
    r.state = r.job_id.empty() ? "" : slurm::job_info(r.job_id).state;
    // The node failed under the job: the status its script wrote (killed by SIGTERM) says nothing.
    if (r.state == "NODE_FAIL" && r.attempts == 1) continue;
    r.rc = job_status(stem);
    if (!r.rc.empty()) return r;
    // A node failure, or an adopted job that vanished without a status, is submitted once more.
    if (r.attempts == 1 && (r.state == "NODE_FAIL" || r.adopted)) continue;
    return r;
  }
  return r;
}

BuildJobResult run_build_job(const ProviderSpec& p, const std::string& sha, const std::string& worktree,
                             const std::string& out, const std::string& workdir, const std::string& job_dir,
                             const std::atomic<bool>* cancel) {
  make_dirs(job_dir);
  const std::string stem = job_dir + "/" + sha, rc_path = stem + ".rc", out_path = stem + ".out";
  const std::string name = build_job_name(sha, workdir);
  // The user's command is the one thing run through a shell (as for a local build); commit data reaches it
  // only through the environment, every value in the script single-quoted.
  const JobEnd e = run_job(slurm::sbatch_argv(*p.slurm, name, out_path, "", ""), name, stem, p.timeout_s, p.slurm_poll_s,
                           cancel, [&] {
                             slurm::write_script(stem + ".sh", {{"KBISECT_COMMIT", sha}, {"KBISECT_WORKTREE", worktree}, {"KBISECT_OUT", out}},
                                                 "cd " + slurm::sh_quote(worktree) + " || exit 1\n/bin/sh -c " +
                                                     slurm::sh_quote(p.command) + "\nrc=$?\necho \"$rc\" > " +
                                                     slurm::sh_quote(rc_path) + "\nexit \"$rc\"\n");
                           });
  BuildJobResult r;
  r.job_id = e.job_id;
  r.state = e.state;
  r.attempts = std::min(e.attempts, 2);
  r.adopted = e.adopted;
  r.cancelled = e.cancelled;
  r.wall_s = e.wall_s;
  r.log = file_exists(out_path) ? tail(read_file(out_path), 3000) : "";
  if (e.cancelled) {
    r.reason = fmt::format("build cancelled (Slurm job {}, JobState {})", r.job_id, r.state.empty() ? "unknown" : r.state);
  } else if (e.timed_out) {
    r.reason = fmt::format("build timed out after {:g} s (Slurm job {} cancelled)", p.timeout_s, r.job_id);
  } else if (!e.rc.empty()) {
    r.ok = e.rc == "0";
    if (!r.ok)
      r.reason = fmt::format("build failed (exit {}) in Slurm job {}: {}", e.rc, r.job_id.empty() ? "(an earlier session's)" : r.job_id,
                             tail(r.log, 400));
  } else if (r.state == "TIMEOUT") {
    r.reason = fmt::format("Slurm killed build job {} at its time limit ({}; JobState TIMEOUT)", r.job_id,
                           p.slurm->time.empty() ? "the partition's default" : p.slurm->time);
  } else {
    r.reason = fmt::format("Slurm build job {} ended without an exit status (JobState {})", r.job_id,
                           r.state.empty() ? "unknown" : r.state);
  }
  return r;
}

}  // namespace kb::bisect
