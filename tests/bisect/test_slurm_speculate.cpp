// Builds ahead on a real Slurm (scheduler: slurm, builders: 4; bisect/builds.h) on the single-node cluster
// of the test fixture, with a build partition (4 jobs per core) and a measurement partition, skipped with
// the reason when slurm-wlm/munge are absent:
//  - kbisect itself runs as a job on the measurement partition and submits every build to the build
//    partition; it names the same culprit, with the same decisions in the same order, as the local run;
//  - speculative builds are journaled, those a decision made useless are cancelled, and Slurm's own job
//    completion log says CANCELLED for each of them; no commit's build completes twice;
//  - kill -9 with builds in flight, then --resume: the same culprit, still no build completed twice;
//  - the node taken down (scontrol) while builds run and brought back: the jobs end NODE_FAIL, kbisect
//    submits each once more, and the bisection ends with the culprit;
//  - the controller killed (SIGKILL) while builds run and restarted 5 s later from its saved state: kbisect
//    waits for it, the running jobs go on, and the bisection ends with the culprit, no build repeated.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/build_job.h"
#include "bisect/builds.h"
#include "bisect/config.h"
#include "bisect/provider.h"
#include "git/git.h"
#include "bisect/journal.h"
#include "bisect/slurm.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/slurm_fixture.h"

using json = nlohmann::json;
using kbtest::GitRepo;

