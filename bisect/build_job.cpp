#include "bisect/build_job.h"

#include <filesystem>

#include <fmt/format.h>

#include "bisect/slurm.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::bisect {

BuildJobResult run_build_job(const ProviderSpec& p, const std::string& sha, const std::string& worktree,
                             const std::string& out, const std::string& job_dir) {
  make_dirs(job_dir);
  const std::string stem = job_dir + "/" + sha, rc_path = stem + ".rc", out_path = stem + ".out";
  // The user's command is the one thing run through a shell (as for a local build); commit data reaches it
  // only through the environment, every value in the script single-quoted.
  slurm::write_script(stem + ".sh", {{"KBISECT_COMMIT", sha}, {"KBISECT_WORKTREE", worktree}, {"KBISECT_OUT", out}},
                      "cd " + slurm::sh_quote(worktree) + " || exit 1\n/bin/sh -c " + slurm::sh_quote(p.command) +
                          "\nrc=$?\necho \"$rc\" > " + slurm::sh_quote(rc_path) + "\nexit \"$rc\"\n");
  BuildJobResult r;
  const double t0 = now_s();
  for (r.attempts = 1; r.attempts <= 2; ++r.attempts) {
    std::error_code ec;
    std::filesystem::remove(rc_path, ec);
    r.job_id = slurm::submit(slurm::sbatch_argv(*p.slurm, "kbisect-build-" + sha.substr(0, 12), out_path, "", ""), stem + ".sh");
    const bool gone = slurm::wait_gone({r.job_id}, p.timeout_s, p.slurm_poll_s);
    r.wall_s = now_s() - t0;
    r.log = file_exists(out_path) ? tail(read_file(out_path), 3000) : "";
    if (!gone) {
      slurm::cancel(r.job_id);
      r.reason = fmt::format("build timed out after {:g} s (Slurm job {} cancelled)", p.timeout_s, r.job_id);
      return r;
    }
    r.state = slurm::job_info(r.job_id).state;
    if (file_exists(rc_path)) {
      std::string rc = read_file(rc_path);
      while (!rc.empty() && (rc.back() == '\n' || rc.back() == ' ')) rc.pop_back();
      r.ok = rc == "0";
      if (!r.ok) r.reason = fmt::format("build failed (exit {}) in Slurm job {}: {}", rc, r.job_id, tail(r.log, 400));
      return r;
    }
    if (r.state == "NODE_FAIL" && r.attempts == 1) continue;  // a node failure is retried once
    if (r.state == "TIMEOUT")
      r.reason = fmt::format("Slurm killed build job {} at its time limit ({}; JobState TIMEOUT)", r.job_id,
                             p.slurm->time.empty() ? "the partition's default" : p.slurm->time);
    else
      r.reason = fmt::format("Slurm build job {} ended without an exit status (JobState {})", r.job_id,
                             r.state.empty() ? "unknown" : r.state);
    return r;
  }
  return r;
}

}  // namespace kb::bisect
