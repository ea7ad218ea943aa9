// Dependencies between pending upstream commits: lines (or files) an older pending commit last
// changed, tracked through every upstream commit of the range, and message references (reverts,
// relands, fixup!/squash!/amend!, mentioned shas).
#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "upstream/internal.h"
#include "upstream/pr_refs.h"

namespace kb::upstream::detail {

using git::short_sha;

void DepBuilder::add(size_t from, size_t on, const std::string& reason) {
  if (from == on) return;
  auto& rs = deps_[from][on];
  if (std::find(rs.begin(), rs.end(), reason) == rs.end()) rs.push_back(reason);
}

std::vector<Dependency> DepBuilder::take(size_t from) {
  std::vector<Dependency> out;
  for (auto& [on, rs] : deps_[from]) out.push_back({on, rs});
  return out;
}

namespace {

// Follows which pending commit last changed each line of each file, through every upstream commit
// of the range in order (integrated commits shift lines and take ownership away).
class LineTracker {
 public:
  LineTracker(bool hunk_level, int margin) : hunk_(hunk_level), margin_(margin) {}

  // pending: index of the commit among pending ones, or -1 for an integrated commit.
  void apply(const git::CommitDiff& d, long pending, DepBuilder& deps) {
    for (const auto& f : d.files) {
      if (pending >= 0) {
        size_t p = size_t(pending);
        if (f.created) {
          auto it = deleted_by_.find(f.path);
          if (it != deleted_by_.end() && it->second >= 0)
            deps.add(p, size_t(it->second), fmt::format("re-creates {}, which it deleted", f.path));
        }
        if (!hunk_ || f.binary) {
          auto it = last_.find(f.path);
          if (it != last_.end())
            deps.add(p, it->second,
                     fmt::format("changes {}file {} it also changed", f.binary ? "binary " : "", f.path));
        }
      }
      if (hunk_ && !f.binary) track_hunks(f, pending, deps);
      if (pending >= 0) last_[f.path] = size_t(pending);
      if (f.deleted) deleted_by_[f.path] = pending;
      else if (f.created) deleted_by_.erase(f.path);
    }
  }

 private:
  void track_hunks(const git::FileDiff& f, long pending, DepBuilder& deps) {
    std::vector<long>& own = owners_[f.path];
    if (f.created) own.clear();
    // Dependencies first, on the parent's version.
    if (pending >= 0) {
      for (const auto& h : f.hunks) {
        long lo = h.old_count > 0 ? h.old_start - 1 : h.old_start;
        long hi = h.old_count > 0 ? h.old_start - 1 + h.old_count : h.old_start;
        long a = std::max<long>(0, lo - margin_), b = std::min<long>(long(own.size()), hi + margin_);
        // One reason per run of lines with the same owner: "f:3" or "f:3-7".
        for (long k = a; k < b;) {
          long o = own[size_t(k)], e = k + 1;
          while (e < b && own[size_t(e)] == o) ++e;
          if (o >= 0 && o != pending)
            deps.add(size_t(pending), size_t(o),
                     e - k == 1 ? fmt::format("touches lines it changed in {}:{}", f.path, k + 1)
                                : fmt::format("touches lines it changed in {}:{}-{}", f.path, k + 1, e));
          k = e;
        }
      }
    }
    // Then apply bottom-up so earlier positions stay valid.
    std::vector<git::Hunk> hs = f.hunks;
    std::sort(hs.begin(), hs.end(), [](const auto& x, const auto& y) { return x.old_start > y.old_start; });
    for (const auto& h : hs) {
      size_t lo = size_t(h.old_count > 0 ? h.old_start - 1 : h.old_start);
      size_t hi = lo + size_t(h.old_count);
      if (own.size() < hi) own.resize(hi, -1);
      own.erase(own.begin() + long(lo), own.begin() + long(hi));
      own.insert(own.begin() + long(lo), size_t(h.new_count), pending);
    }
    if (f.deleted) own.clear();
  }

