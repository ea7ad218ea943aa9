#include "bisect/slurm.h"

#include <sys/stat.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

namespace kb::slurm {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

bool valid_job_id(const std::string& id) {
  if (id.empty()) return false;
  for (char c : id)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// The controller could not be reached at all (it is down or restarting): the request never arrived.
bool unreachable(const RunResult& r) {
  return !r.ok() && r.err.find("Unable to contact slurm controller") != std::string::npos;
}

// A Slurm command, tried again every 2 s while the controller cannot be reached, for up to
// kControllerGraceS: a controller that dies and restarts (its state saved) costs a wait, not the run.
RunResult run_slurm(const std::vector<std::string>& argv, double timeout_s) {
  RunOptions ro;
  ro.timeout_s = timeout_s;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    RunResult r = run_process(argv, ro);
    if (!unreachable(r) ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= kControllerGraceS)
      return r;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

}  // namespace

std::vector<std::string> sbatch_argv(const SubmitOptions& o, const std::string& job_name, const std::string& output,
                                     const std::string& array, const std::string& dependency) {
  std::vector<std::string> a;
  if (!job_name.empty()) a.push_back("--job-name=" + job_name);
  if (!output.empty()) a.push_back("--output=" + output);
  if (!array.empty()) a.push_back("--array=" + array);
  if (!dependency.empty()) a.push_back("--dependency=" + dependency);
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (!o.gres.empty()) a.push_back("--gres=" + o.gres);
  if (o.gpus > 0) a.push_back(fmt::format("--gpus={}", o.gpus));
  if (!o.time.empty()) a.push_back("--time=" + o.time);
  if (o.cpus_per_task > 0) a.push_back(fmt::format("--cpus-per-task={}", o.cpus_per_task));
  if (!o.mem.empty()) a.push_back("--mem=" + o.mem);
  a.insert(a.end(), o.extra.begin(), o.extra.end());
  return a;
}

bool available(std::string* reason) {
  for (const char* p : {"sbatch", "squeue"})
    if (which(p).empty()) {
      if (reason) *reason = fmt::format("'{}' not found in PATH (install slurm-wlm's client tools)", p);
      return false;
    }
  return true;
}

std::string submit(const std::vector<std::string>& sbatch_args, const std::string& script_path, double timeout_s) {
  std::string why;
  if (!available(&why)) throw EnvError("cannot submit to Slurm: " + why);
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), sbatch_args.begin(), sbatch_args.end());
  argv.push_back(script_path);
  RunResult r = run_slurm(argv, timeout_s);
  if (!r.ok())
    throw Error(fmt::format("{} failed ({}): {}", argv_to_display(argv), r.status_text(), trim(tail(r.err, 600))),
                ErrorKind::environment);
  std::string out = trim(r.out);
  // --parsable prints "jobid" or "jobid;cluster"; take the last non-empty line (sbatch may print warnings).
  if (auto nl = out.rfind('\n'); nl != std::string::npos) out = out.substr(nl + 1);
  if (auto semi = out.find(';'); semi != std::string::npos) out = out.substr(0, semi);
  if (!valid_job_id(out))
    throw Error(fmt::format("{}: unexpected output '{}' (expected a job id)", argv_to_display(argv), trim(r.out)),
                ErrorKind::environment);
  return out;
}

std::map<std::string, std::string> queued(const std::string& job_id, double timeout_s) {
  if (!valid_job_id(job_id)) throw InputError(fmt::format("not a Slurm job id: '{}'", job_id));
  if (which("squeue").empty()) throw EnvError("'squeue' not found in PATH");
  std::vector<std::string> argv = {"squeue", "-h", "-j", job_id, "-o", "%i|%T"};
  RunResult r = run_slurm(argv, timeout_s);
  std::map<std::string, std::string> jobs;
  if (!r.ok()) {
    // A job id the controller no longer knows is an error for squeue ("Invalid job id specified"): gone.
    if (r.err.find("Invalid job id") != std::string::npos) return jobs;
    throw EnvError(fmt::format("{} failed ({}): {}", argv_to_display(argv), r.status_text(), trim(tail(r.err, 600))));
  }
  size_t i = 0;
  while (i < r.out.size()) {
    size_t j = r.out.find('\n', i);
    if (j == std::string::npos) j = r.out.size();
    std::string line = trim(r.out.substr(i, j - i));
    i = j + 1;
    if (line.empty()) continue;
    auto bar = line.find('|');
    if (bar == std::string::npos) jobs[line] = "";
    else jobs[line.substr(0, bar)] = line.substr(bar + 1);
  }
  return jobs;
}

