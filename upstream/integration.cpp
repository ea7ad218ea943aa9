// Which upstream commits the fork already carries (patch-id, cherry-pick -x trailer, author triple),
// and the metrics of one (fork, upstream) pair: integration point, days behind, backlog.
#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "upstream/internal.h"

namespace kb::upstream::detail {

using git::short_sha;

namespace {

// Cherry-picks keep the author, the author date (to the second) and the subject.
std::string author_key(const git::CommitInfo& c) {
  return c.author_email + '\n' + std::to_string(c.author_time) + '\n' + c.subject;
}

// The fork side of the matching: patch id -> first fork commit; cherry-pick trailers -> named sha
// (prefix); author key -> fork index (-1: ambiguous).
struct ForkIndex {
  std::unordered_map<std::string, std::string> pid_to_fork;
  std::vector<std::pair<std::string, size_t>> trailers;  // (named sha prefix, fork index)
  std::unordered_map<std::string, long> author_to_fork;
};

}  // namespace

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
  for (auto& c : repo_.commit_infos(missing)) infos_.emplace(c.sha, std::move(c));
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
  auto got = repo_.patch_ids(missing);
  for (const auto& s : missing) {
    auto it = got.find(s);
    pids_[s] = it == got.end() ? std::optional<std::string>() : it->second;
  }
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

void Analyzer::match_integrated(State& s, bool match_by_author) {
  ForkIndex fx;
  static const std::regex trailer_re(R"(\(cherry picked from commit ([0-9a-fA-F]{7,64})\))");
  for (size_t j = 0; j < s.fork.size(); ++j) {
    if (const auto& p = pid(s.fork[j])) fx.pid_to_fork.emplace(*p, s.fork[j]);
    if (match_by_author) {
      auto [it, fresh] = fx.author_to_fork.emplace(author_key(info(s.fork[j])), long(j));
      if (!fresh) it->second = -1;
    }
    const std::string& msg = info(s.fork[j]).message;
    for (std::sregex_iterator it(msg.begin(), msg.end(), trailer_re), end; it != end; ++it) {
      std::string named = (*it)[1].str();
      std::transform(named.begin(), named.end(), named.begin(), ::tolower);
      fx.trailers.emplace_back(named, j);
    }
  }
  s.how.assign(s.up.size(), kNotIntegrated);
  s.carrier.assign(s.up.size(), "");
  s.fork_is_pick.assign(s.fork.size(), false);
  std::set<std::string> up_pids;
  std::unordered_map<std::string, int> up_author_count;
  if (match_by_author)
    for (size_t i = 0; i < s.up.size(); ++i)
      if (!s.merge[i]) ++up_author_count[author_key(info(s.up[i]))];
  for (size_t i = 0; i < s.up.size(); ++i) {
    if (s.merge[i]) continue;
    const auto& p = pid(s.up[i]);
    if (p) {
      up_pids.insert(*p);
      auto it = fx.pid_to_fork.find(*p);
      if (it != fx.pid_to_fork.end()) {
        s.how[i] = kByPatchId;
        s.carrier[i] = it->second;
        continue;
      }
    }
    for (const auto& [named, j] : fx.trailers)
      if (s.up[i].compare(0, named.size(), named) == 0) {
        s.how[i] = kByTrailer;
        s.carrier[i] = s.fork[j];
        s.fork_is_pick[j] = true;
        break;
      }
    if (s.how[i] == kNotIntegrated && match_by_author) {
      std::string key = author_key(info(s.up[i]));
      auto it = fx.author_to_fork.find(key);
      if (it != fx.author_to_fork.end() && it->second >= 0 && up_author_count[key] == 1) {
        s.how[i] = kByAuthor;
        s.carrier[i] = s.fork[size_t(it->second)];
        s.fork_is_pick[size_t(it->second)] = true;
      }
    }
  }
  for (size_t j = 0; j < s.fork.size(); ++j)
    if (const auto& p = pid(s.fork[j]); p && up_pids.count(*p)) s.fork_is_pick[j] = true;
}

State Analyzer::state(const std::string& fork_sha, const std::string& upstream_sha, const std::string& fork_name,
                      const std::string& upstream_name, bool match_by_author) {
  State s;
  s.fork_sha = fork_sha;
  s.upstream_sha = upstream_sha;
  load_ranges(s, fork_name, upstream_name);
  match_integrated(s, match_by_author);
  return s;
}

Metrics Analyzer::metrics(const State& s, const std::vector<bool>& integ) {
  Metrics m;
  m.upstream_head = to_ref(info(s.upstream_sha));
  std::vector<bool> fully(s.up.size(), false);
  long ip = -1, newest = -1;
  for (size_t i = 0; i < s.up.size(); ++i) {
    bool ok = s.merge[i] || integ[i];
    for (size_t p : s.parents[i]) ok = ok && fully[p];
    fully[i] = ok;
    if (ok) ip = long(i);
    if (s.merge[i]) continue;
    ++m.upstream_commits;
    if (integ[i]) {
      ++m.integrated_commits;
      newest = long(i);
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
    std::vector<bool> seen(s.up.size(), false);
    std::vector<size_t> stack = {size_t(newest)};
    seen[size_t(newest)] = true;
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      if (!s.merge[i] && !integ[i]) ++m.backlog_commits;
      for (size_t p : s.parents[i])
        if (!seen[p]) seen[p] = true, stack.push_back(p);
    }
  }
  return m;
}

}  // namespace kb::upstream::detail
