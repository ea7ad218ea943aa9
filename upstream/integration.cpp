// Cached reads of commits (metadata, patch ids, added lines, diffs; unreadable ones become warnings),
// the ranges of one (fork, upstream) pair and its metrics: integration point and frontier, days
// behind on both, backlog.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "upstream/internal.h"

namespace kb::upstream::detail {

using git::short_sha;

std::vector<bool> integrated_flags(const State& s) {
  std::vector<bool> v(s.up.size());
  for (size_t i = 0; i < s.up.size(); ++i) v[i] = s.how[i] != kNotIntegrated;
  return v;
}

void Analyzer::load_infos(const std::vector<std::string>& shas) {
  std::vector<std::string> missing;
  for (const auto& s : shas)
    if (!infos_.count(s)) missing.push_back(s);
  if (missing.empty()) return;
  for (auto& c : repo_.commit_infos(missing)) {
    // A message that is not UTF-8 (and has no encoding header git could convert from) would make
    // the JSON invalid and the reports unreadable: read its stray bytes as Latin-1 and say so.
    size_t bad = 0, sum = 0;
    for (auto* f : {&c.subject, &c.message, &c.author_name}) {
      *f = utf8_or_latin1(*f, &bad);
      sum += bad;
    }
    if (sum) not_utf8_.push_back(c.sha);
    infos_.emplace(c.sha, std::move(c));
  }
}

const git::CommitInfo& Analyzer::info(const std::string& sha) {
  auto it = infos_.find(sha);
  if (it == infos_.end()) {
    load_infos({sha});
    it = infos_.find(sha);
  }
  return it->second;
}

void Analyzer::load_patch_ids(const std::vector<std::string>& shas) {
  std::vector<std::string> missing;
  for (const auto& s : shas)
    if (!pids_.count(s)) missing.push_back(s);
  if (missing.empty()) return;
  auto got = repo_.patch_ids_tolerant(missing, bad_);
  for (const auto& s : missing) {
    auto it = got.find(s);
    pids_[s] = it == got.end() ? std::optional<std::string>() : it->second;
  }
}

void Analyzer::load_added(const std::vector<std::string>& shas) {
  std::vector<std::string> missing;
  for (const auto& s : shas)
    if (!added_.count(s)) missing.push_back(s);
  if (missing.empty()) return;
  auto got = repo_.added_lines(missing, bad_);
  for (const auto& s : missing) added_[s] = std::move(got[s]);
}

std::vector<git::CommitDiff> Analyzer::diffs(const std::vector<std::string>& shas) {
  return repo_.diffs_tolerant(shas, bad_);
}

std::vector<std::string> Analyzer::warnings() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& u : bad_) {
    if (!seen.insert(u.sha).second) continue;
    std::string paths = u.paths.empty() ? std::string("its files") : join(u.paths, ", ");
    out.push_back(fmt::format("commit {} ({}): cannot read {}: {}; its diff, patch id and added lines are left out",
                              short_sha(u.sha), info(u.sha).subject, paths, u.error));
  }
  for (const auto& sha : not_utf8_)
    out.push_back(fmt::format("commit {} ({}): its message is not UTF-8; its stray bytes were read as Latin-1",
                              short_sha(sha), info(sha).subject));
  return out;
}

