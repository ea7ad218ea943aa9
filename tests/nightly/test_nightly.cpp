// The nightly pipeline end to end: config errors, script quoting, local shards, a real single-node Slurm
// (sbatch --array + afterany finish job; skipped with the reason when slurm-wlm/munge are absent), a failed
// array task reported by the finish step, and two nightlies around a toolchain change that alert and
// auto-bisect to the commit (temp git repo of in-tree toolchain YAMLs, real CPU compiles and timings with
// an effect far above the machine's noise).
#include <filesystem>
#include <random>
#include <set>

#include <fmt/ranges.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "nightly/nightly.h"
#include "core/process.h"
#include "harness/results.h"
#include "bisect/slurm.h"
#include "tests/common/slurm_fixture.h"
#include "tests/common/svg_checks.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kBinary = KBISECT_BINARY_DIR "/kbisect";
const std::string kTiny = KBISECT_SOURCE_DIR "/tests/data/nightly/tiny.yaml";

struct TempDir {
  std::string path = kb::temp_dir("kb-nightly-test");
  ~TempDir() {
    kbtest::remove_test_dir(path);
  }
};

kb::RunResult kbisect(const std::vector<std::string>& args, double timeout_s = 300) {
  std::vector<std::string> argv = {kBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  kb::RunOptions o;
  o.timeout_s = timeout_s;
  return kb::run_process(argv, o);
}

std::set<std::string> case_ids(const std::string& results_json) {
  std::set<std::string> s;
  for (const auto& c : kb::load_results(results_json).cases) s.insert(c.id());
  return s;
}

std::string write(const std::string& path, const std::string& text) {
  kb::write_file_atomic(path, text);
  return path;
}

std::string tiny_config(const std::string& root, const std::string& extra = "") {
  return fmt::format("name: tiny-nightly\nsweep: {}\nshards: 4\noutput: {}\njobs: 2\ncompare: {{threshold: 50%}}\n{}", kTiny,
                     root, extra);
}

// The unsharded run of the tiny sweep (the reference case set).
std::set<std::string> unsharded(const TempDir& t) {
  auto r = kbisect({"sweep", kTiny, "-o", t.path + "/unsharded", "--format", "json"});
  EXPECT_TRUE(r.ok()) << r.status_text() << r.err;
  auto ids = case_ids(t.path + "/unsharded/results.json");
  EXPECT_EQ(ids.size(), 5u);
  return ids;
}

std::string why(const kb::RunResult& r) { return r.status_text() + "\nstdout: " + r.out + "\nstderr: " + kb::tail(r.err, 3000); }

}  // namespace

// ---- config ---------------------------------------------------------------------------------------