namespace {

// The "compiler build": a wrapper with the flags in flags.txt, fails where `broken` exists, takes a few
// seconds, and appends the commit to `done` only when it completes (a cancelled build never gets there).
std::string build_script(const std::string& done) {
  return R"SH(#!/bin/sh
set -e
if [ -e broken ]; then echo "this commit does not build" >&2; exit 3; fi
sleep 3
printf '#!/bin/sh\nexec clang++-19 %s "$@"\n' "$(cat flags.txt)" > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
echo "$KBISECT_COMMIT" >> ')SH" + done + "'\n";
}

const char* kProvider =
    "{build: {command: 'sh build.sh', timeout_s: 300, toolchain: {name: cc, backend: cpu, kind: clang, "
    "compiler: '{out}/cc'}}}";

// 24 commits after good: a broken build at 5 (fixed at 6), -O0 at 17 (the culprit for code size).
struct History {
  GitRepo r;
  std::vector<std::string> s;
  std::string done;
  History() {
    done = r.tmp() + "/completed.txt";
    s.push_back(r.commit({{"build.sh", build_script(done)}, {"flags.txt", "-O3 -march=x86-64-v3"}}, "good: -O3"));
    for (int i = 1; i <= 24; ++i) {
      if (i == 5) s.push_back(r.commit({{"broken", "x\n"}}, "break the build"));
      else if (i == 6) s.push_back(r.commit({{"broken", ""}}, "fix the build"));
      else if (i == 17) s.push_back(r.commit({{"flags.txt", "-O0"}}, "switch to -O0"));
      else s.push_back(r.commit({{"README", "docs " + std::to_string(i) + "\n"}}, "docs " + std::to_string(i)));
    }
  }
  std::string config(const std::string& name, const std::string& provider, const std::string& extra) {
    return kbtest::write_tmp(r, kbtest::bisect_config(r, s.front(), s.back(), provider, "code_bytes", "10%", extra), name);
  }
  std::string culprit_line() const { return "culprit: " + s[17] + " switch to -O0"; }
  // Completed builds per commit.
  std::map<std::string, int> completed() const {
    return kb::file_exists(done) ? kbtest::count_lines(kb::read_file(done)) : std::map<std::string, int>{};
  }
};

const char* kSlurmExtra = "scheduler: slurm\nbuilders: 4\n";
// Builds on the build partition (4 jobs per core), polled every 0.2 s.
const char* kSlurmProvider =
    "{build: {command: 'sh build.sh', timeout_s: 300, toolchain: {name: cc, backend: cpu, kind: clang, "
    "compiler: '{out}/cc'}, slurm: {partition: build, time: '00:10:00', poll_s: 0.2}}}";

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

kb::RunResult run_kbisect(const std::vector<std::string>& args) {
  kb::RunOptions o;
  o.timeout_s = 600;
  std::vector<std::string> argv = {kbtest::kKbisect, "bisect"};
  argv.insert(argv.end(), args.begin(), args.end());
  return kb::run_process(argv, o);
}

// The decisions of a journal, in order: key, side (or verdict) and how.
std::vector<std::string> decisions(const std::string& journal) {
  std::vector<std::string> d;
  for (const json& ev : kb::bisect::read_journal(journal))
    if (ev.value("ev", "") == "decision")
      d.push_back(ev.value("key", "") + " " + ev.value("side", ev.value("verdict", "")) + " " + ev.value("how", ""));
  return d;
}

std::vector<json> events(const std::string& journal, const std::string& kind) {
  std::vector<json> out;
  for (const json& ev : kb::bisect::read_journal(journal))
    if (ev.value("ev", "") == kind) out.push_back(ev);
  return out;
}

// Build jobs of this workdir that Slurm runs now.
size_t running_builds(const History& h, const std::string& wd) {
  size_t k = 0;
  for (const auto& sha : h.s)
    for (const auto& id : kb::slurm::jobs_named(kb::bisect::build_job_name(sha, wd))) {
      const auto q = kb::slurm::queued(id);
      k += q.count(id) && q.at(id) == "RUNNING";
    }
  return k;
}

void expect_no_build_completed_twice(const History& h) {
  for (const auto& [sha, k] : h.completed()) EXPECT_EQ(k, 1) << sha << " built " << k << " times";
}

// Starts kbisect with `args`, its output to `log`; kills it with SIGKILL once `n` build jobs of this
// workdir run. Returns whether it was killed that way.
bool kill_with_builds_in_flight(const History& h, const std::vector<std::string>& args, const std::string& wd,
                                const std::string& log, size_t n) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv = {const_cast<char*>(kbtest::kKbisect.c_str()), const_cast<char*>("bisect")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  bool killed = false;
  for (int i = 0; i < 2400 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (running_builds(h, wd) >= n) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return killed && WIFSIGNALED(status);
}

}  // namespace

TEST(SlurmSpeculate, KbisectAsAJobWithFourBuildersNamesTheLocalCulprit) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  const std::string local = h.config("local.yaml", kProvider, "");
  const auto a = run_kbisect({local, "--workdir", h.r.tmp() + "/w-local", "-q"});
  ASSERT_TRUE(a.ok()) << a.status_text() << "\n" << a.out << "\n" << kb::tail(a.err, 3000);
  ASSERT_EQ(last_line(a.out), h.culprit_line());
  const std::vector<std::string> local_decisions = decisions(h.r.tmp() + "/w-local/journal.jsonl");
  kb::remove_tree(h.done);

  // kbisect as a job on the measurement partition, its builds as jobs on the build partition.
  const std::string cfg = h.config("slurm.yaml", kSlurmProvider, kSlurmExtra);
  const std::string wd = h.r.tmp() + "/w-slurm", out = h.r.tmp() + "/kbisect-job.out";
  kb::slurm::write_exec_script(h.r.tmp() + "/kbisect-job.sh", {kbtest::kKbisect, "bisect", cfg, "--workdir", wd, "-q"});
  kb::slurm::SubmitOptions m;
  m.partition = "measure";
  const std::string job = kb::slurm::submit(kb::slurm::sbatch_argv(m, "kbisect-bisect-test", out, "", ""), h.r.tmp() + "/kbisect-job.sh");
  ASSERT_TRUE(kb::slurm::wait_gone({job}, 540, 0.5)) << "kbisect job " << job << " still queued";
  const std::string text = kb::file_exists(out) ? kb::read_file(out) : "";
  ASSERT_EQ(last_line(text), h.culprit_line()) << kb::tail(text, 3000);

