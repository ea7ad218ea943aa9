// The fork's own changes and collisions with them: fork commits that are rebases or squashes are
// left out (with the picks), the rest give the files and lines the fork changed since the merge base,
// and each pending commit near those lines is picked onto the fork head by a trial merge.
#include <algorithm>
#include <climits>
#include <regex>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "upstream/internal.h"

namespace kb::upstream::detail {

using git::short_sha;

namespace {

constexpr size_t kTrialChain = 20;   // pending dependencies picked first, at most
constexpr size_t kPathsPerCall = 500;  // paths per `git diff-tree` (argv length)

size_t tracked_files(const git::Repo& repo, const std::string& rev) {
  std::string out = repo.check({"ls-tree", "-r", "-z", "--name-only", rev});
  return size_t(std::count(out.begin(), out.end(), '\0'));
}

// Why a fork commit is a rebase or squash; empty when it is neither.
class RebaseRule {
 public:
  RebaseRule(const Config& cfg, size_t tracked)
      : share_(cfg.rebase_file_share), min_files_(size_t(cfg.rebase_min_files)), tracked_(tracked) {
    for (const auto& s : cfg.rebase_subjects)
      res_.emplace_back(s, checked_regex(s, std::regex::ECMAScript | std::regex::icase));
  }
  std::string why(const std::string& subject, size_t files) const {
    for (const auto& [text, re] : res_)
      if (std::regex_search(subject, re)) return fmt::format("subject matches '{}'", text);
    if (share_ > 0 && tracked_ > 0 && files >= min_files_ && double(files) > share_ * double(tracked_))
      return fmt::format("changes {} of {} tracked files ({:.0f}% > {:.0f}%)", files, tracked_,
                         100.0 * double(files) / double(tracked_), 100.0 * share_);
    return "";
  }