TEST(NightlyConfig, ErrorsNameFileLineAndField) {
  auto expect_error = [](const std::string& text, const std::vector<std::string>& needles) {
    try {
      kb::nightly::parse_nightly_config(text, "/tmp/n.yaml");
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const kb::InputError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
    }
  };
  const std::string ok = fmt::format("sweep: {}\noutput: /tmp/x\n", kTiny);
  EXPECT_NO_THROW(kb::nightly::parse_nightly_config(ok, "/tmp/n.yaml"));
  expect_error(ok + "shardz: 4\n", {"/tmp/n.yaml:3:", "shardz"});
  expect_error(ok + "shards: 0\n", {"/tmp/n.yaml:3:", "shards"});
  expect_error(ok + "compare: {threshold: lots}\n", {"/tmp/n.yaml:3:", "threshold"});
  expect_error("output: /tmp/x\n", {"sweep"});
  expect_error(fmt::format("sweep: {}/nope.yaml\noutput: /tmp/x\n", KBISECT_SOURCE_DIR), {"/tmp/n.yaml:1:", "not found"});
  expect_error(ok + "slurm: {extra: [rm -rf]}\n", {"/tmp/n.yaml:3:", "slurm.extra"});
  expect_error(ok + "bisect: {enabled: true}\n", {"/tmp/n.yaml:3:", "compiler"});
  const std::string repo = fmt::format("compiler:\n  repo: {}\n  provider:\n    in_tree: /abs.yaml\n", KBISECT_SOURCE_DIR);
  expect_error(ok + repo, {"/tmp/n.yaml:6:", "compiler.provider", "in_tree"});
  const std::string bad_kind = fmt::format("compiler:\n  repo: {}\n  provider: {{fetch: x}}\n", KBISECT_SOURCE_DIR);
  expect_error(ok + bad_kind, {"/tmp/n.yaml:5:", "compiler.provider"});
  auto c = kb::nightly::parse_nightly_config(ok + "shards: 3\nslurm: {partition: gpu, gpus: 2, time: '01:00:00', extra: [--exclusive]}\n",
                                             "/tmp/n.yaml");
  EXPECT_EQ(c.shards, 3);
  EXPECT_EQ(c.history, "/tmp/x/history.sqlite");
  auto argv = kb::slurm::sbatch_argv(c.slurm, "n", "o", "0-2", "");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--gpus=2"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--exclusive"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--array=0-2"), argv.end());
  EXPECT_THROW(kb::nightly::check_date("../x"), kb::InputError);
  EXPECT_THROW(kb::nightly::check_date("2026 12 01"), kb::InputError);
  EXPECT_NO_THROW(kb::nightly::check_date("2026-12-01"));
}

TEST(Slurm, ScriptValuesAreQuotedNotInterpreted) {
  TempDir t;
  const std::string nasty = "a'b\"c $(touch " + t.path + "/pwned) `id` ; \\ $HOME";
  kb::slurm::write_script(t.path + "/s.sh", {{"KB_VALUE", nasty}},
                          "printf '%s\\n' " + kb::slurm::sh_quote(nasty) + "\nprintf '%s\\n' \"$KB_VALUE\"\n");
  auto r = kb::run_process({"/bin/sh", t.path + "/s.sh"});
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_EQ(r.out, nasty + "\n" + nasty + "\n");
  EXPECT_FALSE(kb::file_exists(t.path + "/pwned"));
  EXPECT_THROW(kb::slurm::write_script(t.path + "/x.sh", {{"BAD NAME", "1"}}, ""), kb::InputError);
}

// ---- local scheduler ------------------------------------------------------------------------------

TEST(Nightly, LocalShardsMergeToTheUnshardedCaseSet) {
  TempDir t;
  const auto want = unsharded(t);
  const std::string cfg = write(t.path + "/nightly.yaml", tiny_config(t.path + "/out"));
  auto r = kbisect({"nightly", cfg, "--scheduler", "local", "--date", "2026-12-01", "-q"});
  ASSERT_EQ(r.exit_code, 0) << why(r);
  const std::string run = t.path + "/out/2026-12-01";
  EXPECT_EQ(case_ids(run + "/merged/results.json"), want);
  for (int i = 1; i <= 4; ++i) EXPECT_TRUE(kb::file_exists(fmt::format("{}/shard-{}/results.json", run, i)));
  json nj = json::parse(kb::read_file(run + "/nightly.json"));
  EXPECT_TRUE(nj["complete"].get<bool>());
  EXPECT_GT(nj["run_id"].get<int64_t>(), 0);
  EXPECT_TRUE(kb::file_exists(t.path + "/out/history.sqlite"));
  EXPECT_NE(kb::read_file(run + "/report.md").find("first nightly"), std::string::npos);
  // A finished night is not planned again (that would mix two measurements under one date).
  auto again = kbisect({"nightly", cfg, "--scheduler", "local", "--date", "2026-12-01", "-q"});
  EXPECT_EQ(again.exit_code, 2) << why(again);
  EXPECT_NE(again.err.find("already holds a finished nightly"), std::string::npos) << again.err;
  // The history lists the night.
  auto h = kbisect({"history", ".*", "--db", t.path + "/out/history.sqlite", "--format", "json"});
  EXPECT_TRUE(h.ok()) << why(h);
  EXPECT_NE(h.out.find("matmul_tiled"), std::string::npos);
}