  // Speculation changes when a build is ready, never what is decided.
  const std::string journal = wd + "/journal.jsonl";
  EXPECT_EQ(decisions(journal), local_decisions);
  const auto submitted = events(journal, "build_submitted"), cancelled = events(journal, "build_cancelled");
  int speculative = 0;
  for (const auto& ev : submitted) speculative += ev.value("speculative", false);
  EXPECT_GT(speculative, 0);
  ASSERT_GT(cancelled.size(), 0u) << "no build was cancelled";
  // Slurm's own record of each cancelled build job.
  const std::string jobcomp = kb::file_exists(slurm.jobcomp_log()) ? kb::read_file(slurm.jobcomp_log()) : "";
  for (const auto& ev : cancelled) {
    const std::string name = kb::bisect::build_job_name(ev.at("sha"), wd);
    bool seen = false;
    for (size_t i = 0; i < jobcomp.size();) {
      size_t j = jobcomp.find('\n', i);
      if (j == std::string::npos) j = jobcomp.size();
      const std::string line = jobcomp.substr(i, j - i);
      seen = seen || (line.find("Name=" + name + " ") != std::string::npos && line.find("JobState=CANCELLED") != std::string::npos);
      i = j + 1;
    }
    EXPECT_TRUE(seen) << name << " has no CANCELLED line in Slurm's job completion log:\n" << kb::tail(jobcomp, 3000);
    EXPECT_NE(ev.value("reason", "").find("CANCELLED"), std::string::npos) << ev.dump();
  }
  expect_no_build_completed_twice(h);
  // result.json counts what the journal shows.
  const json res = json::parse(kb::read_file(wd + "/result.json"));
  EXPECT_EQ(res["spent"]["builds_started"].get<size_t>(), submitted.size()) << res["spent"].dump();
  EXPECT_EQ(res["spent"]["builds_cancelled"].get<size_t>(), cancelled.size()) << res["spent"].dump();
  EXPECT_GT(res["spent"]["builds_ahead_used"].get<int>(), 0) << res["spent"].dump();
  EXPECT_GT(res["spent"]["wall_per_phase_s"]["waiting_for_builds"].get<double>(), 0) << res["spent"].dump();
  std::cout << fmt::format("[ builds   ] {} submitted ({} speculative), {} cancelled, {} built ahead and used; "
                           "{} decisions as the local run\n",
                           submitted.size(), speculative, cancelled.size(), res["spent"]["builds_ahead_used"].get<int>(),
                           local_decisions.size());
  EXPECT_EQ(res["config"]["scheduler"], "slurm");
  EXPECT_EQ(res["config"]["builders"], 4);
}

TEST(SlurmSpeculate, ResumeAfterKillWithBuildsInFlight) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  // Slurm from provider.build.slurm, the builders from the command line.
  const std::string cfg = h.config("bisect.yaml", kSlurmProvider, "");
  const std::string wd = h.r.tmp() + "/work", log = h.r.tmp() + "/first.log";
  ASSERT_TRUE(kill_with_builds_in_flight(h, {cfg, "--workdir", wd, "--builders", "4"}, wd, log, 3)) << kb::read_file(log);
  const auto b = run_kbisect({cfg, "--workdir", wd, "--resume", "--builders", "4", "-q"});
  ASSERT_TRUE(b.ok()) << b.status_text() << "\n" << b.out << "\n" << kb::tail(b.err, 3000);
  EXPECT_EQ(last_line(b.out), h.culprit_line());
  // The jobs in flight at the kill were adopted (or left their status): none completed twice.
  expect_no_build_completed_twice(h);
  EXPECT_FALSE(events(wd + "/journal.jsonl", "resume").empty());
}

