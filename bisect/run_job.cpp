#include "bisect/run_job.h"

#include <stdexcept>

#include <fmt/format.h>

#include "bisect/build_job.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "core/text.h"
#include "git/git.h"

namespace kb::bisect {

RunPool::~RunPool() {
  cancel();
  for (auto& [ticket, t] : threads_) t.join();
}

int RunPool::start(const std::string& sha, std::function<RunDone(const std::atomic<bool>& cancel)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const int ticket = next_++;
  ++in_flight_;
  threads_[ticket] = std::thread([this, ticket, sha, fn = std::move(fn)] {
    Done d;
    try {
      d.run = fn(cancel_);
    } catch (...) {
      d.error = std::current_exception();
    }
    d.run.ticket = ticket;
    d.run.sha = sha;
    std::lock_guard<std::mutex> l(mu_);
    done_.push_back(std::move(d));
    cv_.notify_all();
  });
  return ticket;
}

RunDone RunPool::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (in_flight_ == 0) throw std::logic_error("RunPool::wait: no run in flight");
  cv_.wait(lock, [&] { return !done_.empty(); });
  Done d = std::move(done_.front());
  done_.erase(done_.begin());
  --in_flight_;
  if (in_flight_ == 0) cancel_ = false;  // a cancellation covers the runs in flight when it was asked
  std::thread t = std::move(threads_.at(d.run.ticket));
  threads_.erase(d.run.ticket);
  lock.unlock();
  t.join();  // it has handed its result over: ends at once
  if (d.error) std::rethrow_exception(d.error);
  return d.run;
}

void RunPool::cancel() { cancel_ = true; }

std::string run_job_name(const std::string& sha, int ordinal, const std::string& workdir) {
  return fmt::format("kbisect-run-{}-{}-{}", sha.substr(0, 12), ordinal, sha256_hex(workdir).substr(0, 8));
}

RunDone run_external_job(const ExternalMetric& m, const ExternalCommand& c, const slurm::SubmitOptions& o, double poll_s,
                         const std::string& sha, int ordinal, const std::string& workdir, const std::string& job_dir,
                         const std::atomic<bool>* cancel) {
  make_dirs(job_dir);
  const std::string stem = fmt::format("{}/{}-{}", job_dir, sha.substr(0, 12), ordinal);
  const std::string name = run_job_name(sha, ordinal, workdir);
  std::vector<std::string> args = slurm::sbatch_argv(o, name, stem + ".out", "", "");
  args.push_back("--error=" + stem + ".err");
  const JobEnd e = run_job(args, name, stem, m.timeout_s, poll_s, cancel, [&] {
    std::string cmd;
    for (const auto& a : c.argv) cmd += (cmd.empty() ? "" : " ") + slurm::sh_quote(a);
    slurm::write_script(stem + ".sh", c.env,
                        "cd " + slurm::sh_quote(c.cwd) + " || exit 1\n" + cmd + "\nrc=$?\necho \"$rc\" > " +
                            slurm::sh_quote(stem + ".rc") + "\nexit \"$rc\"\n");
  });
  RunDone d;
  d.job = e.job_id;
  d.wall_s = e.wall_s;
  if (e.cancelled) {
    d.cancelled = true;
    return d;
  }
  const std::string out = file_exists(stem + ".out") ? read_file(stem + ".out") : "";
  const std::string err = file_exists(stem + ".err") ? read_file(stem + ".err") : "";
  const std::string job = e.job_id.empty() ? "(an earlier session's job)" : "Slurm job " + e.job_id;
  if (e.timed_out)
    throw Error(fmt::format("external metric ({}): run {} at {} timed out after {:g} s ({} cancelled)", m.origin, ordinal,
                            git::short_sha(sha), m.timeout_s, job));
  if (e.rc != "0")
    throw Error(fmt::format("external metric ({}): run {} at {} in {} {} (JobState {}); output ends with:\n{}", m.origin,
                            ordinal, git::short_sha(sha), job, e.rc.empty() ? "left no exit status" : "exited " + e.rc,
                            e.state.empty() ? "unknown" : e.state, tail(out + err, 1500)));
  d.value = parse_external_value(m, m.stream == "stdout" ? out : m.stream == "stderr" ? err : out + err, c.argv);
  return d;
}

}  // namespace kb::bisect
