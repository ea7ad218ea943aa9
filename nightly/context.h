// Internal to nightly/: what the files of the finish step (finish, alerts, auto_bisect, report) share,
// and the few helpers the config, plan and scheduler files have in common. Not for other layers.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compare.h"
#include "harness/results.h"
#include "nightly/history.h"
#include "nightly/nightly.h"

namespace kb::nightly {

inline void say(const Log& log, const std::string& s) {
  if (log) log(s);
}

// Drops trailing newlines, carriage returns and spaces.
std::string trim_end(std::string s);

// The JSON of `path`; null when the file is missing or unreadable (earlier results are a hint, not input).
nlohmann::json json_if_readable(const std::string& path);

// `path` relative to `base` (for links between files of one run directory).
std::string relpath(const std::string& path, const std::string& base);

// "+1.23%" of a fraction.
std::string pct(double frac, int prec = 2);

// The argv of `kbisect sweep` for one shard, with `idx` as the shard number's text (a number, or a marker
// the Slurm script replaces by the array index). It must match the options of the sweep command in
// cli/sweep.cpp (positional SWEEP, --shard I/N, -o DIR, --format, --filter, --tier, --toolchain).
std::vector<std::string> sweep_shard_argv(const Plan& plan, const std::string& idx);

// ------------------------------------------------------------------------------------- finish state

struct Alert {
  std::string case_id, match;  // match: regex of the case (kernel[params]/dtype/shape/) for the bisect filter
  std::vector<std::string> reasons;
  std::optional<CaseComparison> cmp;
  std::optional<ChangePoint> cp;
  RunRow good, bad;  // the nightlies on either side of the change
  bool has_range = false;
  bool known = false;  // the same change point was alerted by an earlier nightly
};

struct BisectRecord {
  std::string dir, config, good_sha, bad_sha, good_date, bad_date;
  std::vector<std::string> cases;
  std::string status;  // ran | submitted | skipped | error
  std::string note, final_line, job_id, report_html, report_md;
  std::string descent_line;  // with bisect.descend: "inner culprit: ..." or why there was no descent
  nlohmann::json result;
};

struct Context {
  Plan plan;
  NightlyConfig cfg;
  bool complete = false;
  std::string merge_error;
  std::vector<std::string> shard_notes;
  std::optional<RunResults> merged;
  int64_t run_id = 0;
  std::vector<RunRow> mine;    // label's runs up to tonight (all of them; tonight last)
  std::optional<RunRow> prev;
  std::optional<Comparison> cmp;
  std::vector<RunRow> window;  // label's runs up to tonight (last cp_last)
  std::map<std::string, std::vector<SeriesPoint>> series;
  std::map<std::string, std::vector<ChangePoint>> cps;
  std::vector<std::string> notes;
  std::vector<Alert> alerts;  // new and known
  std::vector<BisectRecord> bisections;
  Outcome outcome = Outcome::quiet;
  std::string summary;
};

// Tonight's cases by id, and lookup by key or id.
struct TonightCases {
  explicit TonightCases(const RunResults& merged);
  const CaseResult* find(const std::string& key_or_id) const;
  bool has(const std::string& id) const { return by_id.count(id) > 0; }
  const RunResults& merged;
  std::map<std::string, const CaseResult*> by_id;
};

// alerts.cpp: alerts from the comparison with the previous nightly, then from the change points over the
// window (filling cx.series and cx.cps); keyed by case id.
void compare_alerts(Context& cx, const History& hist, const TonightCases& tonight, std::map<std::string, Alert>& alerts);
void changepoint_alerts(Context& cx, const History& hist, const TonightCases& tonight, std::map<std::string, Alert>& alerts);
nlohmann::json alert_json(const Alert& a);

// auto_bisect.cpp: one bisection per compiler range of the new alerts (inline or as Slurm jobs).
void auto_bisect(Context& cx, const Log& log);

// report.cpp / report_html.cpp: RUN/report.md, report.html and nightly.json.
void render(const Context& cx, FinishResult& fr);
std::string render_html(const Context& cx);

// What the Markdown and the HTML report say alike, each in its own markup.
struct Markup {
  std::string (*escape)(const std::string&);
  const char *code_open, *code_close, *bold_open, *bold_close;
};
// An alert's reasons, "; "-separated (not escaped).
std::string reasons_text(const Alert& a);
// "GOOD..BAD (date → date), N case(s): STATUS — final line — descent line — note", escaped; without the
// report link.
std::string bisection_line(const BisectRecord& b, const Markup& m);
// The verdict table's cells of a compared case (not escaped): last, tonight, effect, 95% CI.
std::vector<std::string> verdict_numbers(const CaseComparison& cc);
std::string verdict_cell(const CaseComparison& cc);

}  // namespace kb::nightly