  bool hunk_;
  int margin_;
  std::unordered_map<std::string, std::vector<long>> owners_;
  std::unordered_map<std::string, size_t> last_;       // file -> last pending commit changing it
  std::unordered_map<std::string, long> deleted_by_;   // file -> pending commit that deleted it (-1: other)
};

}  // namespace

void add_diff_dependencies(const Work& w, Report& r, DepBuilder& deps) {
  const State& s = w.s;
  // Diffs of every non-merge upstream commit in the range (integrated ones shift line numbers).
  bool linear = std::none_of(s.merge.begin(), s.merge.end(), [](bool b) { return b; });
  bool hunk_level = w.cfg.dependency == Config::Level::Hunk;
  if (hunk_level && !linear) {
    hunk_level = false;
    r.notes.push_back("upstream range contains merge commits: line tracking needs a linear history, so "
                      "dependencies are computed at file level");
  }
  r.dependency_level = hunk_level ? "hunk" : "file";
  std::vector<std::string> nonmerge;
  for (size_t i = 0; i < s.up.size(); ++i)
    if (!s.merge[i]) nonmerge.push_back(s.up[i]);
  std::vector<git::CommitDiff> diffs = w.an.diffs(nonmerge);
  LineTracker tracker(hunk_level, w.cfg.hunk_margin);
  size_t k = 0;
  for (size_t i = 0; i < s.up.size(); ++i) {
    if (s.merge[i]) continue;
    const auto& d = diffs[k++];
    tracker.apply(d, w.pending_of[i], deps);
    if (w.pending_of[i] >= 0) {
      auto& p = r.pending[size_t(w.pending_of[i])];
      for (const auto& f : d.files) {
        p.files.push_back(f.path);
        p.lines_changed += f.lines_added() + f.lines_removed();
      }
      std::sort(p.files.begin(), p.files.end());
    }
  }
}

namespace {

// Finds the older upstream commits one pending commit's message names and records a dependency
// (pending target) or a note (integrated target).
class MessageRefs {
 public:
  MessageRefs(Work& w, Report& r, DepBuilder& deps) : w_(w), s_(w.s), r_(r), deps_(deps) {}

  void scan(size_t pi) {
    size_t i = w_.range_of[pi];
    const auto& c = w_.an.info(s_.up[i]);
    std::set<std::string> explicit_shas = scan_reverts(pi, i, c.message);
    scan_subject(pi, i, c.subject);
    static const std::regex sha_re(R"((^|[^0-9A-Za-z])([0-9a-f]{7,40})(?![0-9A-Za-z]))");
    for (std::sregex_iterator it(c.message.begin(), c.message.end(), sha_re), end; it != end; ++it) {
      std::string tok = (*it)[2].str();
      if (explicit_shas.count(tok)) continue;
      long j = find_by_prefix(i, tok);
      if (j >= 0) ref(pi, j, "mentions", "its sha " + tok + " is in the message");
    }
  }

