#include "nightly/history.h"

#include <regex>
#include <set>

#include <fmt/format.h>
#include <sqlite3.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"

namespace kb {

using json = nlohmann::json;

namespace {

// Schema migrations: migrations[v] takes the schema from version v to v + 1.
const char* const kMigrations[] = {
    // 0 -> 1
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  date TEXT NOT NULL,
  kbisect_sha TEXT NOT NULL DEFAULT '',
  machine TEXT NOT NULL DEFAULT '',
  label TEXT NOT NULL DEFAULT '',
  sweep TEXT NOT NULL DEFAULT '',
  case_list_hash TEXT NOT NULL DEFAULT '',
  toolchains TEXT NOT NULL DEFAULT '[]',
  compiler_commits TEXT NOT NULL DEFAULT '{}',
  environment TEXT NOT NULL DEFAULT '{}',
  extra TEXT NOT NULL DEFAULT 'null',
  kind TEXT NOT NULL DEFAULT 'sweep',
  sweep_file TEXT NOT NULL DEFAULT '',
  started TEXT NOT NULL DEFAULT '',
  finished TEXT NOT NULL DEFAULT '',
  wall_s REAL NOT NULL DEFAULT 0,
  recorded_at TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_order ON runs(date, id);
CREATE TABLE cases (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  case_id TEXT NOT NULL,
  key TEXT NOT NULL,
  kernel TEXT NOT NULL,
  backend TEXT NOT NULL,
  params TEXT NOT NULL,
  dtype TEXT NOT NULL,
  shape TEXT NOT NULL,
  toolchain TEXT NOT NULL,
  toolchain_identity TEXT NOT NULL,
  tier TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL,
  median_s REAL,
  ci_rel REAL,
  noise REAL,
  samples INTEGER NOT NULL,
  code_hash TEXT NOT NULL,
  static_metrics TEXT NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (run_id, case_id)
);
CREATE INDEX cases_by_case ON cases(case_id, run_id);
CREATE TABLE samples (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_id TEXT NOT NULL,
  samples_s TEXT NOT NULL,
  clocks_mhz TEXT NOT NULL,
  PRIMARY KEY (run_id, case_id)
);
CREATE TABLE kbisect_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO kbisect_meta(key, value) VALUES ('application', 'kbisect-history');
)sql",
};
constexpr int kNumMigrations = int(sizeof(kMigrations) / sizeof(kMigrations[0]));
static_assert(kNumMigrations == History::kSchemaVersion);

// A prepared statement (finalized on scope exit).
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), int(sql.size()), &st_, nullptr) != SQLITE_OK)
      throw EnvError(fmt::format("{}: SQLite prepare failed: {}", path, sqlite3_errmsg(db)));
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& s) {
    check(sqlite3_bind_text(st_, i, s.data(), int(s.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(st_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(st_, i, v));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(st_, i));
    return *this;
  }
  // true: a row is ready; false: done.
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw EnvError(fmt::format("{}: SQLite: {}", path_, sqlite3_errmsg(db_)));
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  std::string text(int c) const {
    auto p = sqlite3_column_text(st_, c);
    return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(st_, c))) : std::string();
  }
  int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
  double f64(int c) const { return sqlite3_column_double(st_, c); }
  bool is_null(int c) const { return sqlite3_column_type(st_, c) == SQLITE_NULL; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw EnvError(fmt::format("{}: SQLite bind failed: {}", path_, sqlite3_errmsg(db_)));
  }
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  std::string path_;
};

json parse_json_column(const std::string& text, const std::string& what, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: damaged {} JSON in the history: {}", path, what, e.what()));
  }
}

std::string now_utc() { return now_iso8601(); }

}  // namespace