bool wait_gone(const std::vector<std::string>& job_ids, double timeout_s, double poll_s,
               const std::function<bool()>& stop) {
  const auto start = std::chrono::steady_clock::now();
  auto waited_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (;;) {
    if (stop && stop()) return false;
    bool any = false;
    for (const auto& id : job_ids)
      if (!queued(id).empty()) {
        any = true;
        break;
      }
    if (!any) return true;
    const double waited = waited_s();
    if (waited >= timeout_s) return false;
    // Sleep until the next poll in slices short enough to see `stop` soon after it turns true.
    const double until = waited + std::min(poll_s, std::max(0.05, timeout_s - waited));
    while (waited_s() < until && !(stop && stop()))
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.05, until - waited_s() + 1e-3)));
  }
}

std::vector<std::string> jobs_named(const std::string& name, double timeout_s) {
  if (which("squeue").empty()) throw EnvError("'squeue' not found in PATH");
  const RunResult r = run_slurm({"squeue", "-h", "-n", name, "-o", "%i"}, timeout_s);
  if (!r.ok()) throw EnvError(fmt::format("squeue -n {} failed ({}): {}", name, r.status_text(), trim(tail(r.err, 400))));
  std::vector<std::string> ids;
  for (size_t i = 0; i < r.out.size();) {
    size_t j = r.out.find('\n', i);
    if (j == std::string::npos) j = r.out.size();
    const std::string id = trim(r.out.substr(i, j - i));
    if (valid_job_id(id)) ids.push_back(id);
    i = j + 1;
  }
  return ids;
}

JobInfo job_info(const std::string& job_id, double timeout_s) {
  if (!valid_job_id(job_id)) throw InputError(fmt::format("not a Slurm job id: '{}'", job_id));
  JobInfo info;
  const RunResult r = which("scontrol").empty() ? RunResult{} : run_slurm({"scontrol", "show", "job", "-o", job_id}, timeout_s);
  if (!r.ok()) {
    // Forgotten by the controller: accounting keeps it (a cluster without slurmdbd has no sacct answer).
    if (which("sacct").empty()) return info;
    const RunResult a = run_slurm({"sacct", "-X", "-P", "-n", "-j", job_id, "-o", "State,ExitCode"}, timeout_s);
    const std::string line = a.ok() ? trim(a.out.substr(0, a.out.find('\n'))) : "";
    const size_t bar = line.find('|');
    if (bar == std::string::npos) return info;
    info.state = line.substr(0, bar);
    info.state = info.state.substr(0, info.state.find(' '));  // "CANCELLED by 0"
    info.exit_code = line.substr(bar + 1);
    return info;
  }
  auto field = [&](const std::string& key) {
    const std::string k = " " + key + "=";
    const std::string line = " " + r.out;
    const size_t at = line.find(k);
    if (at == std::string::npos) return std::string();
    const size_t b = at + k.size(), e = line.find_first_of(" \n", b);
    return line.substr(b, e == std::string::npos ? std::string::npos : e - b);
  };
  info.state = field("JobState");
  info.exit_code = field("ExitCode");
  return info;
}

bool cancel(const std::string& job_id) {
  if (!valid_job_id(job_id) || which("scancel").empty()) return false;
  return run_slurm({"scancel", job_id}, 30).ok();
}

std::string sh_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

void write_script(const std::string& path, const std::map<std::string, std::string>& env, const std::string& body) {
  std::string text = "#!/bin/sh\n# written by kbisect; every value is single-quoted\nset -u\n";
  for (const auto& [k, v] : env) {
    if (k.empty() || !(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_'))
      throw InputError(fmt::format("not an environment variable name: '{}'", k));
    for (char c : k)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
        throw InputError(fmt::format("not an environment variable name: '{}'", k));
    text += fmt::format("{}={}\nexport {}\n", k, sh_quote(v), k);
  }
  text += body;
  if (text.back() != '\n') text += '\n';
  write_file_atomic(path, text);
  if (chmod(path.c_str(), 0755) != 0) throw EnvError(fmt::format("cannot chmod {}", path));
}

void write_exec_script(const std::string& path, const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& w : argv) cmd += (cmd.empty() ? "" : " ") + sh_quote(w);
  write_script(path, {}, "exec " + cmd + "\n");
}

}  // namespace kb::slurm
