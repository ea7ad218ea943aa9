// A private single-node Slurm for tests, started in a temp dir (the way Slurm runs on one machine),
// installing nothing. Partitions: debug (the default), build (each core shared by up to 4 jobs, for
// builders) and measure (the one node again, standing for the GPU partition; shared the same way, since
// Slurm puts no build job beside a job of a partition that does not share its cores). Slurm's job completion log
// (jobcomp/filetxt, jobcomp_log(): one line per ended job with its JobState) records what accounting would,
// since there is no slurmdbd for sacct. munged (as the munge user, its own socket in the
// temp dir), slurmctld and slurmd with a generated slurm.conf (free ports, state/spool/log/pid files in the
// temp dir). Every wait is bounded; stop() TERMs the daemons by the pids in their pid files, then KILLs.
// start() returns the reason when something is missing (the test then skips with it).
#pragma once
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/test_tmp.h"

namespace kbtest {

class LocalSlurm {
 public:
  LocalSlurm() = default;
  ~LocalSlurm() { stop(); }
  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;

  // "" when the cluster is up (and SLURM_CONF is exported to this process and its children), else why not.
  std::string start() {
    for (const char* p : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"})
      if (access(p, X_OK) != 0) return fmt::format("{} not installed (apt-get install slurm-wlm munge)", p);
    for (const char* p : {"sbatch", "squeue", "sinfo", "munge", "runuser"})
      if (kb::which(p).empty()) return fmt::format("'{}' not in PATH", p);
    if (geteuid() != 0) return "starting munged as the munge user needs root";
    struct passwd* pw = getpwnam("munge");
    if (!pw) return "no 'munge' user";
    if (access("/etc/munge/munge.key", F_OK) != 0) return "no /etc/munge/munge.key";

    dir_ = kb::temp_dir("kb-slurm");
    chmod(dir_.c_str(), 0755);  // munged (user munge) must reach its socket directory
    const std::string md = dir_ + "/munge";
    kb::make_dirs(md);
    if (chown(md.c_str(), pw->pw_uid, pw->pw_gid) != 0) return "cannot chown the munge directory";
    chmod(md.c_str(), 0755);
    socket_ = md + "/munge.socket";
    munge_pid_ = md + "/munged.pid";
    kb::RunOptions ro;
    ro.timeout_s = 20;
    auto r = kb::run_process({"runuser", "-u", "munge", "--", "/usr/sbin/munged", "--socket=" + socket_,
                              "--pid-file=" + munge_pid_, "--log-file=" + md + "/munged.log", "--seed-file=" + md + "/munged.seed"},
                             ro);
    if (!r.ok()) return "munged did not start: " + r.status_text() + " " + r.err;
    if (!wait_until([&] { return kb::run_process({"munge", "-n", "-S", socket_}, ro).ok(); }, 10))
      return "munged socket not ready within 10 s";

    const int ctld_port = free_port(), d_port = free_port();
    if (ctld_port <= 0 || d_port <= 0 || ctld_port == d_port) return "no free TCP ports";
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (const char* sub : {"state", "spool", "log"}) kb::make_dirs(dir_ + "/" + sub);
    conf_ = dir_ + "/slurm.conf";
    ctld_pid_ = dir_ + "/slurmctld.pid";
    d_pid_ = dir_ + "/slurmd.pid";
    kb::write_file_atomic(
        conf_, fmt::format("ClusterName=kbtest{}\nSlurmctldHost=localhost\nSlurmctldPort={}\nSlurmdPort={}\nSlurmUser=root\n"
                           "AuthType=auth/munge\nAuthInfo=socket={}\nCredType=cred/munge\n"
                           "StateSaveLocation={}/state\nSlurmdSpoolDir={}/spool\nSlurmctldPidFile={}\nSlurmdPidFile={}\n"
                           "SlurmctldLogFile={}/log/slurmctld.log\nSlurmdLogFile={}/log/slurmd.log\nMailProg=/bin/true\n"
                           "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
                           "AccountingStorageType=accounting_storage/none\nSchedulerParameters=batch_sched_delay=0\n"
                           "DependencyParameters=kill_invalid_depend\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
                           "ReturnToService=2\nNodeName=localhost NodeAddr=127.0.0.1 CPUs={} Sockets=1 CoresPerSocket={} "
                           "ThreadsPerCore=1 RealMemory=1000\nPartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n"
                           "PartitionName=build Nodes=localhost MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n"
                           "PartitionName=measure Nodes=localhost MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n"
                           "JobCompType=jobcomp/filetxt\nJobCompLoc={}/log/jobcomp.log\n",
                           ctld_port, ctld_port, d_port, socket_, dir_, dir_, ctld_pid_, d_pid_, dir_, dir_, n, n, dir_));
    setenv("SLURM_CONF", conf_.c_str(), 1);
    r = kb::run_process({"/usr/sbin/slurmctld", "-f", conf_}, ro);
    if (!r.ok()) return "slurmctld did not start: " + r.status_text() + " " + r.err + log_tail("slurmctld");
    r = kb::run_process({"/usr/sbin/slurmd", "-f", conf_, "-N", "localhost"}, ro);
    if (!r.ok()) return "slurmd did not start: " + r.status_text() + " " + r.err + log_tail("slurmd");
    std::string state;
    if (!wait_until(
            [&] {
              auto s = kb::run_process({"sinfo", "-h", "-o", "%t"}, ro);
              state = s.out;
              return s.ok() && s.out.rfind("idle", 0) == 0;
            },
            30))
      return "the node did not become idle within 30 s (sinfo: '" + state + "')" + log_tail("slurmctld") + log_tail("slurmd");
    up_ = true;
    return "";
  }

  void stop() {
    if (dir_.empty()) return;
    for (const std::string& pf : {d_pid_, ctld_pid_, munge_pid_}) stop_pid_file(pf);
    remove_test_dir(dir_);
    dir_.clear();
    up_ = false;
  }

  // When the controller last saved its job state (StateSaveLocation/job_state, seconds since the epoch), or
  // -1 when it has saved none yet. A controller that dies before saving forgets its jobs, as a real one would.
  long job_state_saved_at() const {
    struct stat st {};
    if (stat((dir_ + "/state/job_state").c_str(), &st) != 0) return -1;
    return long(st.st_mtime);
  }
  // The controller dies (SIGKILL, as a crash) and comes back from its saved state.
  void kill_controller() {
    if (ctld_pid_.empty() || !kb::file_exists(ctld_pid_)) return;
    try {
      const pid_t pid = pid_t(std::stol(kb::read_file(ctld_pid_)));
      if (pid > 1) kill(pid, SIGKILL);
      wait_until([&] { return !alive(pid); }, 10);
    } catch (...) {
    }
  }
  // "" when slurmctld runs again and answers, else why not.
  std::string restart_controller() {
    kb::RunOptions ro;
    ro.timeout_s = 20;
    auto r = kb::run_process({"/usr/sbin/slurmctld", "-f", conf_}, ro);
    if (!r.ok()) return "slurmctld did not start again: " + r.status_text() + " " + r.err + log_tail("slurmctld");
    if (!wait_until([&] { return kb::run_process({"sinfo", "-h", "-o", "%t"}, ro).ok(); }, 30))
      return "slurmctld does not answer after its restart" + log_tail("slurmctld");
    return "";
  }

  bool up() const { return up_; }
  const std::string& conf() const { return conf_; }
  const std::string& dir() const { return dir_; }
  std::string jobcomp_log() const { return dir_ + "/log/jobcomp.log"; }

 private:
  template <class F>
  static bool wait_until(F f, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    return port;
  }

  // Alive and not a zombie (daemons are reparented; a zombie counts as gone).
  static bool alive(pid_t pid) {
    if (kill(pid, 0) != 0) return false;
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(st, s);
    auto rp = s.rfind(')');
    return !(rp != std::string::npos && rp + 2 < s.size() && s[rp + 2] == 'Z');
  }

  static void stop_pid_file(const std::string& pf) {
    if (pf.empty() || !kb::file_exists(pf)) return;
    pid_t pid = 0;
    try {
      pid = pid_t(std::stol(kb::read_file(pf)));
    } catch (...) {
      return;
    }
    if (pid <= 1) return;
    kill(pid, SIGTERM);
    if (!wait_until([&] { return !alive(pid); }, 5)) kill(pid, SIGKILL);
  }

  std::string log_tail(const std::string& daemon) const {
    const std::string f = dir_ + "/log/" + daemon + ".log";
    return kb::file_exists(f) ? "\n" + daemon + ".log: " + kb::tail(kb::read_file(f), 800) : "";
  }

  std::string dir_, conf_, socket_, munge_pid_, ctld_pid_, d_pid_;
  bool up_ = false;
};

}  // namespace kbtest