struct History::Impl {
  sqlite3* db = nullptr;
  std::string path;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errmsg(db);
      sqlite3_free(err);
      throw EnvError(fmt::format("{}: SQLite: {}", path, msg));
    }
  }
  int user_version() {
    Stmt st(db, "PRAGMA user_version", path);
    return st.step() ? int(st.i64(0)) : 0;
  }
  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }

  // Run order subquery: ids of the last N runs (all when n <= 0).
  std::string last_runs_clause(int last_n) const {
    if (last_n <= 0) return "SELECT id FROM runs";
    return fmt::format("SELECT id FROM (SELECT id FROM runs ORDER BY date DESC, id DESC LIMIT {})", last_n);
  }

  RunRow row_from(const Stmt& st) const {
    RunRow r;
    r.id = st.i64(0);
    r.date = st.text(1);
    r.kbisect_sha = st.text(2);
    r.machine = st.text(3);
    r.label = st.text(4);
    r.sweep = st.text(5);
    r.case_list_hash = st.text(6);
    r.toolchains = parse_json_column(st.text(7), "toolchains", path);
    json cc = parse_json_column(st.text(8), "compiler_commits", path);
    for (auto it = cc.begin(); it != cc.end(); ++it)
      if (it->is_string()) r.compiler_commits[it.key()] = it->get<std::string>();
    r.cases = st.i64(9);
    r.ok_cases = st.i64(10);
    return r;
  }
};

static const char* kRunRowSelect =
    "SELECT r.id, r.date, r.kbisect_sha, r.machine, r.label, r.sweep, r.case_list_hash, r.toolchains, "
    "r.compiler_commits, (SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id), "
    "(SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'ok') FROM runs r ";