 private:
  std::vector<std::pair<std::string, std::regex>> res_;
  double share_;
  size_t min_files_, tracked_;
};

using Ranges = std::map<std::string, std::vector<std::pair<long, long>>>;  // path -> [lo, hi), 0-based

// Lines of the merge base's version the fork changed, for the files its own commits changed. A file
// git cannot diff (an unreadable blob) counts whole.
Ranges fork_ranges(const Work& w, const std::map<std::string, std::string>& fork_files) {
  Ranges out;
  std::vector<std::string> paths;
  for (const auto& [p, sha] : fork_files) paths.push_back(p);
  for (size_t b = 0; b < paths.size(); b += kPathsPerCall) {
    std::vector<std::string> args = {"--literal-pathspecs", "diff-tree", "-p", "-U0", "-r", "--no-renames",
                                     "--no-ext-diff", "--no-textconv", w.s.base_sha, w.fork_sha, "--"};
    size_t e = std::min(paths.size(), b + kPathsPerCall);
    args.insert(args.end(), paths.begin() + long(b), paths.begin() + long(e));
    RunResult rr = w.repo.run(args);
    if (!rr.ok()) {
      for (size_t i = b; i < e; ++i) out[paths[i]].push_back({0, LONG_MAX});
      continue;
    }
    for (const auto& d : git::parse_diff_tree(rr.out))
      for (const auto& f : d.files) {
        auto& rs = out[f.path];
        if (f.binary || f.created || f.deleted) rs.push_back({0, LONG_MAX});
        for (const auto& h : f.hunks) {
          long lo = h.old_count > 0 ? h.old_start - 1 : h.old_start;
          rs.push_back({lo, lo + h.old_count});
        }
      }
  }
  return out;
}

// "path:line" of the first hunk of each file that lies within `margin` lines of a fork change.
std::vector<std::string> collisions(const git::CommitDiff& d, const Ranges& fork, long margin) {
  std::vector<std::string> out;
  for (const auto& f : d.files) {
    auto it = fork.find(f.path);
    if (it == fork.end()) continue;
    bool whole = f.binary || f.hunks.empty();
    for (const auto& [a, b] : it->second) {
      if (whole) {
        out.push_back(f.path);
        break;
      }
      auto h = std::find_if(f.hunks.begin(), f.hunks.end(), [&](const git::Hunk& x) {
        long lo = x.old_count > 0 ? x.old_start - 1 : x.old_start;
        return lo - margin < b && a < lo + x.old_count + margin;
      });
      if (h != f.hunks.end()) {
        out.push_back(fmt::format("{}:{}", f.path, std::max(1, h->old_start)));
        break;
      }
    }
  }
  return out;
}

// The pending commits to pick before `pi`: its dependency closure, oldest first (only itself when
// the closure exceeds kTrialChain).
std::vector<size_t> trial_chain(const Report& r, size_t pi) {
  std::vector<size_t> closure = dependency_closure(r, pi);
  if (closure.size() > kTrialChain + 1) return {pi};
  return closure;
}

// Trial picks already made, keyed by the sequence of pending commits picked onto the fork head (a
// chain's later commits reuse its earlier ones' trees).
struct TrialStep {
  git::TrialPick pick;
  std::string error;  // git failed (e.g. an unreadable blob)
};
using TrialCache = std::map<std::vector<size_t>, TrialStep>;

// Picks the chain of `pi` onto the fork head, in order; records the verdict on r.pending[pi].
void trial_merge(const Work& w, Report& r, size_t pi, TrialCache& cache) {
  auto& p = r.pending[pi];
  std::string onto = w.fork_sha;
  std::vector<size_t> seq;
  for (size_t k : trial_chain(r, pi)) {
    seq.push_back(k);
    auto it = cache.find(seq);
    if (it == cache.end()) {
      TrialStep st;
      try {
        st.pick = w.repo.trial_pick(onto, r.pending[k].commit.sha);
      } catch (const Error& e) {
        st.error = e.what();
      }
      it = cache.emplace(seq, std::move(st)).first;
    }
    const TrialStep& st = it->second;
    const std::string dep = k == pi ? "" : fmt::format(" at its pending dependency {}", short_sha(r.pending[k].commit.sha));
    if (!st.error.empty()) {
      p.trial = "conflict";
      p.notes.push_back(fmt::format("trial merge failed{}, counted as a conflict: {}", dep, st.error));
      return;
    }
    if (!st.pick.clean) {
      p.trial = "conflict";
      p.conflicts = st.pick.conflicts;
      if (k != pi) p.notes.push_back("trial merge stopped" + dep + ", which conflicts");
      return;
    }
    onto = st.pick.tree;
  }
  p.trial = "clean";
}

}  // namespace

std::map<std::string, std::string> fork_changed_files(const Work& w, Report& r) {
  std::vector<std::string> local;
  for (size_t j = 0; j < w.s.fork.size(); ++j)
    if (!w.s.fork_is_pick[j]) local.push_back(w.s.fork[j]);
  RebaseRule rule(w.cfg, w.cfg.rebase_file_share > 0 && !local.empty() ? tracked_files(w.repo, w.fork_sha) : 0);
  std::map<std::string, std::string> fork_files;
  for (const auto& d : w.an.diffs(local)) {
    const auto& c = w.an.info(d.sha);
    if (std::string why = rule.why(c.subject, d.files.size()); !why.empty()) {
      r.fork_rebase_commits.push_back({d.sha, c.subject, why});
      continue;
    }
    for (const auto& f : d.files) fork_files.emplace(f.path, d.sha);
  }
  for (const auto& [path, sha] : fork_files) r.fork_changed_files.push_back(path);
  return fork_files;
}

void check_fork_conflicts(const Work& w, const std::map<std::string, std::string>& fork_files, Report& r) {
  if (w.cfg.fork_conflicts != Config::ForkConflicts::Trial || !w.cfg.fork_changes_risky || fork_files.empty()) return;
  std::vector<std::string> shas;
  for (const auto& p : r.pending) shas.push_back(p.commit.sha);
  Ranges fork = fork_ranges(w, fork_files);
  std::vector<git::CommitDiff> diffs = w.an.diffs(shas);
  TrialCache cache;
  for (size_t pi = 0; pi < r.pending.size(); ++pi) {
    r.pending[pi].fork_collisions = collisions(diffs[pi], fork, w.cfg.conflict_margin);
    if (!r.pending[pi].fork_collisions.empty()) trial_merge(w, r, pi, cache);
  }
}

}  // namespace kb::upstream::detail
