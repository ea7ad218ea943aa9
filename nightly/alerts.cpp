// Alerts of the finish step: a case slower than the previous nightly (harness/compare), or a rise at the last
// change point of its series over the window (stats/changepoint).
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json_read.h"
#include "nightly/context.h"

namespace kb::nightly {

using json = nlohmann::json;

namespace {

std::string case_match(const CaseResult& c) {
  return regex_escape(fmt::format("{}[{}]/{}/{}/", c.kernel, c.params.str(), to_string(c.dtype), c.shape.str()));
}

Alert& alert_for(std::map<std::string, Alert>& alerts, const CaseResult& c) {
  Alert& a = alerts[c.id()];
  a.case_id = c.id();
  a.match = case_match(c);
  return a;
}

// (case, change-point run) of the previous nightly's change-point alerts: the same change seen again (its
// estimated position may move by a night or two as nights are added) is not a new alert.
std::set<std::pair<std::string, int64_t>> alerted_before(const Context& cx) {
  std::set<std::pair<std::string, int64_t>> out;
  if (!cx.prev) return out;
  const json pj = json_if_readable(cx.cfg.root + "/" + cx.prev->date + "/nightly.json");
  if (!pj.is_object()) return out;
  try {
    for (const auto& a : pj.value("alerts", json::array()))
      if (a.contains("changepoint"))
        out.insert({a.value("case", ""), json_int_or<int64_t>(a["changepoint"], "run_id", 0, "alerts.changepoint")});
  } catch (...) {
  }
  return out;
}

// For a change-point alert without a comparison alert: whether an earlier nightly alerted the same change,
// and the range to bisect.
void place_changepoint(const Context& cx, const std::set<std::pair<std::string, int64_t>>& before, Alert& a) {
  const std::vector<RunRow>& mine = cx.mine;
  std::map<int64_t, long> pos;
  for (size_t i = 0; i < mine.size(); ++i) pos[mine[i].id] = long(i);
  const long here = pos.count(a.cp->run_id) ? pos[a.cp->run_id] : -1;
  for (const auto& [c, rid] : before)
    if (c == a.case_id && pos.count(rid) && here >= 0 && std::abs(pos[rid] - here) <= cx.cfg.cp.min_segment) a.known = true;
  // The range to bisect: from one nightly before the change point's "before" neighbour (its position is
  // an estimate) to tonight (the slow segment reaches tonight by construction).
  if (here >= 1) {
    a.good = mine[size_t(std::max(0L, here - 2))];
    a.bad = mine.back();
    a.has_range = true;
  }
}

}  // namespace

std::string regex_escape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : s) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

TonightCases::TonightCases(const RunResults& m) : merged(m) {
  for (const auto& c : merged.cases) by_id[c.id()] = &c;
}

const CaseResult* TonightCases::find(const std::string& key) const {
  auto it = by_id.find(key);
  if (it != by_id.end()) return it->second;
  for (const auto& c : merged.cases)
    if (c.key() == key || c.id() == key) return &c;
  return nullptr;
}

void compare_alerts(Context& cx, const History& hist, const TonightCases& tonight, std::map<std::string, Alert>& alerts) {
  if (!cx.prev) return;
  std::optional<RunResults> base = hist.load_run(cx.prev->id);
  if (!base) return;
  CompareOptions co;
  co.threshold = cx.cfg.threshold;
  co.alpha = cx.cfg.alpha;
  cx.cmp = compare_sets(sample_set_from_results(*base, "nightly " + cx.prev->date),
                        sample_set_from_results(*cx.merged, "nightly " + cx.plan.date), co);
  finish_comparison(*cx.cmp);
  for (const auto& cc : cx.cmp->cases) {
    if (!cc.compared || cc.decision.verdict != stats::Verdict::worse) continue;
    const CaseResult* c = tonight.find(cc.key);
    if (!c) continue;
    Alert& a = alert_for(alerts, *c);
    a.cmp = cc;
    a.reasons.push_back(fmt::format("slower than {} by {:+.2f}% (95% CI [{:+.2f}%, {:+.2f}%]) beyond the {} threshold",
                                    cx.prev->date, 100 * cc.decision.effect_pct(), 100 * cc.decision.ci_lo_pct(),
                                    100 * cc.decision.ci_hi_pct(), cx.cfg.threshold_text));
    a.good = *cx.prev;
    a.bad = cx.mine.back();
    a.has_range = true;
  }
}

void changepoint_alerts(Context& cx, const History& hist, const TonightCases& tonight, std::map<std::string, Alert>& alerts) {
  const auto before = alerted_before(cx);
  std::set<int64_t> window_ids;
  for (const auto& r : cx.window) window_ids.insert(r.id);
  for (auto& [cid, pts] : hist.series_by_case(".*", 0)) {
    if (!tonight.has(cid)) continue;
    std::vector<SeriesPoint> kept;
    for (const auto& pt : pts)
      if (window_ids.count(pt.run_id)) kept.push_back(pt);
    cx.series[cid] = kept;
    try {
      cx.cps[cid] = detect_in_series(kept, cx.cfg.cp);
    } catch (const InputError& e) {
      cx.notes.push_back(fmt::format("{}: change points not computed: {}", cid, e.what()));
      continue;
    }
    const auto& cps = cx.cps[cid];
    if (cps.empty()) continue;
    const ChangePoint& last = cps.back();
    if (!(last.rel_change > 0) || last.rel_change < cx.cfg.cp.min_rel_change) continue;
    Alert& a = alert_for(alerts, *tonight.by_id.at(cid));
    a.cp = last;
    a.reasons.push_back(fmt::format("change point at nightly {}: {} (median {} -> {}, p={:.3g}, last {} nightlies)", last.date,
                                    pct(last.rel_change), format_seconds(last.before), format_seconds(last.after), last.p_value,
                                    cx.window.size()));
    if (!a.cmp) place_changepoint(cx, before, a);
  }
}

json alert_json(const Alert& a) {
  json j = {{"case", a.case_id}, {"reasons", a.reasons}, {"known", a.known}};
  if (a.cmp)
    j["compare"] = {{"verdict", stats::to_string(a.cmp->decision.verdict)},
                    {"effect_pct", 100 * a.cmp->decision.effect_pct()},
                    {"ci_pct", {100 * a.cmp->decision.ci_lo_pct(), 100 * a.cmp->decision.ci_hi_pct()}}};
  if (a.cp)
    j["changepoint"] = {{"run_id", a.cp->run_id}, {"date", a.cp->date}, {"rel_change", a.cp->rel_change},
                        {"p_value", a.cp->p_value}, {"before_s", a.cp->before}, {"after_s", a.cp->after}};
  if (a.has_range) {
    j["good"] = {{"run_id", a.good.id}, {"date", a.good.date}, {"compiler_commits", a.good.compiler_commits}};
    j["bad"] = {{"run_id", a.bad.id}, {"date", a.bad.date}, {"compiler_commits", a.bad.compiler_commits}};
  }
  return j;
}

}  // namespace kb::nightly
