// Nightly history in one SQLite file (the C API). The schema is versioned with PRAGMA user_version and
// migrated on open; every recorded run is one transaction (rollback journal, synchronous=FULL), so a
// process killed mid-write leaves the database as it was before that run.
//
// Tables (version 1):
//   runs    (id, date, kbisect_sha, machine, label, sweep, case_list_hash, toolchains JSON [{name,
//            identity, ...}], compiler_commits JSON {toolchain name: commit sha}, environment JSON,
//            extra JSON, started, finished, wall_s, recorded_at)
//   cases   (run_id, case_id, key, kernel, backend, params JSON, dtype, shape, toolchain,
//            toolchain_identity, tier, status, reason, median_s, ci_rel, noise, samples, code_hash,
//            static_metrics JSON, record JSON (the full case record minus its raw samples))
//   samples (run_id, case_id, samples_s JSON array, clocks_mhz JSON array)
// "Run order" is (date, id): a back-filled older nightly sorts where its date says.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"
#include "stats/changepoint.h"

namespace kb {

struct RunMeta {
  std::string date;         // ISO 8601 (or YYYY-MM-DD); empty -> the run's `started`
  std::string kbisect_sha;  // empty -> environment["kbisect_sha"]
  std::string machine;      // empty -> environment["host"]
  std::string label;        // free text ("nightly", "nightly-2026-12-02", ...)
  std::map<std::string, std::string> compiler_commits;  // toolchain name -> compiler commit sha
};

struct RunRow {
  int64_t id = 0;
  std::string date, kbisect_sha, machine, label, sweep, case_list_hash;
  nlohmann::json toolchains;  // array [{name, identity, ...}] as in the run's environment
  std::map<std::string, std::string> compiler_commits;
  int64_t cases = 0, ok_cases = 0;
};

struct SeriesPoint {
  int64_t run_id = 0;
  std::string date, label;
  std::string case_id;  // CaseResult::id() (kernel[params]/dtype/shape/toolchain name)
  std::string toolchain_identity;
  std::string status;   // ok | skipped | incorrect | failed
  double median_s = 0, ci_rel = 0;
  int64_t samples = 0;
};

class History {
 public:
  // Opens the file, or creates it when `create` is set; creates or migrates the schema. Throws
  // InputError naming the file when it does not exist (and `create` is off), is not a kbisect history,
  // or was written by a newer schema version.
  explicit History(const std::string& db_path, bool create = true);
  ~History();
  History(History&&) noexcept;
  History& operator=(History&&) noexcept;
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  static constexpr int kSchemaVersion = 1;
  int schema_version() const;

  // Records a (merged) run in one transaction; returns its run id.
  int64_t record(const RunResults& merged, const RunMeta& meta);

  // Runs in run order; last_n > 0 keeps the last N.
  std::vector<RunRow> runs(int last_n = 0) const;
  std::optional<RunRow> run(int64_t run_id) const;

  // Points of every case whose id matches `case_regex` (ECMAScript, search), grouped by case id
  // (ascending), each case's points in run order; last_n > 0 restricts to the last N runs.
  std::vector<SeriesPoint> series(const std::string& case_regex, int last_n = 0) const;
  // The same, as case id -> points.
  std::map<std::string, std::vector<SeriesPoint>> series_by_case(const std::string& case_regex,
                                                                 int last_n = 0) const;

  // The run as recorded (cases with raw samples), or nullopt for an unknown id.
  std::optional<RunResults> load_run(int64_t run_id) const;

  // PRAGMA integrity_check == "ok".
  bool integrity_ok() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Change points per case of a history series (History::series): only "ok" points are used; fills
// case_id, run_id and date.
std::vector<ChangePoint> detect_in_series(const std::vector<SeriesPoint>& points, const ChangePointConfig& cfg);

}  // namespace kb