// ---- Slurm ----------------------------------------------------------------------------------------

TEST(NightlySlurm, ArrayJobShardsMergeToTheUnshardedCaseSet) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  TempDir t;
  const auto want = unsharded(t);
  const std::string cfg = write(t.path + "/nightly.yaml", tiny_config(t.path + "/out", "slurm: {partition: debug, time: '00:10:00'}\n"));
  auto r = kbisect({"nightly", cfg, "--scheduler", "slurm", "--date", "2026-12-01", "--wait-s", "240", "-q"}, 300);
  ASSERT_EQ(r.exit_code, 0) << why(r);
  const std::string run = t.path + "/out/2026-12-01";
  EXPECT_NE(r.out.find("submitted: array job"), std::string::npos) << r.out;
  EXPECT_EQ(case_ids(run + "/merged/results.json"), want);
  json jobs = json::parse(kb::read_file(run + "/slurm/jobs.json"));
  EXPECT_FALSE(jobs["array_job"].get<std::string>().empty());
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(kb::read_file(fmt::format("{}/shard-{}.rc", run, i)), "0\n") << "shard " << i;
  EXPECT_TRUE(kb::file_exists(run + "/report.html"));
  // The array's tasks ran the sweep as shards 1..4 of 4 (the scripts were what sbatch ran).
  const std::string script = kb::read_file(run + "/slurm/shard.sh");
  EXPECT_NE(script.find("SLURM_ARRAY_TASK_ID"), std::string::npos);
  EXPECT_EQ(script.find("--wrap"), std::string::npos);
}

TEST(NightlySlurm, FailedArrayTaskIsReportedAndTheNightlyFails) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  TempDir t;
  const std::string cfg = write(t.path + "/nightly.yaml", tiny_config(t.path + "/out"));
  // Shard 3's output directory cannot be created (a file is in the way): its array task exits non-zero.
  const std::string run = t.path + "/out/2026-12-02";
  kb::make_dirs(run);
  write(run + "/shard-3", "in the way\n");
  auto r = kbisect({"nightly", cfg, "--scheduler", "slurm", "--date", "2026-12-02", "--wait-s", "240", "-q"}, 300);
  EXPECT_EQ(r.exit_code, 2) << why(r);
  json nj = json::parse(kb::read_file(run + "/nightly.json"));
  EXPECT_FALSE(nj["complete"].get<bool>());
  const std::string merge_error = nj.value("merge_error", "");
  EXPECT_NE(merge_error.find("shard 3/4"), std::string::npos) << merge_error;
  const std::string md = kb::read_file(run + "/report.md");
  EXPECT_NE(md.find("Incomplete nightly"), std::string::npos);
  EXPECT_NE(md.find("shard 3/4"), std::string::npos) << md;
  EXPECT_NE(kb::read_file(run + "/shard-3.rc"), "0\n");
  // Nothing was recorded for an incomplete night.
  EXPECT_EQ(nj.value("run_id", int64_t(0)), 0);
}

// ---- two nightlies around a toolchain change -> alert -> auto-bisect ------------------------------

