// Which upstream commits the fork carries, by rule, strongest first: patch-id, pick trailers (-x and
// configured regexes), the upstream PR number named by a fork commit, the picked lists of bundle
// commits, author + author date + subject, and as a last resort the share of added lines (weaker
// evidence). Then the commits the config excludes (won't port / deferred).
#include <algorithm>
#include <regex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "git/glob.h"
#include "upstream/internal.h"
#include "upstream/pr_refs.h"

namespace kb::upstream::detail {

using git::short_sha;

namespace {

// Cherry-picks keep the author, the author date (to the second) and the subject.
std::string author_key(const git::CommitInfo& c) {
  return c.author_email + '\n' + std::to_string(c.author_time) + '\n' + c.subject;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The fork side of every rule.
struct ForkIndex {
  std::unordered_map<std::string, size_t> pid;                      // patch id -> fork index
  std::vector<std::tuple<std::string, size_t, std::string>> named;  // (sha prefix, fork index, trailer text)
  std::unordered_map<int, std::pair<size_t, bool>> prs;             // PR -> (fork index, from a bundle)
  std::vector<std::pair<std::string, size_t>> bundle_shas;          // (sha prefix, fork index)
  std::unordered_map<std::string, long> author;                     // author key -> fork index, -1 ambiguous
};

class Matcher {
 public:
  Matcher(Analyzer& an, State& s, const Config& cfg) : an_(an), s_(s), cfg_(cfg) {
    if (cfg.preset("git-x")) trailers_.emplace_back(R"(\(cherry picked from commit ([0-9a-fA-F]{7,64})\))");
    for (const auto& t : cfg.pick_trailers) trailers_.emplace_back(t);
  }

  void run() {
    index_fork();
    s_.how.assign(s_.up.size(), kNotIntegrated);
    s_.carrier.assign(s_.up.size(), "");
    s_.evidence.assign(s_.up.size(), "");
    s_.fork_is_pick.assign(s_.fork.size(), false);
    std::unordered_map<std::string, int> up_author;
    if (cfg_.match_by_author)
      for (size_t i = 0; i < s_.up.size(); ++i)
        if (!s_.merge[i]) ++up_author[author_key(an_.info(s_.up[i]))];
    std::set<std::string> up_pids;
    for (size_t i = 0; i < s_.up.size(); ++i) {
      if (s_.merge[i]) continue;
      if (const auto& p = an_.pid(s_.up[i])) up_pids.insert(*p);
      match_one(i, up_author);
    }
    for (size_t j = 0; j < s_.fork.size(); ++j)
      if (const auto& p = an_.pid(s_.fork[j]); p && up_pids.count(*p)) s_.fork_is_pick[j] = true;
    match_content();
  }

 private:
  void index_fork() {
    bool squash = cfg_.preset("github-squash"), bundle = cfg_.preset("bundle");
    for (size_t j = 0; j < s_.fork.size(); ++j) {
      const auto& c = an_.info(s_.fork[j]);
      if (const auto& p = an_.pid(s_.fork[j])) fx_.pid.emplace(*p, j);
      if (cfg_.match_by_author) {
        auto [it, fresh] = fx_.author.emplace(author_key(c), long(j));
        if (!fresh) it->second = -1;
      }
      for (const auto& re : trailers_)
        for (std::sregex_iterator it(c.message.begin(), c.message.end(), re), end; it != end; ++it) {
          std::string named = lower((*it)[it->size() > 1 ? 1 : 0].str());
          fx_.named.emplace_back(named, j, trim((*it)[0].str()));
        }
      if (!squash && !bundle) continue;
      ForkRefs refs = fork_refs(cfg_, c.subject, c.message);
      if (refs.bundle ? !bundle : !squash) continue;
      for (int n : refs.prs) fx_.prs.emplace(n, std::make_pair(j, refs.bundle));
      for (const auto& sha : refs.picked_shas) fx_.bundle_shas.emplace_back(sha, j);
    }
  }

  void set(size_t i, int how, size_t j, std::string evidence) {
    s_.how[i] = how;
    s_.carrier[i] = s_.fork[j];
    s_.evidence[i] = std::move(evidence);
    if (how != kByPatchId) s_.fork_is_pick[j] = true;
  }

  void match_one(size_t i, std::unordered_map<std::string, int>& up_author) {
    const std::string& sha = s_.up[i];
    if (const auto& p = an_.pid(sha))
      if (auto it = fx_.pid.find(*p); it != fx_.pid.end()) return set(i, kByPatchId, it->second, "");
    for (const auto& [named, j, text] : fx_.named)
      if (sha.compare(0, named.size(), named) == 0) return set(i, kByTrailer, j, "trailer \"" + text + "\"");
    const auto& c = an_.info(sha);
    if (auto n = upstream_pr(cfg_, c.subject))
      if (auto it = fx_.prs.find(*n); it != fx_.prs.end())
        return set(i, it->second.second ? kByBundle : kByPr, it->second.first,
                   fmt::format("#{} named by the fork commit", *n));
    for (const auto& [prefix, j] : fx_.bundle_shas)
      if (sha.compare(0, prefix.size(), prefix) == 0) return set(i, kByBundle, j, "sha listed as picked");
    if (cfg_.match_by_author) {
      std::string key = author_key(c);
      auto it = fx_.author.find(key);
      if (it != fx_.author.end() && it->second >= 0 && up_author[key] == 1) set(i, kByAuthor, size_t(it->second), "");
    }
  }

  // Share of an upstream commit's distinct non-blank added lines that fork commits add.
  void match_content() {
    if (cfg_.content_threshold <= 0) return;
    std::vector<std::string> need = s_.fork;
    for (size_t i = 0; i < s_.up.size(); ++i)
      if (!s_.merge[i] && s_.how[i] == kNotIntegrated) need.push_back(s_.up[i]);
    if (need.size() == s_.fork.size()) return;
    an_.load_added(need);
    std::unordered_map<std::string, std::vector<size_t>> fork_lines;
    for (size_t j = 0; j < s_.fork.size(); ++j)
      for (const auto& l : an_.added(s_.fork[j]))
        if (auto t = trim(l); !t.empty()) {
          auto& v = fork_lines[t];
          if (v.empty() || v.back() != j) v.push_back(j);
        }
    for (size_t i = 0; i < s_.up.size(); ++i) {
      if (s_.merge[i] || s_.how[i] != kNotIntegrated) continue;
      std::set<std::string> lines;
      for (const auto& l : an_.added(s_.up[i]))
        if (auto t = trim(l); !t.empty()) lines.insert(t);
      if (int(lines.size()) < cfg_.content_min_lines) continue;
      std::unordered_map<size_t, int> hits;
      int found = 0;
      for (const auto& l : lines)
        if (auto it = fork_lines.find(l); it != fork_lines.end()) {
          ++found;
          for (size_t j : it->second) ++hits[j];
        }
      double share = double(found) / double(lines.size());
      if (found == 0 || share < cfg_.content_threshold) continue;
      auto best = std::max_element(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
        return a.second < b.second || (a.second == b.second && a.first > b.first);
      });
      set(i, kByContent, best->first, fmt::format("{} of {} added lines ({:.0f}%) are in the fork", found,
                                                  lines.size(), 100.0 * share));
    }
  }

  Analyzer& an_;
  State& s_;
  const Config& cfg_;
  std::vector<std::regex> trailers_;
  ForkIndex fx_;
};

// The first skip entry naming an upstream commit, and which field matched.
std::pair<int, std::string> skip_of(const Config& cfg, const git::CommitInfo& c) {
  auto pr = upstream_pr(cfg, c.subject);
  for (size_t k = 0; k < cfg.skip.size(); ++k) {
    const auto& e = cfg.skip[k];
    if (!e.sha.empty() && c.sha.compare(0, e.sha.size(), lower(e.sha)) == 0) return {int(k) + 1, "sha " + e.sha};
    if (e.pr != 0 && pr && *pr == e.pr) return {int(k) + 1, fmt::format("PR #{}", e.pr)};
    if (!e.subject.empty() && glob_match(e.subject, c.subject)) return {int(k) + 1, "subject " + e.subject};
  }
  return {0, ""};
}

}  // namespace

void match_picks(Analyzer& an, State& s, const Config& cfg) {
  Matcher(an, s, cfg).run();
  s.skip.assign(s.up.size(), 0);
  s.skip_rule.assign(s.up.size(), "");
  if (cfg.skip.empty()) return;
  for (size_t i = 0; i < s.up.size(); ++i) {
    if (s.merge[i] || s.how[i] != kNotIntegrated) continue;
    auto [k, rule] = skip_of(cfg, an.info(s.up[i]));
    s.skip[i] = k;
    s.skip_rule[i] = rule;
  }
}

}  // namespace kb::upstream::detail
