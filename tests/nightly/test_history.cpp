// History in SQLite: schema creation and versioning, record/runs/series/load_run round trips, refusing
// foreign or newer files, and the database surviving a writer killed mid-write (SIGKILL at seeded
// random moments; afterwards integrity_check is ok and every run present is complete).
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/fsutil.h"
#include "nightly/history.h"
#include "stats/stats.h"

using namespace kb;

namespace {

struct TmpDir {
  std::string path = temp_dir("kbisect-history-test");
  ~TmpDir() { remove_tree(path); }
};

CaseResult make_case(int m, const std::string& tc, double median, int n_samples, uint64_t seed) {
  CaseResult c;
  c.kernel = "matmul_tiled";
  c.backend = "cpu";
  c.params = Params{{"BM", int64_t(64)}, {"BN", int64_t(64)}};
  c.shape = {m, 64, 64};
  c.dtype = DType::f32;
  c.toolchain = tc;
  c.toolchain_identity = "id-" + tc;
  c.status = CaseStatus::ok;
  c.has_static = true;
  c.code_hash = "abc";
  c.metrics = {{"registers", 96}, {"spills", 0}};
  stats::Rng rng(seed);
  for (int i = 0; i < n_samples; ++i) c.samples_s.push_back(median * (1 + 0.01 * rng.normal()));
  c.summary = summarize(c.samples_s, c.shape.flops());
  return c;
}

RunResults make_run(int cases, int n_samples, double scale, uint64_t seed) {
  RunResults r;
  r.name = "nightly";
  r.started = "2026-12-01T01:00:00Z";
  r.finished = "2026-12-01T02:00:00Z";
  r.environment = {{"host", "runner-1"}, {"kbisect_sha", "deadbeef"},
                   {"toolchains", {{{"name", "clang-nightly"}, {"identity", "id-clang-nightly"}}}}};
  r.extra = {{"case_list_hash", "h123"}};
  for (int i = 0; i < cases; ++i) r.cases.push_back(make_case(16 * (i + 1), "clang-nightly", 1e-3 * scale * (i + 1), n_samples, seed + uint64_t(i)));
  return r;
}

}  // namespace

TEST(History, CreatesVersionedSchemaAndRoundTripsARun) {
  TmpDir d;
  std::string db = d.path + "/h.sqlite";
  int64_t id1, id2;
  {
    History h(db);
    EXPECT_EQ(h.schema_version(), History::kSchemaVersion);
    auto r = make_run(3, 50, 1.0, 1);
    r.cases[1].status = CaseStatus::skipped;
    r.cases[1].reason = "no device";
    r.cases[1].samples_s.clear();
    r.cases[1].summary = summarize({}, 0);
    RunMeta m;
    m.date = "2026-12-01";
    m.label = "nightly";
    m.compiler_commits = {{"clang-nightly", "0123456789abcdef"}};
    id1 = h.record(r, m);
    m.date = "2026-12-02";
    m.kbisect_sha = "cafe";
    id2 = h.record(make_run(3, 50, 1.01, 7), m);
    EXPECT_GT(id2, id1);
  }
  History h(db);  // reopen: no migration needed, data kept
  EXPECT_TRUE(h.integrity_ok());
  auto runs = h.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, id1);
  EXPECT_EQ(runs[0].date, "2026-12-01");
  EXPECT_EQ(runs[0].kbisect_sha, "deadbeef");  // from the environment
  EXPECT_EQ(runs[1].kbisect_sha, "cafe");      // given
  EXPECT_EQ(runs[0].machine, "runner-1");
  EXPECT_EQ(runs[0].sweep, "nightly");
  EXPECT_EQ(runs[0].case_list_hash, "h123");
  EXPECT_EQ(runs[0].cases, 3);
  EXPECT_EQ(runs[0].ok_cases, 2);
  EXPECT_EQ(runs[0].compiler_commits.at("clang-nightly"), "0123456789abcdef");
  EXPECT_EQ(runs[0].toolchains[0]["identity"], "id-clang-nightly");
  ASSERT_EQ(h.runs(1).size(), 1u);
  EXPECT_EQ(h.runs(1)[0].id, id2);
  ASSERT_TRUE(h.run(id2));
  EXPECT_FALSE(h.run(9999));

  auto orig = make_run(3, 50, 1.0, 1);
  auto loaded = h.load_run(id1);
  ASSERT_TRUE(loaded);
  ASSERT_EQ(loaded->cases.size(), 3u);
  EXPECT_EQ(loaded->cases[0].samples_s, orig.cases[0].samples_s);  // raw samples, bit for bit
  EXPECT_EQ(loaded->cases[0].id(), orig.cases[0].id());
  EXPECT_EQ(loaded->cases[0].metrics, orig.cases[0].metrics);
  EXPECT_EQ(loaded->cases[1].status, CaseStatus::skipped);
  EXPECT_EQ(loaded->cases[1].reason, "no device");
  EXPECT_EQ(loaded->environment["host"], "runner-1");
  EXPECT_FALSE(h.load_run(12345));

  // Series: by case id regex, in run order.
  auto s = h.series("/f32/48x64x64/");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].run_id, id1);
  EXPECT_EQ(s[1].run_id, id2);
  EXPECT_NEAR(s[1].median_s / s[0].median_s, 1.01, 0.01);
  auto all = h.series_by_case(".*");
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(h.series(".*", 1).size(), 3u);  // last run only
  EXPECT_EQ(h.series("nothing-matches").size(), 0u);
  EXPECT_THROW(h.series("(["), InputError);
}