 private:
  long find_by_subject(size_t before, const std::string& subject) {
    for (size_t j = before; j-- > 0;)
      if (!s_.merge[j] && w_.an.info(s_.up[j]).subject == subject) return long(j);
    return -1;
  }
  long find_by_prefix(size_t before, const std::string& prefix) const {
    long found = -1;
    for (size_t j = 0; j < before; ++j)
      if (!s_.merge[j] && s_.up[j].compare(0, prefix.size(), prefix) == 0) {
        if (found >= 0) return -1;  // ambiguous
        found = long(j);
      }
    return found;
  }
  void ref(size_t pi, long j, const std::string& verb, const std::string& why) {
    if (j < 0) return;
    if (w_.pending_of[size_t(j)] >= 0) {
      deps_.add(pi, size_t(w_.pending_of[size_t(j)]), fmt::format("{} it ({})", verb, why));
      return;
    }
    auto& notes = r_.pending[pi].notes;
    std::string note = fmt::format("{} {}, which the fork already has (by {} as {})", verb, short_sha(s_.up[size_t(j)]),
                                   how_name(s_.how[size_t(j)]), short_sha(s_.carrier[size_t(j)]));
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  // "This reverts commit <sha>": returns the shas named that way (not counted again as mentions).
  std::set<std::string> scan_reverts(size_t pi, size_t i, const std::string& message) {
    static const std::regex reverts_sha_re(R"(This reverts commit ([0-9a-fA-F]{7,64}))");
    std::set<std::string> explicit_shas;
    for (std::sregex_iterator it(message.begin(), message.end(), reverts_sha_re), end; it != end; ++it) {
      std::string named = (*it)[1].str();
      std::transform(named.begin(), named.end(), named.begin(), ::tolower);
      explicit_shas.insert(named);
      long j = find_by_prefix(i, named);
      if (j >= 0) {
        record(pi, j, &PendingCommit::reverts);
        ref(pi, j, "reverts", "\"This reverts commit " + short_sha(named) + "\"");
      } else if (auto full = w_.repo.try_resolve(named); full && w_.repo.is_ancestor(*full, w_.fork_sha)) {
        r_.pending[pi].notes.push_back(fmt::format("reverts {}, which is in the fork's history", short_sha(*full)));
      }
    }
    return explicit_shas;
  }
  long find_by_pr(size_t before, int pr) {
    for (size_t j = before; j-- > 0;)
      if (!s_.merge[j] && upstream_pr(w_.cfg, w_.an.info(s_.up[j]).subject) == pr) return long(j);
    return -1;
  }
  void record(size_t pi, long j, std::string PendingCommit::*field) {
    if (j >= 0 && (r_.pending[pi].*field).empty()) r_.pending[pi].*field = s_.up[size_t(j)];
  }
  // Revert "..." [(#N)] and GitHub's "Reverts owner/name#N", Reland ..., fixup!/squash!/amend! ...
  void scan_subject(size_t pi, size_t i, const std::string& subject) {
    static const std::regex revert_subj_re(R"re(^Revert "(.*)"(?: \(#\d+\))?$)re");
    static const std::regex reland_re(
        R"re(^(?:Reland|Re-land|Recommit|\[Reland\])(?::| )\s*(?:"(.*)"(?: \(#\d+\))?|(.*))$)re", std::regex::icase);
    static const std::regex fixup_re(R"(^(fixup|squash|amend)! (.*)$)");
    static const std::regex hex_re("[0-9a-f]{7,40}");
    std::smatch m;
    if (std::regex_match(subject, m, revert_subj_re)) {
      std::string inner = m[1].str();
      long j = find_by_subject(i, inner);
      if (auto pr = upstream_pr(w_.cfg, inner); j < 0 && pr) j = find_by_pr(i, *pr);
      record(pi, j, &PendingCommit::reverts);
      ref(pi, j, "reverts", "Revert " + quote_subject(inner));
    } else if (std::regex_match(subject, m, reland_re)) {
      std::string inner = m[1].matched ? m[1].str() : m[2].str();
      long j = find_by_subject(i, inner);
      if (auto pr = upstream_pr(w_.cfg, inner); j < 0 && pr) j = find_by_pr(i, *pr);
      record(pi, j, &PendingCommit::relands);
      ref(pi, j, "relands", "Reland " + quote_subject(inner));
      ref(pi, find_by_subject(i, "Revert " + quote_subject(inner)), "relands after", "this reverted the original");
      for (size_t k = 0; j >= 0 && k < pi; ++k)  // a revert found by PR number or sha
        if (r_.pending[k].reverts == s_.up[size_t(j)]) ref(pi, long(w_.range_of[k]), "relands after", "this reverted the original");
    }
    for (int pr : revert_targets(w_.cfg, w_.an.info(s_.up[i]).message)) {
      long j = find_by_pr(i, pr);
      record(pi, j, &PendingCommit::reverts);
      ref(pi, j, "reverts", fmt::format("\"Reverts #{}\"", pr));
    }
    if (std::regex_match(subject, m, fixup_re)) {
      std::string kind = m[1].str(), target = m[2].str();
      long j = find_by_subject(i, target);
      // git also accepts a sha (prefix) after "fixup! ".
      if (j < 0 && std::regex_match(target, hex_re)) j = find_by_prefix(i, target);
      ref(pi, j, "amends", kind + "! " + quote_subject(target));
    }
  }

  Work& w_;
  const State& s_;
  Report& r_;
  DepBuilder& deps_;
};

}  // namespace

void add_message_dependencies(Work& w, Report& r, DepBuilder& deps) {
  MessageRefs refs(w, r, deps);
  for (size_t pi = 0; pi < r.pending.size(); ++pi) refs.scan(pi);
}

}  // namespace kb::upstream::detail