TEST(Nightly, ToolchainChangeAlertsAndAutoBisectNamesTheCommit) {
  kbtest::GitRepo repo;
  std::vector<std::string> s;
  s.push_back(repo.commit({{"tc.yaml", kbtest::cpu_toolchain("-O3 -march=native")}}, "good: -O3"));
  TempDir t;
  const std::string cfg_text = tiny_config(
      t.path + "/out",
      fmt::format("compiler:\n  repo: {}\n  ref: main\n  provider: {{in_tree: tc.yaml}}\n"
                  "bisect:\n  threshold: 20%\n  parallel: 2\n  budgets: {{max_builds: 20, max_samples_per_step: 64}}\n"
                  "  measure: {{min_samples: 8, max_step_s: 20, warmup_s: 0.01}}\n",
                  repo.path()));
  const std::string cfg = write(t.path + "/nightly.yaml", cfg_text);
  auto r1 = kbisect({"nightly", cfg, "--scheduler", "local", "--date", "2026-12-01", "-q"}, 400);
  ASSERT_EQ(r1.exit_code, 0) << why(r1);

  s.push_back(repo.commit({{"README", "docs\n"}}, "docs only"));
  s.push_back(repo.commit({{"tc.yaml", kbtest::cpu_toolchain("-O0")}}, "switch to -O0"));
  s.push_back(repo.commit({{"README", "more docs\n"}}, "docs again"));
  auto r2 = kbisect({"nightly", cfg, "--scheduler", "local", "--date", "2026-12-02", "-q"}, 600);
  ASSERT_EQ(r2.exit_code, 1) << why(r2);
  const std::string run = t.path + "/out/2026-12-02";
  json nj = json::parse(kb::read_file(run + "/nightly.json"));
  ASSERT_FALSE(nj["alerts"].empty()) << nj.dump(2);
  EXPECT_EQ(nj["compiler"]["sha"], s.back());
  EXPECT_EQ(nj["previous"]["date"], "2026-12-01");
  bool compare_alert = false;
  for (const auto& a : nj["alerts"])
    if (a.contains("compare") && a["compare"]["effect_pct"].get<double>() > 50) compare_alert = true;
  EXPECT_TRUE(compare_alert) << nj["alerts"].dump(2);
  ASSERT_EQ(nj["bisections"].size(), 1u) << nj.dump(2);
  const auto& b = nj["bisections"][0];
  EXPECT_EQ(b["good"], s.front());
  EXPECT_EQ(b["bad"], s.back());
  EXPECT_EQ(b["status"], "ran") << b.dump(2);
  EXPECT_EQ(b["result"]["verdict"], "culprit") << b.dump(2);
  EXPECT_EQ(b["result"]["culprit"]["sha"], s[2]);
  EXPECT_EQ(b["final_line"], "culprit: " + s[2] + " switch to -O0");
  EXPECT_NE(b["note"].get<std::string>().find("build(s)"), std::string::npos) << b.dump(2);
  EXPECT_NE(b["note"].get<std::string>().find("round(s)"), std::string::npos) << b.dump(2);
  EXPECT_NE(r2.out.find("culprit: " + s[2]), std::string::npos) << r2.out;
  // The generated bisect config names the range and the alerted cases.
  const std::string bcfg = kb::read_file(run + "/bisect/1/bisect.yaml");
  EXPECT_NE(bcfg.find("parallel: 2"), std::string::npos) << bcfg;
  EXPECT_NE(bcfg.find(s.front()), std::string::npos);
  EXPECT_NE(bcfg.find("matmul_tiled"), std::string::npos);
  // Report: verdict table, alert, trend plot, link to the bisection report.
  const std::string html = kb::read_file(run + "/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("bisect/1/work/report.html"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  const std::string md = kb::read_file(run + "/report.md");
  EXPECT_NE(md.find("| worse |"), std::string::npos) << md;
  EXPECT_NE(md.find("switch to -O0"), std::string::npos);
}

// ---- a step the pairwise compare calls "same" is found by change points over the history ----------

TEST(Nightly, ChangePointAlertsOnceWherePairwiseCompareStaysQuiet) {
  TempDir t;
  // A genuine one-shard result (real shard metadata) as the template of every simulated night.
  auto r = kbisect({"sweep", kTiny, "--shard", "1/1", "--filter", "/64x64x64/", "-o", t.path + "/template", "--format", "json"});
  ASSERT_TRUE(r.ok()) << why(r);
  const kb::RunResults tmpl = kb::load_results(t.path + "/template/results.json");
  ASSERT_EQ(tmpl.cases.size(), 1u);
  // Compare needs a 50% change to say "worse"; the step below is 3%.
  const std::string cfgp = write(
      t.path + "/nightly.yaml",
      fmt::format("name: cp\nsweep: {}\nshards: 1\noutput: {}/out\ncompare: {{threshold: 50%}}\n"
                  "changepoints: {{last: 30, alpha: 0.05, min_segment: 3, min_change: 1%}}\n",
                  kTiny, t.path));
  const kb::nightly::NightlyConfig cfg = kb::nightly::load_nightly_config(cfgp);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.01);  // 1% CV per sample, as measured on this CPU
  int first_alert = -1;
  std::vector<int> codes;
  for (int night = 0; night < 14; ++night) {
    const std::string date = fmt::format("2026-11-{:02d}", night + 1);
    const auto plan = kb::nightly::make_plan(cfg, date, "local", kBinary);
    kb::RunResults res = tmpl;
    for (auto& c : res.cases) {
      const double level = 1e-3 * (night >= 7 ? 1.03 : 1.0);
      c.samples_s.clear();
      for (int i = 0; i < 40; ++i) c.samples_s.push_back(level * std::exp(noise(rng)));
      c.summary = kb::summarize(c.samples_s, c.shape.flops());
    }
    kb::make_dirs(plan.shard_dir(1));
    kb::save_results(res, plan.shard_dir(1) + "/results.json");
    const auto fr = kb::nightly::finish(plan.run_dir);
    codes.push_back(kb::exit_code_for(fr.outcome));
    const json nj = json::parse(kb::read_file(fr.nightly_json));
    // The pairwise compare never alerts on a 3% step with a 50% threshold.
    for (const auto& a : nj["alerts"]) EXPECT_FALSE(a.contains("compare")) << date << a.dump();
    if (night < 7) {
      EXPECT_EQ(kb::exit_code_for(fr.outcome), 0) << date << ": flat history raised an alert: " << nj["alerts"].dump();
      continue;
    }
    if (kb::exit_code_for(fr.outcome) == 1 && first_alert < 0) {
      first_alert = night;
      ASSERT_EQ(nj["alerts"].size(), 1u);
      const auto& a = nj["alerts"][0];
      // The step is at 11-08; with few nights after it the estimate may sit a night early.
      const std::string cp_date = a["changepoint"]["date"];
      EXPECT_TRUE(cp_date == "2026-11-07" || cp_date == "2026-11-08" || cp_date == "2026-11-09") << a.dump();
      EXPECT_NEAR(a["changepoint"]["rel_change"].get<double>(), 0.03, 0.01);
      EXPECT_FALSE(a["known"].get<bool>());
      const std::string html = kb::read_file(fr.report_html);
      EXPECT_NE(html.find("<svg"), std::string::npos);
      EXPECT_NE(html.find("change +"), std::string::npos);
      // The trend plot: round y ticks, and a tooltip naming each night (its date and median).
      EXPECT_TRUE(kbtest::round_ticks(kbtest::y_tick_labels(html)));
      for (int n = 0; n <= night; ++n)
        EXPECT_GE(kbtest::tooltips_with(html, fmt::format("2026-11-{:02d} ", n + 1)), 1u) << "night " << n + 1;
    } else if (first_alert >= 0) {
      // The same change point is not alerted again (it is listed as still regressed).
      EXPECT_EQ(kb::exit_code_for(fr.outcome), 0) << date << nj["alerts"].dump();
      ASSERT_FALSE(nj["alerts"].empty());
      EXPECT_TRUE(nj["alerts"][0]["known"].get<bool>());
    }
  }
  EXPECT_GE(first_alert, 8);
  EXPECT_LE(first_alert, 12) << "exit codes per night: " << fmt::format("{}", fmt::join(codes, ","));
}