// Runs a Slurm bisection of h with 4 builders, calls `disrupt` once two of its build jobs run, and expects
// the culprit with no build completed twice.
void bisect_through(const History& h, const std::function<void()>& disrupt) {
  const std::string wd = h.r.tmp() + "/work";
  kb::RunOptions o;
  o.timeout_s = 600;
  kb::StartedProcess kbisect({kbtest::kKbisect, "bisect", const_cast<History&>(h).config("bisect.yaml", kSlurmProvider, kSlurmExtra),
                              "--workdir", wd, "-q"},
                             o);
  bool done = false;
  for (int i = 0; i < 1200 && !done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (running_builds(h, wd) < 2) continue;
    disrupt();
    done = true;
  }
  ASSERT_TRUE(done) << "no two builds ran at once";
  const kb::RunResult b = kbisect.finish();
  ASSERT_TRUE(b.ok()) << b.status_text() << "\n" << b.out << "\n" << kb::tail(b.err, 3000);
  EXPECT_EQ(last_line(b.out), h.culprit_line());
  expect_no_build_completed_twice(h);
}

TEST(SlurmSpeculate, NodeDownAndUpWhileBuildsRun) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  // The node goes down (its jobs end NODE_FAIL) and comes back after 3 s.
  bisect_through(h, [&] {
    kb::RunOptions so;
    so.timeout_s = 30;
    const auto d = kb::run_process({"scontrol", "update", "NodeName=localhost", "State=DOWN", "Reason=kbisect-test"}, so);
    ASSERT_TRUE(d.ok()) << d.status_text() << " " << d.err;
    std::this_thread::sleep_for(std::chrono::seconds(3));
    // RESUME is refused while the node still completes the jobs it killed: retried until the node is back.
    std::string why;
    bool up = false;
    for (int k = 0; k < 60 && !up; ++k) {
      const auto u = kb::run_process({"scontrol", "update", "NodeName=localhost", "State=RESUME"}, so);
      const auto st = kb::run_process({"sinfo", "-h", "-n", "localhost", "-o", "%T"}, so);
      why = u.err + " / sinfo: " + st.out;
      up = st.ok() && st.out.find("down") == std::string::npos && st.out.find("drain") == std::string::npos;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    ASSERT_TRUE(up) << "the node did not come back: " << why;
  });
  // What Slurm did to the jobs on the node that went down: they ended NODE_FAIL and were submitted once
  // more (the bisection completed).
  const std::string jobcomp = kb::file_exists(slurm.jobcomp_log()) ? kb::read_file(slurm.jobcomp_log()) : "";
  std::map<std::string, int> states;
  for (size_t at = jobcomp.find("JobState="); at != std::string::npos; at = jobcomp.find("JobState=", at + 1))
    ++states[jobcomp.substr(at + 9, jobcomp.find(' ', at) - at - 9)];
  std::string seen;
  for (const auto& [st, k] : states) seen += fmt::format(" {} {}", st, k);
  std::cout << "[ jobs     ] ended as:" << seen << "\n";
  EXPECT_GT(states["NODE_FAIL"], 0) << jobcomp;
}

TEST(SlurmSpeculate, ControllerKilledAndRestartedWhileBuildsRun) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  bisect_through(h, [&] {
    // The crash comes after the controller saved every job submitted so far (it saves within seconds of a
    // change). Jobs submitted after its last save are lost with it, their ids handed out again, and Slurm
    // drains the node for the duplicate job ids: that is Slurm's loss, not what this test is about.
    long newest = -1, mark = 0;
    for (int k = 0; k < 300; ++k) {
      long top = -1;
      const auto q = kb::run_process({"squeue", "-h", "-o", "%i"}, {});
      for (const auto& [id, n] : kbtest::count_lines(q.out)) top = std::max(top, std::stol(id));
      if (top > newest) newest = top, mark = long(time(nullptr));
      if (slurm.job_state_saved_at() > mark) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    slurm.kill_controller();
    std::this_thread::sleep_for(std::chrono::seconds(5));
    ASSERT_EQ(slurm.restart_controller(), "");
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto st = kb::run_process({"sinfo", "-h", "-R"}, {});
    ASSERT_EQ(st.out, "") << "the node was drained after the restart (Slurm lost jobs):\n" << st.out;
  });
}

