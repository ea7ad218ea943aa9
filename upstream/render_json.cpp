// The JSON form of an upstream report (schema kbisect.upstream/1).
#include "upstream/internal.h"

namespace kb::upstream {

using namespace detail;

namespace {

nlohmann::json ref_json(const CommitRef& c) {
  return {{"sha", c.sha},
          {"subject", c.subject},
          {"author", c.author},
          {"author_time", c.author_time},
          {"commit_time", c.commit_time},
          {"commit_date", format_time(c.commit_time)}};
}

nlohmann::json metrics_json(const Metrics& m) {
  nlohmann::json j = {{"days_behind", m.days_behind},
                      {"seconds_behind", m.seconds_behind},
                      {"upstream_head", ref_json(m.upstream_head)},
                      {"integration_point", ref_json(m.integration_point)},
                      {"integration_point_is_merge_base", m.integration_point_is_merge_base},
                      {"newest_integrated", m.newest_integrated ? ref_json(*m.newest_integrated) : nlohmann::json()},
                      {"upstream_commits", m.upstream_commits},
                      {"integrated_commits", m.integrated_commits},
                      {"pending_commits", m.pending_commits},
                      {"backlog_commits", m.backlog_commits},
                      {"excluded_commits", m.excluded_commits},
                      {"days_behind_frontier", m.days_behind_frontier},
                      {"seconds_behind_frontier", m.seconds_behind_frontier}};
  return j;
}

nlohmann::json config_json(const Config& c) {
  return {{"source", c.source},
                 {"risky_paths", c.risky_paths},
                 {"bundle_max_commits", c.bundle_max_commits},
                 {"dependency", c.dependency == Config::Level::Hunk ? "hunk" : "file"},
                 {"hunk_margin", c.hunk_margin},
                 {"fork_changes_risky", c.fork_changes_risky},
                 {"fork_conflicts", c.fork_conflicts == Config::ForkConflicts::Trial ? "trial" : "file"},
                 {"conflict_margin", c.conflict_margin},
                 {"rebase_subjects", c.rebase_subjects},
                 {"rebase_file_share", c.rebase_file_share},
                 {"rebase_min_files", c.rebase_min_files},
                 {"large_commit_lines", c.large_commit_lines},
                 {"history_weeks", c.history_weeks},
                 {"match_by_author", c.match_by_author},
                 {"pick_presets", c.pick_presets},
                 {"pick_trailers", c.pick_trailers},
                 {"upstream_pr_range", {c.upstream_pr_min, c.upstream_pr_max}},
                 {"upstream_pr_repo", c.upstream_pr_repo},
                 {"content_threshold", c.content_threshold},
                 {"content_min_lines", c.content_min_lines}};
}

// Integrated (with the rule and evidence), excluded commits and warnings.
void add_integration(const Report& r, nlohmann::json& j) {
  j["integrated"] = nlohmann::json::array();
  for (const auto& ic : r.integrated)
    j["integrated"].push_back({{"commit", ref_json(ic.commit)},
                               {"how", ic.how},
                               {"fork_sha", ic.fork_sha},
                               {"evidence", ic.evidence},
                               {"weak", ic.weak}});
  j["excluded"] = nlohmann::json::array();
  for (const auto& e : r.excluded)
    j["excluded"].push_back({{"commit", ref_json(e.commit)}, {"kind", e.kind}, {"reason", e.reason}, {"rule", e.rule}});
  j["warnings"] = r.warnings;
}

}  // namespace

nlohmann::json to_json(const Report& r) {
  nlohmann::json j;
  j["schema"] = "kbisect.upstream/1";
  j["repo"] = r.repo;
  j["fork"] = {{"ref", r.fork_ref}, {"head", ref_json(r.fork_head)}};
  j["upstream"] = {{"ref", r.upstream_ref}, {"head", ref_json(r.metrics.upstream_head)}};
  j["merge_base"] = ref_json(r.merge_base);
  j["definitions"] = {{"days_behind", kDefinitionDaysBehind},
                      {"backlog", kDefinitionBacklog},
                      {"pending", kDefinitionPending},
                      {"integrated", kDefinitionIntegrated}};
  j["config"] = config_json(r.config);
  j["dependency_level"] = r.dependency_level;
  j["notes"] = r.notes;
  j["metrics"] = metrics_json(r.metrics);
  add_integration(r, j);
  j["pending"] = nlohmann::json::array();
  for (size_t k = 0; k < r.pending.size(); ++k) {
    const auto& p = r.pending[k];
    nlohmann::json d = nlohmann::json::array(), nb = nlohmann::json::array();
    for (const auto& x : p.depends_on) d.push_back({{"sha", r.pending[x.on].commit.sha}, {"reasons", x.reasons}});
    for (size_t x : p.needed_by) nb.push_back(r.pending[x].commit.sha);
    j["pending"].push_back({{"commit", ref_json(p.commit)},
                            {"files", p.files},
                            {"lines_changed", p.lines_changed},
                            {"backlog", p.backlog},
                            {"depends_on", d},
                            {"needed_by", nb},
                            {"risks", p.risks},
                            {"notes", p.notes},
                            {"fork_collisions", p.fork_collisions},
                            {"trial", p.trial},
                            {"conflicts", p.conflicts},
                            {"step", p.step},
                            {"reasons", commit_reasons(r, k)}});
  }
  j["fork_changed_files"] = r.fork_changed_files;
  j["fork_rebase_commits"] = nlohmann::json::array();
  for (const auto& c : r.fork_rebase_commits)
    j["fork_rebase_commits"].push_back({{"sha", c.sha}, {"subject", c.subject}, {"why", c.why}});
  j["plan"] = nlohmann::json::array();
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    nlohmann::json cs = nlohmann::json::array();
    for (size_t k : st.commits) cs.push_back(r.pending[k].commit.sha);
    j["plan"].push_back({{"step", i + 1}, {"kind", st.kind}, {"risky", st.risky}, {"commits", cs}, {"reasons", st.reasons}});
  }
  if (r.emergency) {
    const auto& e = *r.emergency;
    nlohmann::json cs = nlohmann::json::array();
    for (size_t k : e.closure) cs.push_back(r.pending[k].commit.sha);
    j["emergency"] = {{"target", ref_json(e.target)},
                      {"closure", cs},
                      {"before", metrics_json(r.metrics)},
                      {"after", metrics_json(e.after)},
                      {"effect", e.effect}};
  }
  if (!r.history.empty()) {
    j["history"] = nlohmann::json::array();
    for (const auto& h : r.history)
      j["history"].push_back({{"as_of", h.as_of},
                              {"as_of_date", format_time(h.as_of)},
                              {"fork_sha", h.fork_sha},
                              {"upstream_sha", h.upstream_sha},
                              {"days_behind", h.metrics.days_behind},
                              {"backlog_commits", h.metrics.backlog_commits},
                              {"pending_commits", h.metrics.pending_commits},
                              {"integrated_commits", h.metrics.integrated_commits},
                              {"integration_point", h.metrics.integration_point.sha},
                              {"days_behind_frontier", h.metrics.days_behind_frontier},
                              {"frontier", h.metrics.newest_integrated ? h.metrics.newest_integrated->sha : ""}});
  }
  return j;
}

}  // namespace kb::upstream
