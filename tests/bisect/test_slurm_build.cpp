// Builds as Slurm jobs (provider.build.slurm, bisect/build_job.h) on the single-node Slurm of the test
// fixture (skipped with the reason when slurm-wlm/munge are absent): a bisection whose every build is a
// job names the same culprit as the local one, a failing build is a skip that names its job, and a job
// that outlives provider.build.timeout_s is cancelled.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/build_job.h"
#include "bisect/config.h"
#include "bisect/slurm.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/slurm_fixture.h"

using json = nlohmann::json;
using kbtest::GitRepo;

namespace {

// The "compiler build": a wrapper with the flags in flags.txt; fails where a file `broken` exists.
const char* kBuild = R"SH(#!/bin/sh
set -e
if [ -e broken ]; then echo "this commit does not build" >&2; exit 3; fi
printf '#!/bin/sh\nexec clang++-19 %s "$@"\n' "$(cat flags.txt)" > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
)SH";

std::string provider(const std::string& slurm) {
  return "{build: {command: 'sh build.sh', timeout_s: 120, toolchain: {name: cc, backend: cpu, kind: clang, "
         "compiler: '{out}/cc'}" +
         (slurm.empty() ? "" : ", slurm: " + slurm) + "}}";
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

kb::RunResult bisect(const std::string& cfg, const std::string& wd) {
  kb::RunOptions o;
  o.timeout_s = 600;
  return kb::run_process({kbtest::kKbisect, "bisect", cfg, "--workdir", wd, "-q"}, o);
}

}  // namespace

TEST(SlurmBuild, SameCulpritAsTheLocalBisection) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  GitRepo r;
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", kBuild}, {"flags.txt", "-O3 -march=x86-64-v3"}}, "good: -O3"));
  s.push_back(r.commit({{"README", "docs\n"}}, "docs"));
  s.push_back(r.commit({{"flags.txt", "-O0"}}, "switch to -O0"));
  s.push_back(r.commit({{"broken", "x\n"}}, "break the build"));
  s.push_back(r.commit({{"broken", ""}}, "fix the build"));
  const std::string local = kbtest::write_tmp(r, kbtest::bisect_config(r, s.front(), s.back(), provider(""), "time", "20%"),
                                              "local.yaml");
  const std::string onslurm = kbtest::write_tmp(
      r, kbtest::bisect_config(r, s.front(), s.back(), provider("{partition: debug, time: '00:05:00', poll_s: 0.2}"), "time", "20%"),
      "slurm.yaml");
  const auto a = bisect(local, r.tmp() + "/w-local");
  ASSERT_TRUE(a.ok()) << a.status_text() << "\n" << a.out << "\n" << kb::tail(a.err, 3000);
  const auto b = bisect(onslurm, r.tmp() + "/w-slurm");
  ASSERT_TRUE(b.ok()) << b.status_text() << "\n" << b.out << "\n" << kb::tail(b.err, 3000);
  EXPECT_EQ(last_line(a.out), "culprit: " + s[2] + " switch to -O0");
  EXPECT_EQ(last_line(b.out), last_line(a.out));
  // Every build of the Slurm run was a job: its script, output and exit status are kept per commit.
  const json res = json::parse(kb::read_file(r.tmp() + "/w-slurm/result.json"));
  int jobs = 0;
  for (const std::string& sha : {s.front(), s.back()}) {
    EXPECT_TRUE(kb::file_exists(r.tmp() + "/w-slurm/slurm/" + sha + ".out")) << sha;
    EXPECT_EQ(kb::read_file(r.tmp() + "/w-slurm/slurm/" + sha + ".rc"), "0\n") << sha;
  }
  for (const auto& sha : s) jobs += kb::file_exists(r.tmp() + "/w-slurm/slurm/" + sha + ".sh");
  EXPECT_EQ(jobs, res["spent"]["builds"].get<int>()) << res["spent"].dump();
  EXPECT_FALSE(kb::file_exists(r.tmp() + "/w-local/slurm"));
}