// The pool itself: a build the loop asks for while its cancellation is under way is built again (the
// get() waits for the cancelled job, then submits it anew) and comes back ok.
TEST(SlurmSpeculate, AskingForABuildBeingCancelledBuildsItAgain) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  const kb::bisect::BisectConfig cfg = kb::bisect::load_bisect_config(h.config("bisect.yaml", kSlurmProvider, kSlurmExtra));
  kb::git::Repo repo(cfg.repo);
  const std::string wd = h.r.tmp() + "/work";
  kb::make_dirs(wd);
  kb::bisect::Provider provider(cfg, repo, wd);
  kb::bisect::BuildPool pool(provider, 4);
  const std::string sha = h.s[9];
  pool.want({}, {sha}, {});
  for (int i = 0; i < 600 && running_builds(h, wd) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(running_builds(h, wd), 1u);
  pool.want({}, {}, {sha});  // useless now: scancel under way
  const kb::bisect::ToolchainAtCommit tc = pool.get(sha);
  EXPECT_TRUE(tc.ok) << tc.reason;
  EXPECT_FALSE(tc.cancelled);
  std::vector<std::string> seen;
  for (const auto& ev : pool.take_events()) seen.push_back(ev.value("ev", "") + (ev.value("speculative", false) ? "+" : ""));
  EXPECT_EQ(seen, (std::vector<std::string>{"build_submitted+", "build_cancelled", "build_submitted"}));
  EXPECT_EQ(h.completed()[sha], 1);
}

// A build store with Slurm builds: a second run (another workdir) takes a commit the first built, without a
// job, and builds again a commit whose build failed (a failure is not kept for others).
TEST(SlurmSpeculate, StoreTakesBuildsButNotFailures) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  History h;
  const std::string provider =
      "{build: {command: 'sh build.sh', timeout_s: 300, store: store, toolchain: {name: cc, backend: cpu, kind: clang, "
      "compiler: '{out}/cc'}, slurm: {partition: build, poll_s: 0.2}}}";
  const kb::bisect::BisectConfig cfg = kb::bisect::load_bisect_config(h.config("bisect.yaml", provider, ""));
  kb::git::Repo repo(cfg.repo);
  const std::string good = h.s[3], broken = h.s[5];
  for (const std::string wd : {"w1", "w2"}) {
    kb::make_dirs(h.r.tmp() + "/" + wd);
    kb::bisect::Provider p(cfg, repo, h.r.tmp() + "/" + wd);
    const auto g = p.get(good);
    EXPECT_TRUE(g.ok) << wd << ": " << g.reason;
    EXPECT_EQ(g.built, wd == std::string("w1")) << wd;  // the second run takes the store's build
    const auto b = p.get(broken);
    EXPECT_FALSE(b.ok) << wd;
    EXPECT_NE(b.reason.find("exit 3"), std::string::npos) << wd << ": " << b.reason;
  }
  // Slurm ran the good commit's build once and the broken one's twice (one job per run).
  const std::string jobcomp = kb::read_file(slurm.jobcomp_log());
  auto jobs_of = [&](const std::string& sha) {
    const std::string needle = "Name=" + kb::bisect::build_job_name(sha, h.r.tmp() + "/store") + " ";
    int k = 0;
    for (size_t at = jobcomp.find(needle); at != std::string::npos; at = jobcomp.find(needle, at + 1)) ++k;
    return k;
  };
  EXPECT_EQ(jobs_of(good), 1) << jobcomp;
  EXPECT_EQ(jobs_of(broken), 2) << "the failure was adopted, not built again:\n" << jobcomp;
  EXPECT_EQ(h.completed()[good], 1);
  EXPECT_TRUE(kb::file_exists(h.r.tmp() + "/store/" + good + "/.kbisect-built.json"));
  EXPECT_TRUE(kb::file_exists(h.r.tmp() + "/store/.slurm/" + good + ".out"));
}
