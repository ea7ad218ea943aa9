// The analysis of one (fork, upstream) pair: integration state, pending commits, dependencies,
// risks, plan, and the optional emergency pick and weekly history.
#include <algorithm>

#include "upstream/internal.h"

namespace kb::upstream {

using namespace detail;

namespace {

constexpr int64_t kWeek = 7 * kDay;
constexpr int64_t kFirstMonday = 4 * kDay;  // 1970-01-05 00:00 UTC

// Integrated and pending lists, in upstream order.
void list_commits(Work& w, Report& r) {
  const State& s = w.s;
  w.pending_of.assign(s.up.size(), -1);
  for (size_t i = 0; i < s.up.size(); ++i) {
    if (s.merge[i]) continue;
    const auto& c = w.an.info(s.up[i]);
    if (w.integ[i]) {
      r.integrated.push_back({to_ref(c), how_name(s.how[i]), s.carrier[i], s.evidence[i], s.how[i] == kByContent});
    } else if (s.skip[i] != 0) {
      const auto& e = w.cfg.skip[size_t(s.skip[i] - 1)];
      r.excluded.push_back({to_ref(c), e.kind, e.reason, s.skip_rule[i]});
    } else {
      w.pending_of[i] = long(r.pending.size());
      w.range_of.push_back(i);
      PendingCommit p;
      p.commit = to_ref(c);
      r.pending.push_back(std::move(p));
    }
  }
}

// Backlog flags: pending ancestors of the newest integrated commit.
void mark_backlog(const Work& w, Report& r) {
  if (!r.metrics.newest_integrated) return;
  const State& s = w.s;
  size_t newest = 0;
  for (size_t i = 0; i < s.up.size(); ++i)
    if (s.up[i] == r.metrics.newest_integrated->sha) newest = i;
  std::vector<bool> seen(s.up.size(), false);
  std::vector<size_t> stack = {newest};
  while (!stack.empty()) {
    size_t i = stack.back();
    stack.pop_back();
    if (w.pending_of[i] >= 0) r.pending[size_t(w.pending_of[i])].backlog = true;
    for (size_t p : s.parents[i])
      if (!seen[p]) seen[p] = true, stack.push_back(p);
  }
}

// One row per week along the fork's and upstream's first-parent lines.
void add_history(Work& w, const std::string& fork_ref, const std::string& upstream_ref, Report& r) {
  int64_t end = std::max(r.fork_head.commit_time, r.metrics.upstream_head.commit_time);
  std::vector<int64_t> samples = {end};
  int64_t boundary = ((end - 1 - kFirstMonday) / kWeek) * kWeek + kFirstMonday;  // last Monday before end
  if (end - 1 - kFirstMonday < 0) boundary = kFirstMonday - kWeek;
  for (int k = 1; k < w.cfg.history_weeks; ++k, boundary -= kWeek) samples.push_back(boundary);
  std::reverse(samples.begin(), samples.end());
  for (int64_t t : samples) {
    git::RevListOptions o;
    o.first_parent = true;
    o.max_count = 1;
    o.until = t;
    auto f = w.repo.rev_list({w.fork_sha}, o);
    auto u = w.repo.rev_list({w.up_sha}, o);
    if (f.empty() || u.empty() || w.repo.merge_bases(f[0], u[0]).empty()) continue;
    State hs = w.an.state(f[0], u[0], fork_ref, upstream_ref, w.cfg);
    r.history.push_back({t, f[0], u[0], w.an.metrics(hs, integrated_flags(hs))});
  }
}

}  // namespace

Report analyze(const git::Repo& repo, const std::string& fork_ref, const std::string& upstream_ref,
               const Config& cfg, const Options& opt) {
  Analyzer an(repo);
  Report r;
  r.repo = repo.dir();
  r.fork_ref = fork_ref;
  r.upstream_ref = upstream_ref;
  r.config = cfg;
  Work w{an, repo, cfg, repo.resolve(fork_ref, "fork ref"), repo.resolve(upstream_ref, "upstream ref"), {}, {}, {}, {}};
  w.s = an.state(w.fork_sha, w.up_sha, fork_ref, upstream_ref, cfg);
  r.fork_head = to_ref(an.info(w.fork_sha));
  r.merge_base = to_ref(an.info(w.s.base_sha));
  w.integ = integrated_flags(w.s);
  r.metrics = an.metrics(w.s, w.integ);

  list_commits(w, r);
  mark_backlog(w, r);
  std::map<std::string, std::string> fork_files = fork_changed_files(w, r);
  DepBuilder deps(r.pending.size());
  add_diff_dependencies(w, r, deps);
  add_message_dependencies(w, r, deps);
  for (size_t pi = 0; pi < r.pending.size(); ++pi) {
    r.pending[pi].depends_on = deps.take(pi);
    for (const auto& d : r.pending[pi].depends_on) r.pending[d.on].needed_by.push_back(pi);
  }
  check_fork_conflicts(w, fork_files, r);
  assess_risks(cfg, fork_files, r);
  build_plan(cfg, r);
  if (!opt.emergency.empty()) r.emergency = plan_emergency(w, r, opt, upstream_ref);
  if (opt.history) add_history(w, fork_ref, upstream_ref, r);
  r.warnings = an.warnings();
  return r;
}

}  // namespace kb::upstream