// ---- the same auto-bisect as a Slurm job (bisect.scheduler: slurm), the nightly itself on Slurm -------

TEST(NightlySlurm, AutoBisectRunsAsASlurmJob) {
  kbtest::LocalSlurm slurm;
  if (std::string reason = slurm.start(); !reason.empty()) GTEST_SKIP() << "no local Slurm: " << reason;
  kbtest::GitRepo repo;
  std::vector<std::string> s;
  s.push_back(repo.commit({{"tc.yaml", kbtest::cpu_toolchain("-O3 -march=native")}}, "good: -O3"));
  TempDir t;
  const std::string cfg = write(
      t.path + "/nightly.yaml",
      tiny_config(t.path + "/out",
                  fmt::format("compiler:\n  repo: {}\n  provider: {{in_tree: tc.yaml}}\n"
                              "bisect:\n  threshold: 20%\n  scheduler: slurm\n"
                              "  budgets: {{max_builds: 20, max_samples_per_step: 64}}\n"
                              "  measure: {{min_samples: 8, max_step_s: 20, warmup_s: 0.01}}\n",
                              repo.path())));
  auto r1 = kbisect({"nightly", cfg, "--scheduler", "slurm", "--date", "2026-12-01", "--wait-s", "240", "-q"}, 300);
  ASSERT_EQ(r1.exit_code, 0) << why(r1);
  s.push_back(repo.commit({{"tc.yaml", kbtest::cpu_toolchain("-O0")}}, "switch to -O0"));
  s.push_back(repo.commit({{"README", "docs\n"}}, "docs"));
  auto r2 = kbisect({"nightly", cfg, "--scheduler", "slurm", "--date", "2026-12-02", "--wait-s", "240", "-q"}, 300);
  ASSERT_EQ(r2.exit_code, 1) << why(r2);
  const std::string run = t.path + "/out/2026-12-02";
  const json nj = json::parse(kb::read_file(run + "/nightly.json"));
  ASSERT_EQ(nj["bisections"].size(), 1u) << nj.dump(2);
  const auto& b = nj["bisections"][0];
  ASSERT_EQ(b["status"], "submitted") << b.dump(2);
  const std::string job = b["job_id"];
  ASSERT_TRUE(kb::slurm::wait_gone({job}, 240, 0.5)) << "bisect job " << job << " still queued";
  const std::string result = run + "/bisect/1/work/result.json";
  ASSERT_TRUE(kb::file_exists(result)) << kb::tail(kb::read_file(run + "/bisect/1/bisect.out"), 3000);
  const json res = json::parse(kb::read_file(result));
  EXPECT_EQ(res["verdict"], "culprit") << res.dump(2);
  EXPECT_EQ(res["culprit"]["sha"], s[1]);
  EXPECT_NE(kb::read_file(run + "/report.html").find("bisect/1/work/report.html"), std::string::npos);
}

// The shipped example config stays valid (its site paths swapped for this checkout).
TEST(NightlyConfig, ShippedSlurmExampleParses) {
  const std::string path = KBISECT_SOURCE_DIR "/scripts/slurm/nightly.yaml";
  std::string text = kb::read_file(path);
  const std::string site_repo = "/shared/src/llvm-project";
  ASSERT_NE(text.find(site_repo), std::string::npos);
  text.replace(text.find(site_repo), site_repo.size(), KBISECT_SOURCE_DIR);
  const auto c = kb::nightly::parse_nightly_config(text, path);
  EXPECT_EQ(c.shards, 8);
  EXPECT_EQ(c.slurm.gres, "gpu:h100:1");
  EXPECT_EQ(c.bisect.scheduler, "slurm");
  ASSERT_TRUE(c.compiler.has_value());
  EXPECT_TRUE(kb::file_exists(c.sweep)) << c.sweep;
}
