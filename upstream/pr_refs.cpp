// Upstream PR numbers: the trailing "(#N)" of a squash-merged upstream subject, and the upstream PR
// numbers a fork commit names — in its subject, in PR URLs, and in the picked sections of a bundle
// body (skipped, deferred and won't-port sections excluded).
#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

#include "upstream/pr_refs.h"

namespace kb::upstream::detail {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

bool in_range(const Config& cfg, int n) {
  return (cfg.upstream_pr_min == 0 || n >= cfg.upstream_pr_min) && (cfg.upstream_pr_max == 0 || n <= cfg.upstream_pr_max);
}

bool range_set(const Config& cfg) { return cfg.upstream_pr_min != 0 || cfg.upstream_pr_max != 0; }

struct Mention {
  int n = 0;
  std::string repo;  // empty for a bare "#N"
  bool url = false;
};

// "https://host/owner/name/pull/N", "owner/name#N" and bare "#N" (not part of a word or a path).
std::vector<Mention> mentions(const std::string& text) {
  static const std::regex re(
      R"(https?://[^\s/]+/([\w.-]+/[\w.-]+)/pull/(\d{1,9})|([\w.-]+/[\w.-]+)#(\d{1,9})|(^|[^\w/&#])#(\d{1,9}))");
  std::vector<Mention> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    const auto& m = *it;
    if (m[2].matched) out.push_back({std::stoi(m[2].str()), m[1].str(), true});
    else if (m[4].matched) out.push_back({std::stoi(m[4].str()), m[3].str(), false});
    else out.push_back({std::stoi(m[6].str()), "", false});
  }
  return out;
}

bool is_upstream(const Config& cfg, const Mention& m) {
  if (!in_range(cfg, m.n)) return false;
  if (!m.repo.empty() && !cfg.upstream_pr_repo.empty()) return lower(m.repo) == lower(cfg.upstream_pr_repo);
  return true;
}

// The kind of section a body line opens: 1 picked, -1 skipped, 0 not a heading. `rest` gets the
// text after the heading (an inline list).
int heading(const Config& cfg, const std::string& line, std::string& rest) {
  size_t b = line.find_first_not_of(" \t#*-_>");
  if (b == std::string::npos) return 0;
  std::string l = lower(line.substr(b));
  auto starts = [&](const std::vector<std::string>& hs) {
    for (const auto& h : hs) {
      std::string x = lower(h);
      if (l.compare(0, x.size(), x) == 0 && (l.size() == x.size() || !std::isalpha((unsigned char)l[x.size()]))) {
        size_t colon = l.find(':', x.size());
        rest = colon == std::string::npos ? std::string() : line.substr(b + colon + 1);
        return true;
      }
    }
    return false;
  };
  if (starts(cfg.bundle_skip_headings)) return -1;
  if (starts(cfg.bundle_pick_headings)) return 1;
  return 0;
}

}  // namespace

std::optional<int> upstream_pr(const Config& cfg, const std::string& subject) {
  static const std::regex tail_re(R"(\(#(\d{1,9})\)\s*$)");
  std::smatch m;
  if (!std::regex_search(subject, m, tail_re)) return std::nullopt;
  int n = std::stoi(m[1].str());
  if (!in_range(cfg, n)) return std::nullopt;
  return n;
}

ForkRefs fork_refs(const Config& cfg, const std::string& subject, const std::string& message) {
  ForkRefs r;
  // The fork's own PR number ends its subject; it is upstream's only inside a configured range.
  std::string subj = subject;
  static const std::regex own_re(R"(\s*\(#(\d{1,9})\)\s*$)");
  std::smatch m;
  if (std::regex_search(subj, m, own_re) && !(range_set(cfg) && in_range(cfg, std::stoi(m[1].str()))))
    subj = m.prefix().str();
  std::vector<int> in_subject;
  for (const auto& x : mentions(subj))
    if (is_upstream(cfg, x)) in_subject.push_back(x.n);
  std::istringstream body(message);
  std::string line;
  std::getline(body, line);  // the subject
  int section = 0;
  std::set<int> skipped;
  std::vector<int> picked, urls;
  static const std::regex sha_re(R"((^|[^0-9A-Za-z])([0-9a-f]{7,40})(?![0-9A-Za-z]))");
  while (std::getline(body, line)) {
    std::string rest;
    if (int h = heading(cfg, line, rest)) {
      section = h;
      r.bundle = r.bundle || h == 1;
      line = rest;
    }
    for (const auto& x : mentions(line)) {
      if (!is_upstream(cfg, x)) continue;
      if (section < 0) skipped.insert(x.n);
      else if (section > 0) picked.push_back(x.n);
      else if (x.url && line.rfind("Reverts", 0) != 0) urls.push_back(x.n);
    }
    if (section > 0)
      for (std::sregex_iterator it(line.begin(), line.end(), sha_re), end; it != end; ++it)
        r.picked_shas.push_back((*it)[2].str());
  }
  if (in_subject.size() > 1) r.bundle = true;
  std::vector<int> all;
  if (r.bundle) {
    all = in_subject;
    all.insert(all.end(), picked.begin(), picked.end());
  } else if (!in_subject.empty()) {
    all.push_back(in_subject.back());  // "[Cherry-pick] '<upstream subject (#N)>'"
  }
  all.insert(all.end(), urls.begin(), urls.end());
  for (int n : all)
    if (!skipped.count(n) && std::find(r.prs.begin(), r.prs.end(), n) == r.prs.end()) r.prs.push_back(n);
  r.skipped.assign(skipped.begin(), skipped.end());
  return r;
}

std::vector<int> revert_targets(const Config& cfg, const std::string& message) {
  static const std::regex re(R"((?:^|\n)Reverts\s+(\S*#\d{1,9}|https?://\S+/pull/\d{1,9}))");
  std::vector<int> out;
  for (std::sregex_iterator it(message.begin(), message.end(), re), end; it != end; ++it)
    for (const auto& x : mentions((*it)[1].str()))
      if (is_upstream(cfg, x)) out.push_back(x.n);
  return out;
}

}  // namespace kb::upstream::detail