TEST(SlurmBuild, FailedBuildIsASkipAndAnOverdueJobIsCancelled) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  kbtest::TestDir t("kb-slurm-build");
  kb::bisect::ProviderSpec p;
  p.kind = kb::bisect::ProviderSpec::Kind::build;
  p.slurm = kb::slurm::SubmitOptions{};
  p.slurm->partition = "debug";
  p.slurm_poll_s = 0.2;
  p.timeout_s = 60;
  p.command = "echo building $KBISECT_COMMIT; exit 7";
  const std::string sha = "0123456789abcdef0123456789abcdef01234567";
  kb::make_dirs(t.path + "/wt");
  auto f = kb::bisect::run_build_job(p, sha, t.path + "/wt", t.path + "/out", t.path, t.path + "/slurm");
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.reason.find("exit 7"), std::string::npos) << f.reason;
  EXPECT_NE(f.reason.find("Slurm job " + f.job_id), std::string::npos) << f.reason;
  EXPECT_NE(f.log.find("building " + sha), std::string::npos) << f.log;

  p.command = "sleep 60";
  p.timeout_s = 2;
  const std::string sha2 = "1123456789abcdef0123456789abcdef01234567";
  auto late = kb::bisect::run_build_job(p, sha2, t.path + "/wt", t.path + "/out", t.path, t.path + "/slurm");
  EXPECT_FALSE(late.ok);
  EXPECT_NE(late.reason.find("timed out"), std::string::npos) << late.reason;
  EXPECT_NE(late.reason.find("cancelled"), std::string::npos) << late.reason;
  // scancel really ended it: the job leaves the queue.
  EXPECT_TRUE(kb::slurm::wait_gone({late.job_id}, 30, 0.2)) << "job " << late.job_id << " still queued";
}

// kill -9 of kbisect while a build job runs: the resumed bisection adopts the job (found by its name)
// instead of submitting it again, so no commit is built twice, and names the same culprit.
TEST(SlurmBuild, ResumeAfterKillAdoptsTheRunningJob) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  GitRepo r;
  const std::string built = r.tmp() + "/built.txt";  // one line per build that ran, by any job
  const std::string script = std::string(kBuild) + "echo \"$KBISECT_COMMIT\" >> '" + built + "'\nsleep 2\n";
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", script}, {"flags.txt", "-O3 -march=x86-64-v3"}}, "good: -O3"));
  s.push_back(r.commit({{"README", "docs\n"}}, "docs"));
  s.push_back(r.commit({{"flags.txt", "-O0"}}, "switch to -O0"));
  s.push_back(r.commit({{"README", "more docs\n"}}, "docs again"));
  const std::string cfg = kbtest::write_tmp(
      r, kbtest::bisect_config(r, s.front(), s.back(), provider("{partition: debug, time: '00:05:00', poll_s: 0.2}"), "time", "20%"));
  const std::string wd = r.tmp() + "/work";
  const std::string log = r.tmp() + "/first.log";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(kbtest::kKbisect.c_str(), kbtest::kKbisect.c_str(), "bisect", cfg.c_str(), "--workdir", wd.c_str(), (char*)nullptr);
    _exit(127);
  }
  // Kill as soon as a build job of this bisection is running.
  bool killed = false;
  std::string job;
  for (int i = 0; i < 1200 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const auto& sha : s) {
      const auto ids = kb::slurm::jobs_named(kb::bisect::build_job_name(sha, wd));
      if (ids.empty() || kb::slurm::queued(ids.front()).empty()) continue;
      job = ids.front();
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << kb::read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << "finished before the kill:\n" << kb::read_file(log);
  ASSERT_FALSE(kb::slurm::queued(job).empty()) << "job " << job << " ended with kbisect";

  kb::RunOptions o;
  o.timeout_s = 600;
  const auto b = kb::run_process({kbtest::kKbisect, "bisect", cfg, "--workdir", wd, "--resume", "-q"}, o);
  ASSERT_TRUE(b.ok()) << b.status_text() << "\n" << b.out << "\n" << kb::tail(b.err, 3000);
  EXPECT_EQ(last_line(b.out), "culprit: " + s[2] + " switch to -O0");
  // Every build ran once: the job in flight at the kill was adopted, not submitted again.
  const std::string text = kb::read_file(built);
  const std::map<std::string, int> runs = kbtest::count_lines(text);
  for (const auto& [sha, k] : runs) EXPECT_EQ(k, 1) << sha << " built twice:\n" << text;
  EXPECT_GE(runs.size(), 3u) << text;
}
