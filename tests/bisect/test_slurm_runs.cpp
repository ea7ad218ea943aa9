// Expensive samples with every run a Slurm job (measure.slurm, bisect/run_job.h) on the single-node Slurm of the
// test fixture (skipped with the reason when slurm-wlm/munge are absent): the bisection of issue 49's history
// (tests/common/l3_fixture.h) with two runs in flight names the culprit, each run a job of its own whose script
// and output stay in WORKDIR/slurm/runs; and a run whose job fails stops the bisection with the job named.
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/journal.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/l3_fixture.h"
#include "tests/common/slurm_fixture.h"

using json = nlohmann::json;

namespace {

kb::RunResult bisect(const std::string& cfg, const std::string& wd) {
  kb::RunOptions o;
  o.timeout_s = 600;
  return kb::run_process({kbtest::kKbisect, "bisect", cfg, "--workdir", wd}, o);
}

}  // namespace

TEST(SlurmRuns, EveryRunAJobTwoInFlight) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  if (kb::which("clang++-19").empty()) GTEST_SKIP() << "needs clang++-19";
  kbtest::L3History h;
  const std::string cfg = kbtest::write_tmp(
      h.repo, h.config("parallel: 2\nmeasure: {slurm: {partition: measure, time: '00:05:00', poll_s: 0.2}}\n"), "l3.yaml");
  const std::string wd = h.repo.tmp() + "/work";
  const auto r = bisect(cfg, wd);
  ASSERT_EQ(r.exit_code, 0) << r.status_text() << "\n" << r.out << "\n" << kb::tail(r.err, 3000);
  EXPECT_NE(r.out.find("culprit: " + h.shas[kbtest::kCulprit]), std::string::npos) << r.out;
  std::set<std::string> jobs;
  int runs = 0;
  for (const json& e : kb::bisect::read_journal(wd + "/journal.jsonl")) {
    if (e.value("ev", "") != "run") continue;
    ++runs;
    ASSERT_TRUE(e.contains("job")) << e.dump();
    EXPECT_TRUE(jobs.insert(e["job"].get<std::string>()).second) << "job " << e["job"] << " ran two runs";
    const std::string stem = wd + "/slurm/runs/" + e["sha"].get<std::string>().substr(0, 12) + "-" +
                             std::to_string(e["ordinal"].get<int>());
    EXPECT_TRUE(kb::file_exists(stem + ".sh")) << stem;
    EXPECT_NE(kb::read_file(stem + ".out").find("throughput: "), std::string::npos) << stem;
  }
  EXPECT_GT(runs, 6);
  const json res = json::parse(kb::read_file(wd + "/result.json"));
  EXPECT_EQ(res["spent"]["runs"], runs);
  EXPECT_EQ(res["spent"]["max_in_flight"], 2);
  EXPECT_EQ(res["config"]["scheduler"], "slurm");
}

TEST(SlurmRuns, AFailedRunNamesItsJob) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  if (kb::which("clang++-19").empty()) GTEST_SKIP() << "needs clang++-19";
  kbtest::L3History h;
  kb::write_file_atomic(h.job, "#!/bin/sh\necho 'out of memory' >&2\nexit 7\n");
  ASSERT_TRUE(kb::run_process({"chmod", "+x", h.job}, {}).ok());
  const std::string cfg =
      kbtest::write_tmp(h.repo, h.config("measure: {slurm: {partition: measure, poll_s: 0.2}}\n"), "l3.yaml");
  const auto r = bisect(cfg, h.repo.tmp() + "/work");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("exited 7"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Slurm job"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("out of memory"), std::string::npos) << r.err;
}
