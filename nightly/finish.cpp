// The finish step: merge the shards, record the night in the history, find the alerts, auto-bisect, report.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json_read.h"
#include "harness/shard.h"
#include "nightly/context.h"

namespace kb::nightly {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string shard_note(const Plan& plan, int i, const json& local_status) {
  std::string why;
  if (local_status.is_array() && size_t(i - 1) < local_status.size()) {
    const auto& st = local_status[size_t(i - 1)];
    why = st.value("status", "");
    if (st.contains("stderr_tail")) why += ": " + trim_end(tail(st["stderr_tail"].get<std::string>(), 300));
  }
  const std::string rc = fmt::format("{}/shard-{}.rc", plan.run_dir, i);
  if (why.empty() && file_exists(rc)) why = "exit " + trim_end(read_file(rc));
  const std::string out = fmt::format("{}/slurm/shard-{}.out", plan.run_dir, i - 1);
  if (file_exists(out)) {
    const std::string t = trim_end(tail(read_file(out), 300));
    if (!t.empty()) why += (why.empty() ? "" : "; ") + std::string("log: ") + t;
  }
  if (why.empty()) why = "never ran or was killed (no exit status recorded)";
  return fmt::format("shard {}/{} produced no results: {}", i, plan.shards, why);
}

// 1. Shards -> cx.merged (left empty, with cx.shard_notes and cx.merge_error saying why, when unusable).
void merge_shards(Context& cx) {
  const Plan& p = cx.plan;
  const json local_status = json_if_readable(p.run_dir + "/shards.json");
  std::vector<RunResults> shards;
  std::vector<std::string> origins;
  for (int i = 1; i <= p.shards; ++i) {
    const std::string f = p.shard_dir(i) + "/results.json";
    if (!file_exists(f)) {
      cx.shard_notes.push_back(shard_note(p, i, local_status));
      continue;
    }
    try {
      shards.push_back(load_results(f));
      origins.push_back(f);
    } catch (const InputError& e) {
      cx.shard_notes.push_back(fmt::format("shard {}/{}: unreadable results: {}", i, p.shards, e.what()));
    }
  }
  if (shards.empty()) {
    cx.merge_error = fmt::format("no shard of {} produced results", p.shards);
    return;
  }
  try {
    cx.merged = merge_results(shards, origins);
  } catch (const InputError& e) {
    cx.merge_error = e.what();
  }
}

// 2. Records tonight (once: a re-run of the finish step finds its earlier run id) and loads the label's runs:
// cx.run_id, cx.mine, cx.prev, cx.window.
void record_history(Context& cx, History& hist, const json& earlier, const Log& log) {
  const Plan& p = cx.plan;
  const int64_t earlier_id = json_int_or<int64_t>(earlier, "run_id", 0, "nightly.json");
  if (earlier_id > 0 && hist.run(earlier_id)) cx.run_id = earlier_id;
  if (cx.run_id == 0) {
    RunMeta meta;
    meta.date = p.date;
    meta.label = p.name;
    if (!p.compiler_sha.empty()) meta.compiler_commits[p.toolchain_name] = p.compiler_sha;
    cx.run_id = hist.record(*cx.merged, meta);
  }
  say(log, fmt::format("recorded nightly {} as run {} in {}", p.date, cx.run_id, p.history));
  for (const auto& r : hist.runs()) {
    if (r.label != p.name) continue;
    cx.mine.push_back(r);
    if (r.id == cx.run_id) break;
  }
  if (cx.mine.empty() || cx.mine.back().id != cx.run_id)
    throw Error(fmt::format("{}: run {} not found after recording", p.history, cx.run_id));
  if (cx.mine.size() >= 2) cx.prev = cx.mine[cx.mine.size() - 2];
  const size_t first = cx.mine.size() > size_t(cx.cfg.cp_last) ? cx.mine.size() - size_t(cx.cfg.cp_last) : 0;
  cx.window.assign(cx.mine.begin() + long(first), cx.mine.end());
}

// Writes the report and hands the outcome back.
FinishResult conclude(const Context& cx, const Log& log) {
  FinishResult fr;
  say(log, cx.summary);
  render(cx, fr);
  fr.outcome = cx.outcome;
  fr.summary = cx.summary;
  return fr;
}

}  // namespace

// The JSON of `path`; null when the file is missing or unreadable (earlier results are a hint, not input).
json json_if_readable(const std::string& path) {
  if (!file_exists(path)) return nullptr;
  try {
    return json::parse(read_file(path));
  } catch (...) {
    return nullptr;
  }
}

std::string trim_end(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

FinishResult finish(const std::string& run_dir_in, const Log& log) {
  const std::string run_dir = fs::weakly_canonical(fs::absolute(run_dir_in)).string();
  Context cx;
  cx.plan = load_plan(run_dir);
  cx.plan.run_dir = run_dir;
  cx.cfg = parse_nightly_config(cx.plan.config_text, cx.plan.config_file);

  // Earlier result of this finish step (a re-run must not record the night twice).
  const json earlier = json_if_readable(run_dir + "/nightly.json");
  merge_shards(cx);
  if (!cx.merged) {
    cx.outcome = Outcome::incomplete;
    cx.summary = fmt::format("incomplete nightly: {} of {} shard(s) missing or unusable; not recorded", cx.shard_notes.size(),
                             cx.plan.shards);
    return conclude(cx, log);
  }
  cx.complete = true;
  save_results(*cx.merged, run_dir + "/merged/results.json");

  History hist(cx.plan.history);
  record_history(cx, hist, earlier, log);

  // 3. Compare with the previous nightly; 4. change points over the window, per case of tonight.
  const TonightCases tonight(*cx.merged);
  std::map<std::string, Alert> alerts;
  compare_alerts(cx, hist, tonight, alerts);
  changepoint_alerts(cx, hist, tonight, alerts);
  for (auto& [cid, a] : alerts) cx.alerts.push_back(std::move(a));
  const size_t n_new = size_t(std::count_if(cx.alerts.begin(), cx.alerts.end(), [](const Alert& a) { return !a.known; }));

  // 5. Auto-bisect.
  if (n_new > 0 && cx.cfg.compiler && cx.cfg.bisect.enabled) auto_bisect(cx, log);

  cx.outcome = n_new > 0 ? Outcome::alerts : Outcome::quiet;
  cx.summary = fmt::format("{} case(s), {} alert(s){}{}", cx.merged->cases.size(), n_new,
                           cx.alerts.size() > n_new ? fmt::format(" ({} still regressed from before)", cx.alerts.size() - n_new) : "",
                           cx.bisections.empty() ? "" : fmt::format(", {} bisection(s)", cx.bisections.size()));
  for (const auto& b : cx.bisections)
    if (!b.final_line.empty()) cx.summary += "; " + b.final_line;
  return conclude(cx, log);
}

std::string to_string(Outcome o) {
  switch (o) {
    case Outcome::quiet: return "quiet";
    case Outcome::alerts: return "alerts";
    case Outcome::incomplete: return "incomplete";
  }
  return "?";
}

Outcome parse_outcome(const std::string& s) {
  for (Outcome o : {Outcome::quiet, Outcome::alerts, Outcome::incomplete})
    if (to_string(o) == s) return o;
  throw InputError(fmt::format("nightly outcome '{}' is not quiet, alerts or incomplete", s));
}

}  // namespace kb::nightly