History::History(const std::string& db_path, bool create) : impl_(std::make_unique<Impl>()) {
  impl_->path = db_path;
  if (!create && !file_exists(db_path))
    throw InputError(fmt::format("{}: the history database does not exist (record a run with --record first)", db_path));
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(db_path.c_str(), &impl_->db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = impl_->db ? sqlite3_errmsg(impl_->db) : sqlite3_errstr(rc);
    throw InputError(fmt::format("{}: cannot open the history database: {}", db_path, msg));
  }
  sqlite3_busy_timeout(impl_->db, 10000);
  sqlite3_extended_result_codes(impl_->db, 1);
  try {
    // Rollback journal with full syncs: a killed writer leaves a hot journal that the next open rolls back.
    impl_->exec("PRAGMA foreign_keys = ON; PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL;");
    int v = impl_->user_version();
    if (v > kSchemaVersion)
      throw InputError(fmt::format("{}: history schema version {} is newer than this kbisect's ({}); upgrade kbisect",
                                   db_path, v, kSchemaVersion));
    if (v == 0) {
      // A non-empty file without our version is not a kbisect history.
      Stmt st(impl_->db, "SELECT COUNT(*) FROM sqlite_master", db_path);
      if (st.step() && st.i64(0) > 0)
        throw InputError(fmt::format("{}: an SQLite database that is not a kbisect history (user_version 0)", db_path));
    }
    for (; v < kSchemaVersion; ++v) {
      impl_->exec("BEGIN IMMEDIATE");
      try {
        impl_->exec(kMigrations[v]);
        impl_->exec(fmt::format("PRAGMA user_version = {}", v + 1));
        impl_->exec("COMMIT");
      } catch (...) {
        sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
    }
  } catch (const EnvError& e) {
    // "file is not a database" and the like are bad input, not a missing environment.
    throw InputError(e.what());
  }
}

History::~History() = default;
History::History(History&&) noexcept = default;
History& History::operator=(History&&) noexcept = default;

int History::schema_version() const { return impl_->user_version(); }
const std::string& History::path() const { return impl_->path; }

int64_t History::record(const RunResults& merged, const RunMeta& meta) {
  auto& I = *impl_;
  const json& env = merged.environment;
  std::string date = !meta.date.empty() ? meta.date : merged.started;
  if (date.empty()) date = now_utc();
  std::string sha = !meta.kbisect_sha.empty() ? meta.kbisect_sha
                    : env.is_object() && env.contains("kbisect_sha") && env["kbisect_sha"].is_string()
                        ? env["kbisect_sha"].get<std::string>()
                        : std::string();
  std::string machine = !meta.machine.empty() ? meta.machine
                        : env.is_object() && env.contains("host") && env["host"].is_string()
                            ? env["host"].get<std::string>()
                            : std::string();
  json toolchains = env.is_object() && env.contains("toolchains") ? env["toolchains"] : json::array();
  json commits = json::object();
  for (const auto& [k, v] : meta.compiler_commits) commits[k] = v;
  std::string clh;
  if (merged.extra.is_object() && merged.extra.contains("case_list_hash") && merged.extra["case_list_hash"].is_string())
    clh = merged.extra["case_list_hash"].get<std::string>();

  // Duplicate case ids would violate the primary key: say which.
  std::set<std::string> seen;
  for (const auto& c : merged.cases)
    if (!seen.insert(c.id()).second)
      throw InputError(fmt::format("record: case {} appears twice in the run", c.id()));

  I.exec("BEGIN IMMEDIATE");
  try {
    Stmt ins(I.db,
             "INSERT INTO runs(date, kbisect_sha, machine, label, sweep, case_list_hash, toolchains, "
             "compiler_commits, environment, extra, kind, sweep_file, started, finished, wall_s, recorded_at) "
             "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
             I.path);
    ins.bind(1, date).bind(2, sha).bind(3, machine).bind(4, meta.label).bind(5, merged.name).bind(6, clh);
    ins.bind(7, toolchains.dump()).bind(8, commits.dump()).bind(9, env.dump()).bind(10, merged.extra.dump());
    ins.bind(11, merged.kind).bind(12, merged.sweep_file).bind(13, merged.started).bind(14, merged.finished);
    ins.bind(15, merged.wall_s).bind(16, now_utc());
    ins.step();
    int64_t run_id = sqlite3_last_insert_rowid(I.db);

    Stmt cs(I.db,
            "INSERT INTO cases(run_id, seq, case_id, key, kernel, backend, params, dtype, shape, toolchain, "
            "toolchain_identity, tier, status, reason, median_s, ci_rel, noise, samples, code_hash, "
            "static_metrics, record) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            I.path);
    Stmt ss(I.db, "INSERT INTO samples(run_id, case_id, samples_s, clocks_mhz) VALUES(?,?,?,?)", I.path);
    int64_t seq = 0;
    for (const auto& c : merged.cases) {
      json rec = to_json(c);
      rec.erase("samples_s");
      rec.erase("clocks_mhz");
      json metrics = json::object();
      for (const auto& [k, v] : c.metrics) metrics[k] = v;
      cs.reset();
      cs.bind(1, run_id).bind(2, seq++).bind(3, c.id()).bind(4, c.key()).bind(5, c.kernel).bind(6, c.backend);
      cs.bind(7, params_to_json(c.params).dump()).bind(8, to_string(c.dtype)).bind(9, c.shape.str());
      cs.bind(10, c.toolchain).bind(11, c.toolchain_identity).bind(12, c.tier).bind(13, to_string(c.status));
      cs.bind(14, c.reason);
      if (c.summary.samples > 0) {
        cs.bind(15, c.summary.median_s).bind(16, c.summary.ci_rel).bind(17, c.summary.noise);
      } else {
        cs.bind_null(15).bind_null(16).bind_null(17);
      }
      cs.bind(18, int64_t(c.summary.samples)).bind(19, c.code_hash).bind(20, metrics.dump()).bind(21, rec.dump());
      cs.step();
      ss.reset();
      ss.bind(1, run_id).bind(2, c.id()).bind(3, json(c.samples_s).dump()).bind(4, json(c.clocks_mhz).dump());
      ss.step();
    }
    I.exec("COMMIT");
    return run_id;
  } catch (...) {
    sqlite3_exec(I.db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<RunRow> History::runs(int last_n) const {
  std::string sql = std::string(kRunRowSelect) + "WHERE r.id IN (" + impl_->last_runs_clause(last_n) +
                    ") ORDER BY r.date, r.id";
  Stmt st(impl_->db, sql, impl_->path);
  std::vector<RunRow> out;
  while (st.step()) out.push_back(impl_->row_from(st));
  return out;
}

std::optional<RunRow> History::run(int64_t run_id) const {
  Stmt st(impl_->db, std::string(kRunRowSelect) + "WHERE r.id = ?", impl_->path);
  st.bind(1, run_id);
  if (!st.step()) return std::nullopt;
  return impl_->row_from(st);
}

std::vector<SeriesPoint> History::series(const std::string& case_regex, int last_n) const {
  std::regex re;
  try {
    re = checked_regex(case_regex);
  } catch (const std::regex_error& e) {
    throw InputError(fmt::format("case filter '{}': not a valid regex: {}", case_regex, e.what()));
  }
  std::string sql =
      "SELECT c.run_id, r.date, r.label, c.case_id, c.toolchain_identity, c.status, c.median_s, c.ci_rel, c.samples "
      "FROM cases c JOIN runs r ON r.id = c.run_id WHERE c.run_id IN (" +
      impl_->last_runs_clause(last_n) + ") ORDER BY c.case_id, r.date, r.id";
  Stmt st(impl_->db, sql, impl_->path);
  std::vector<SeriesPoint> out;
  std::string last_id;
  bool last_match = false;
  while (st.step()) {
    std::string id = st.text(3);
    if (id != last_id) {
      last_id = id;
      last_match = std::regex_search(id, re);
    }
    if (!last_match) continue;
    SeriesPoint p;
    p.run_id = st.i64(0);
    p.date = st.text(1);
    p.label = st.text(2);
    p.case_id = id;
    p.toolchain_identity = st.text(4);
    p.status = st.text(5);
    p.median_s = st.is_null(6) ? 0 : st.f64(6);
    p.ci_rel = st.is_null(7) ? 0 : st.f64(7);
    p.samples = st.i64(8);
    out.push_back(std::move(p));
  }
  return out;
}

std::map<std::string, std::vector<SeriesPoint>> History::series_by_case(const std::string& case_regex,
                                                                        int last_n) const {
  std::map<std::string, std::vector<SeriesPoint>> out;
  for (auto& p : series(case_regex, last_n)) out[p.case_id].push_back(std::move(p));
  return out;
}

std::optional<RunResults> History::load_run(int64_t run_id) const {
  auto& I = *impl_;
  Stmt st(I.db, "SELECT name_kind, sweep, sweep_file, started, finished, wall_s, environment, extra FROM "
                "(SELECT kind AS name_kind, sweep, sweep_file, started, finished, wall_s, environment, extra, id "
                "FROM runs) WHERE id = ?",
          I.path);
  st.bind(1, run_id);
  if (!st.step()) return std::nullopt;
  RunResults r;
  r.kind = st.text(0);
  r.name = st.text(1);
  r.sweep_file = st.text(2);
  r.started = st.text(3);
  r.finished = st.text(4);
  r.wall_s = st.f64(5);
  r.environment = parse_json_column(st.text(6), "environment", I.path);
  r.extra = parse_json_column(st.text(7), "extra", I.path);
  Stmt cs(I.db,
          "SELECT c.record, s.samples_s, s.clocks_mhz FROM cases c LEFT JOIN samples s "
          "ON s.run_id = c.run_id AND s.case_id = c.case_id WHERE c.run_id = ? ORDER BY c.seq",
          I.path);
  cs.bind(1, run_id);
  while (cs.step()) {
    json rec = parse_json_column(cs.text(0), "case record", I.path);
    if (!cs.is_null(1)) rec["samples_s"] = parse_json_column(cs.text(1), "samples", I.path);
    if (!cs.is_null(2)) rec["clocks_mhz"] = parse_json_column(cs.text(2), "clocks", I.path);
    r.cases.push_back(case_from_json(rec));
  }
  return r;
}

bool History::integrity_ok() const {
  Stmt st(impl_->db, "PRAGMA integrity_check", impl_->path);
  return st.step() && st.text(0) == "ok";
}

std::vector<ChangePoint> detect_in_series(const std::vector<SeriesPoint>& points, const ChangePointConfig& cfg) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const SeriesPoint*>> by_case;
  for (const auto& p : points) {
    if (p.status != "ok" || !(p.median_s > 0)) continue;
    auto [it, fresh] = by_case.try_emplace(p.case_id);
    if (fresh) order.push_back(p.case_id);
    it->second.push_back(&p);
  }
  std::vector<ChangePoint> out;
  for (const auto& id : order) {
    const auto& pts = by_case[id];
    std::vector<double> v;
    for (auto* p : pts) v.push_back(p->median_s);
    for (auto cp : detect_change_points(v, cfg)) {
      cp.case_id = id;
      cp.run_id = pts[size_t(cp.index)]->run_id;
      cp.date = pts[size_t(cp.index)]->date;
      out.push_back(std::move(cp));
    }
  }
  return out;
}

}  // namespace kb
