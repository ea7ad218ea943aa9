// kbisect history through the binary: --record (with metadata), --runs, series in table/csv/json with
// change points marked, and bad input (regex, --compiler-commit, a file that is not a history, a database
// that does not exist) -> exit 2.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/fsutil.h"
#include "core/process.h"
#include "harness/results.h"
#include "stats/stats.h"

using namespace kb;

namespace {

RunResult kbisect(std::vector<std::string> args) {
  args.insert(args.begin(), KBISECT_BINARY_DIR "/kbisect");
  return run_process(args);
}

// One nightly: two cases; the second gets 3% slower from night 10 on.
RunResults night(int i) {
  RunResults r;
  r.name = "nightly";
  r.started = "2026-11-" + std::string(i + 1 < 10 ? "0" : "") + std::to_string(i + 1) + "T01:00:00Z";
  r.environment = {{"host", "runner"}, {"kbisect_sha", "abc"}};
  stats::Rng rng(uint64_t(100 + i));
  for (int k = 0; k < 2; ++k) {
    CaseResult c;
    c.kernel = "matmul_tiled";
    c.backend = "cpu";
    c.shape = {k ? 256 : 128, 128, 128};
    c.toolchain = "clang-nightly";
    c.status = CaseStatus::ok;
    double t = 1e-3 * (k && i >= 10 ? 1.03 : 1.0) * std::exp(0.002 * rng.normal());
    for (int s = 0; s < 20; ++s) c.samples_s.push_back(t * (1 + 0.001 * rng.normal()));
    c.summary = summarize(c.samples_s, c.shape.flops());
    r.cases.push_back(c);
  }
  return r;
}

}  // namespace

TEST(HistoryCli, RecordListAndSeriesWithChangePoints) {
  std::string dir = temp_dir("kbisect-history-cli");
  std::string db = dir + "/h.sqlite";
  for (int i = 0; i < 16; ++i) {
    std::string f = dir + "/n" + std::to_string(i) + ".json";
    save_results(night(i), f);
    auto r = kbisect({"history", "--db", db, "--record", f, "--label", "nightly", "--compiler-commit",
                      "clang-nightly=c" + std::to_string(i)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("recorded run " + std::to_string(i + 1)), std::string::npos) << r.out;
  }
  auto runs = kbisect({"history", "--db", db, "--runs", "--format", "json", "--last", "3"});
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  auto rj = nlohmann::json::parse(runs.out);
  ASSERT_EQ(rj.size(), 3u);
  EXPECT_EQ(rj[2]["compiler_commits"]["clang-nightly"], "c15");
  EXPECT_EQ(rj[0]["date"], "2026-11-14T01:00:00Z");
  EXPECT_EQ(rj[0]["machine"], "runner");

  auto js = kbisect({"history", "256x128x128", "--db", db, "--format", "json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_EQ(j["cases"][0]["points"].size(), 16u);
  ASSERT_EQ(j["cases"][0]["change_points"].size(), 1u);
  EXPECT_EQ(j["cases"][0]["change_points"][0]["index"], 10);
  EXPECT_NEAR(j["cases"][0]["change_points"][0]["rel_change"].get<double>(), 0.03, 0.005);

  auto flat = kbisect({"history", "128x128x128", "--db", db, "--format", "json"});
  ASSERT_EQ(flat.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(flat.out)["cases"][0]["change_points"].size(), 0u);

  auto table = kbisect({"history", "256x128x128", "--db", db, "--last", "12"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("<< change +"), std::string::npos) << table.out;

  auto csv = kbisect({"history", ".", "--db", db, "--format", "csv", "--no-change-points"});
  ASSERT_EQ(csv.exit_code, 0);
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1 + 32);

  auto badre = kbisect({"history", "([", "--db", db});
  EXPECT_EQ(badre.exit_code, 2);
  EXPECT_NE(badre.err.find("'(['"), std::string::npos) << badre.err;
  auto badcc = kbisect({"history", "--db", db, "--record", dir + "/n0.json", "--compiler-commit", "nosha"});
  EXPECT_EQ(badcc.exit_code, 2);
  EXPECT_NE(badcc.err.find("'nosha'"), std::string::npos) << badcc.err;
  write_file_atomic(dir + "/text", "not a database at all, only a line of text that is long enough....\n");
  auto notdb = kbisect({"history", "--db", dir + "/text", "--runs"});
  EXPECT_EQ(notdb.exit_code, 2);
  EXPECT_NE(notdb.err.find(dir + "/text"), std::string::npos) << notdb.err;
  remove_tree(dir);
}

TEST(HistoryCli, MissingDatabaseIsBadInputAndIsNotCreated) {
  std::string dir = temp_dir("kbisect-history-cli");
  std::string db = dir + "/missing.sqlite";
  for (std::vector<std::string> args : {std::vector<std::string>{"history", "matmul", "--db", db},
                                        std::vector<std::string>{"history", "--db", db, "--runs"}}) {
    auto r = kbisect(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(db + ": the history database does not exist"), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(db));
  }
  remove_tree(dir);
}