// Merge base, the two ranges, in-range parents, commit infos and patch ids.
void Analyzer::load_ranges(State& s, const std::string& fork_name, const std::string& upstream_name) {
  auto bases = repo_.merge_bases(s.fork_sha, s.upstream_sha);
  if (bases.empty())
    throw InputError(fmt::format("fork '{}' ({}) and upstream '{}' ({}) have unrelated histories: no common "
                                 "ancestor in repository {}",
                                 fork_name, short_sha(s.fork_sha), upstream_name, short_sha(s.upstream_sha),
                                 repo_.dir()));
  load_infos(bases);
  s.base_sha = *std::max_element(bases.begin(), bases.end(), [&](const auto& a, const auto& b) {
    return info(a).commit_time < info(b).commit_time;
  });
  git::RevListOptions topo;
  topo.topo_order = true;
  topo.reverse = true;
  s.up = repo_.rev_list({s.upstream_sha, "^" + s.fork_sha}, topo);
  git::RevListOptions fopt = topo;
  fopt.no_merges = true;
  s.fork = repo_.rev_list({s.fork_sha, "^" + s.upstream_sha}, fopt);

  std::vector<std::string> all = s.up;
  all.insert(all.end(), s.fork.begin(), s.fork.end());
  load_infos(all);
  std::unordered_map<std::string, size_t> index;
  std::vector<std::string> nonmerge;
  for (size_t i = 0; i < s.up.size(); ++i) index[s.up[i]] = i;
  s.parents.resize(s.up.size());
  s.merge.resize(s.up.size());
  for (size_t i = 0; i < s.up.size(); ++i) {
    const auto& c = info(s.up[i]);
    s.merge[i] = c.is_merge();
    for (const auto& p : c.parents) {
      auto it = index.find(p);
      if (it != index.end()) s.parents[i].push_back(it->second);
    }
    if (!s.merge[i]) nonmerge.push_back(s.up[i]);
  }
  nonmerge.insert(nonmerge.end(), s.fork.begin(), s.fork.end());
  load_patch_ids(nonmerge);
}

State Analyzer::state(const std::string& fork_sha, const std::string& upstream_sha, const std::string& fork_name,
                      const std::string& upstream_name, const Config& cfg) {
  State s;
  s.fork_sha = fork_sha;
  s.upstream_sha = upstream_sha;
  load_ranges(s, fork_name, upstream_name);
  match_picks(*this, s, cfg);
  return s;
}

Metrics Analyzer::metrics(const State& s, const std::vector<bool>& integ) {
  Metrics m;
  m.upstream_head = to_ref(info(s.upstream_sha));
  std::vector<bool> fully(s.up.size(), false);
  long ip = -1, newest = -1;
  for (size_t i = 0; i < s.up.size(); ++i) {
    bool excluded = !s.skip.empty() && s.skip[i] != 0 && !integ[i];
    bool ok = s.merge[i] || integ[i] || excluded;
    for (size_t p : s.parents[i]) ok = ok && fully[p];
    fully[i] = ok;
    if (ok) ip = long(i);
    if (s.merge[i]) continue;
    ++m.upstream_commits;
    if (integ[i]) {
      ++m.integrated_commits;
      newest = long(i);
    } else if (excluded) {
      ++m.excluded_commits;
    } else {
      ++m.pending_commits;
    }
  }
  if (ip >= 0) {
    m.integration_point = to_ref(info(s.up[size_t(ip)]));
  } else {
    m.integration_point = to_ref(info(s.base_sha));
    m.integration_point_is_merge_base = true;
  }
  m.seconds_behind = std::max<int64_t>(0, m.upstream_head.commit_time - m.integration_point.commit_time);
  m.days_behind = double(m.seconds_behind) / double(kDay);
  if (newest >= 0) {
    m.newest_integrated = to_ref(info(s.up[size_t(newest)]));
    m.seconds_behind_frontier = std::min(
        m.seconds_behind, std::max<int64_t>(0, m.upstream_head.commit_time - m.newest_integrated->commit_time));
    std::vector<bool> seen(s.up.size(), false);
    std::vector<size_t> stack = {size_t(newest)};
    seen[size_t(newest)] = true;
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      if (!s.merge[i] && !integ[i] && (s.skip.empty() || s.skip[i] == 0)) ++m.backlog_commits;
      for (size_t p : s.parents[i])
        if (!seen[p]) seen[p] = true, stack.push_back(p);
    }
  }
  if (!m.newest_integrated) m.seconds_behind_frontier = m.seconds_behind;
  m.days_behind_frontier = double(m.seconds_behind_frontier) / double(kDay);
  return m;
}

}  // namespace kb::upstream::detail