TEST(History, BackfilledRunSortsByDate) {
  TmpDir d;
  History h(d.path + "/h.sqlite");
  RunMeta m;
  m.date = "2026-12-05";
  h.record(make_run(1, 5, 1, 1), m);
  m.date = "2026-12-03";
  int64_t older = h.record(make_run(1, 5, 1, 2), m);
  auto runs = h.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, older);
}

TEST(History, RefusesForeignAndNewerDatabases) {
  TmpDir d;
  std::string foreign = d.path + "/foreign.sqlite";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  try {
    History h(foreign);
    ADD_FAILURE() << "opened a foreign database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a kbisect history"), std::string::npos) << e.what();
  }
  std::string newer = d.path + "/newer.sqlite";
  { History h(newer); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  try {
    History h(newer);
    ADD_FAILURE() << "opened a newer schema";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
  std::string text = d.path + "/text.sqlite";
  write_file_atomic(text, "this is not a database, just some text that is long enough for a header....\n");
  EXPECT_THROW(History h(text), InputError);
}

TEST(History, DuplicateCaseInARunIsRejectedAndNothingIsWritten) {
  TmpDir d;
  History h(d.path + "/h.sqlite");
  auto r = make_run(2, 5, 1, 1);
  r.cases.push_back(r.cases[0]);
  EXPECT_THROW(h.record(r, {}), InputError);
  EXPECT_EQ(h.runs().size(), 0u);
}

// A writer recording run after run (each 40 cases x 300 samples, one transaction) is SIGKILLed at a
// seeded random moment, 8 times over the same file. After each kill the file opens, integrity_check
// says ok, and every run present has all its cases and samples.
TEST(History, SurvivesAKillMidWrite) {
  TmpDir d;
  std::string db = d.path + "/h.sqlite";
  const int kCases = 40, kSamples = 300;
  stats::Rng rng(2026);
  int64_t prev_runs = 0;
  int kills_with_progress = 0;
  for (int round = 0; round < 8; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        History h(db);
        for (int i = 0; i < 100000; ++i) h.record(make_run(kCases, kSamples, 1, uint64_t(i)), {});
      } catch (...) {
        _exit(3);
      }
      _exit(0);
    }
    // Wait a random 50..400 ms, then kill.
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng.below(350)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited on its own with status " << status;

    History h(db);
    ASSERT_TRUE(h.integrity_ok()) << "round " << round;
    auto runs = h.runs();
    EXPECT_GE(int64_t(runs.size()), prev_runs);
    if (int64_t(runs.size()) > prev_runs) ++kills_with_progress;
    prev_runs = int64_t(runs.size());
    for (const auto& r : runs) {
      ASSERT_EQ(r.cases, kCases) << "run " << r.id << " incomplete after round " << round;
      auto full = h.load_run(r.id);
      ASSERT_TRUE(full);
      for (const auto& c : full->cases) ASSERT_EQ(c.samples_s.size(), size_t(kSamples)) << "run " << r.id;
    }
  }
  // The writer made progress between kills (so kills landed among real writes, not before the first).
  EXPECT_GE(kills_with_progress, 4);
}
