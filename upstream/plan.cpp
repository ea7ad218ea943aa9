// The ingestion plan: risks of each pending commit, chains (dependency components or risky commits,
// ingested alone) and size-capped bundles of independent low-risk commits, and --emergency picks.
#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "git/glob.h"
#include "upstream/internal.h"

namespace kb::upstream::detail {

using git::short_sha;

namespace {

struct UnionFind {
  std::vector<size_t> p;
  explicit UnionFind(size_t n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  size_t find(size_t x) { return p[x] == x ? x : p[x] = find(p[x]); }
  void unite(size_t a, size_t b) { p[find(a)] = find(b); }
};

// The first three entries, then "and N more".
std::string listed(const std::vector<std::string>& v) {
  std::vector<std::string> head(v.begin(), v.begin() + long(std::min<size_t>(v.size(), 3)));
  std::string s = join(head, ", ");
  if (v.size() > 3) s += fmt::format(" and {} more", v.size() - 3);
  return s;
}

// Two pending commits linked only to each other that cancel out: a commit and its revert, or the
// revert and the reland of a commit the fork already has.
bool nets_to_nothing(const Report& r, const std::vector<size_t>& members) {
  if (members.size() != 2) return false;
  const auto& a = r.pending[members[0]];
  const auto& b = r.pending[members[1]];
  if (b.reverts == a.commit.sha) return true;
  if (a.reverts.empty() || a.reverts != b.relands) return false;
  return std::none_of(r.pending.begin(), r.pending.end(), [&](const auto& p) { return p.commit.sha == a.reverts; });
}

}  // namespace

std::vector<size_t> dependency_closure(const Report& r, size_t pi) {
  std::set<size_t> closure;
  std::vector<size_t> stack = {pi};
  while (!stack.empty()) {
    size_t k = stack.back();
    stack.pop_back();
    if (!closure.insert(k).second) continue;
    for (const auto& d : r.pending[k].depends_on) stack.push_back(d.on);
  }
  return {closure.begin(), closure.end()};
}

void assess_risks(const Config& cfg, const std::map<std::string, std::string>& fork_files, Report& r) {
  for (auto& p : r.pending) {
    std::vector<std::string> risky, collide;
    for (const auto& f : p.files) {
      for (const auto& g : cfg.risky_paths)
        if (glob_match(g, f)) {
          risky.push_back(fmt::format("{} ({})", f, g));
          break;
        }
      if (cfg.fork_changes_risky && cfg.fork_conflicts == Config::ForkConflicts::File)
        if (auto it = fork_files.find(f); it != fork_files.end())
          collide.push_back(fmt::format("{} (fork commit {})", f, short_sha(it->second)));
    }
    if (!risky.empty()) p.risks.push_back("touches risky paths: " + listed(risky));
    if (!collide.empty()) p.risks.push_back("touches files the fork changed (likely conflict): " + listed(collide));
    if (p.trial == "conflict")
      p.risks.push_back("conflicts with the fork (trial merge onto its head)" +
                        (p.conflicts.empty() ? std::string() : ": " + listed(p.conflicts)));
    else if (p.trial == "clean")
      p.notes.push_back("near the fork's changes (" + listed(p.fork_collisions) +
                        "); a trial merge onto the fork applies cleanly");
    if (cfg.large_commit_lines > 0 && p.lines_changed > cfg.large_commit_lines)
      p.risks.push_back(fmt::format("large: {} changed lines (> {})", p.lines_changed, cfg.large_commit_lines));
  }
}

void build_plan(const Config& cfg, Report& r) {
  UnionFind uf(r.pending.size());
  for (size_t pi = 0; pi < r.pending.size(); ++pi)
    for (const auto& d : r.pending[pi].depends_on) uf.unite(pi, d.on);
  std::map<size_t, std::vector<size_t>> comps;  // root -> members in order
  for (size_t pi = 0; pi < r.pending.size(); ++pi) comps[uf.find(pi)].push_back(pi);
  std::vector<std::vector<size_t>> chains, skips;
  std::vector<size_t> independent;
  for (auto& [root, members] : comps) {
    if (nets_to_nothing(r, members)) {
      skips.push_back(members);
      continue;
    }
    bool risky = std::any_of(members.begin(), members.end(), [&](size_t k) { return !r.pending[k].risks.empty(); });
    if (members.size() == 1 && !risky) independent.push_back(members[0]);
    else chains.push_back(members);
  }
  std::sort(independent.begin(), independent.end());
  std::sort(chains.begin(), chains.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  for (size_t b = 0; b < independent.size(); b += size_t(cfg.bundle_max_commits)) {
    PlanStep st;
    st.kind = "bundle";
    st.commits.assign(independent.begin() + long(b),
                      independent.begin() + long(std::min(independent.size(), b + size_t(cfg.bundle_max_commits))));
    st.reasons.push_back(fmt::format(
        "{} independent commit{}: no dependency on or from another pending commit, no risky path, {} (at most {} "
        "per bundle)",
        st.commits.size(), st.commits.size() == 1 ? "" : "s",
        cfg.fork_conflicts == Config::ForkConflicts::File ? "no file the fork changed" : "no conflict with the fork",
        cfg.bundle_max_commits));
    r.plan.push_back(std::move(st));
  }
  for (const auto& members : chains) {
    PlanStep st;
    st.kind = "chain";
    st.commits = members;
    if (members.size() > 1)
      st.reasons.push_back(fmt::format("{} commits linked by dependencies: ingest together, in this order",
                                       members.size()));
    for (size_t k : members)
      for (const auto& risk : r.pending[k].risks) {
        st.risky = true;
        st.reasons.push_back(fmt::format("{}: {}", short_sha(r.pending[k].commit.sha), risk));
      }
    if (members.size() == 1) st.reasons.insert(st.reasons.begin(), "single commit with risks: ingest alone");
    r.plan.push_back(std::move(st));
  }
  for (const auto& members : skips) {
    const auto& a = r.pending[members[0]];
    PlanStep st;
    st.kind = "skip";
    st.commits = members;
    st.reasons.push_back(a.reverts.empty() || a.reverts == r.pending[members[1]].commit.sha
                             ? fmt::format("{} and its revert net to nothing: skip both", short_sha(a.commit.sha))
                             : fmt::format("revert and reland of {} (already in the fork) net to nothing: skip both",
                                           short_sha(a.reverts)));
    r.plan.push_back(std::move(st));
  }
  for (size_t step = 0; step < r.plan.size(); ++step)
    for (size_t k : r.plan[step].commits) r.pending[k].step = step + 1;
}

namespace {

// The pending index of the --emergency commit; InputError saying why when it is not pending.
size_t emergency_target(const Work& w, const Report& r, const std::string& name, const std::string& sha,
                        const std::string& upstream_ref) {
  for (size_t pi = 0; pi < r.pending.size(); ++pi)
    if (r.pending[pi].commit.sha == sha) return pi;
  for (const auto& ic : r.integrated)
    if (ic.commit.sha == sha)
      throw InputError(fmt::format("--emergency commit '{}' ({}) is already integrated ({} as {})", name,
                                   short_sha(sha), ic.how, short_sha(ic.fork_sha)));
  if (w.repo.is_ancestor(sha, w.fork_sha))
    throw InputError(fmt::format("--emergency commit '{}' ({}) is already in the fork's history", name,
                                 short_sha(sha)));
  if (!w.repo.is_ancestor(sha, w.up_sha))
    throw InputError(fmt::format("--emergency commit '{}' ({}) is not an upstream commit (not an ancestor of {})",
                                 name, short_sha(sha), upstream_ref));
  throw InputError(fmt::format("--emergency commit '{}' ({}) is a merge commit; name one of its changes", name,
                               short_sha(sha)));
}

// What picking exactly the closure does to days behind, backlog and pending.
std::vector<std::string> emergency_effect(Work& w, const Metrics& b, const Emergency& e,
                                          const std::vector<bool>& after) {
  const State& s = w.s;
  std::vector<std::string> effect;
  if (e.after.seconds_behind == b.seconds_behind) {
    std::string why;
    for (size_t i = 0; i < s.up.size(); ++i)
      if (!s.merge[i] && !after[i]) {
        why = fmt::format(": older upstream commit {} {} is still missing", short_sha(s.up[i]),
                          quote_subject(w.an.info(s.up[i]).subject));
        break;
      }
    effect.push_back(fmt::format("days behind unchanged at {:.2f}{}", b.days_behind, why));
  } else {
    effect.push_back(fmt::format("days behind {:.2f} -> {:.2f} (integration point moves to {})", b.days_behind,
                                 e.after.days_behind, short_sha(e.after.integration_point.sha)));
  }
  effect.push_back(fmt::format("backlog {} -> {}", b.backlog_commits, e.after.backlog_commits));
  effect.push_back(fmt::format("pending {} -> {}", b.pending_commits, e.after.pending_commits));
  if (e.closure.size() > 1)
    effect.push_back(fmt::format("{} needs {} other pending commit{} first", short_sha(e.target.sha),
                                 e.closure.size() - 1, e.closure.size() == 2 ? "" : "s"));
  return effect;
}

}  // namespace

// The dependency closure of one pending commit, and what picking it alone does.
Emergency plan_emergency(Work& w, const Report& r, const Options& opt, const std::string& upstream_ref) {
  std::string sha = w.repo.resolve(opt.emergency, "--emergency commit");
  size_t idx = emergency_target(w, r, opt.emergency, sha, upstream_ref);
  Emergency e;
  e.target = r.pending[idx].commit;
  e.closure = dependency_closure(r, idx);
  std::vector<bool> after = w.integ;
  for (size_t k : e.closure) after[w.range_of[k]] = true;
  e.after = w.an.metrics(w.s, after);
  e.effect = emergency_effect(w, r.metrics, e, after);
  return e;
}

}  // namespace kb::upstream::detail
