// Batched reads that degrade per commit instead of failing the whole call (an unreadable blob in one
// commit), the added lines of commits, and trial cherry-picks through `git merge-tree --write-tree`.
#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "git/git.h"

namespace kb::git {

namespace {

constexpr size_t kBatch = 400;

bool is_sha_line(const std::string& s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string last_line(const std::string& s) {
  auto ls = lines_of(s);
  while (!ls.empty() && ls.back().empty()) ls.pop_back();
  return ls.empty() ? std::string() : ls.back();
}

// Runs `read` on the whole list; when it fails, on halves, down to single commits, which are then
// reported in `bad` with the paths whose blobs git cannot read.
void degrade(const Repo& repo, const std::vector<std::string>& shas,
             const std::function<void(const std::vector<std::string>&)>& read, std::vector<UnreadableCommit>& bad) {
  if (shas.empty()) return;
  try {
    read(shas);
    return;
  } catch (const Error& e) {
    if (shas.size() == 1) {
      UnreadableCommit u{shas[0], {}, last_line(e.what())};
      // Raw diff-tree needs no blob contents: ":100644 100644 <old> <new> M\t<path>".
      RunResult raw = repo.run({"diff-tree", "-r", "--no-renames", "--no-commit-id", "--root", shas[0]});
      for (const auto& l : lines_of(raw.out)) {
        size_t tab = l.find('\t');
        if (l.empty() || l[0] != ':' || tab == std::string::npos) continue;
        std::istringstream f(l.substr(1, tab - 1));
        std::string m1, m2, o1, o2;
        f >> m1 >> m2 >> o1 >> o2;
        bool unreadable = false;
        for (const auto& o : {o1, o2})
          if (o.find_first_not_of('0') != std::string::npos && !repo.run({"cat-file", "-e", o}).ok()) unreadable = true;
        if (unreadable) u.paths.push_back(unquote_path(l.substr(tab + 1)));
      }
      bad.push_back(std::move(u));
      return;
    }
  }
  size_t half = shas.size() / 2;
  degrade(repo, {shas.begin(), shas.begin() + long(half)}, read, bad);
  degrade(repo, {shas.begin() + long(half), shas.end()}, read, bad);
}

std::string stdin_of(const std::vector<std::string>& shas) {
  std::string in;
  for (const auto& s : shas) in += s + "\n";
  return in;
}

}  // namespace

std::vector<CommitDiff> Repo::diffs_tolerant(const std::vector<std::string>& shas,
                                             std::vector<UnreadableCommit>& bad) const {
  std::map<std::string, CommitDiff> got;
  for (size_t b = 0; b < shas.size(); b += kBatch) {
    std::vector<std::string> part(shas.begin() + long(b), shas.begin() + long(std::min(shas.size(), b + kBatch)));
    degrade(*this, part, [&](const std::vector<std::string>& s) {
      for (auto& d : diffs(s)) got[d.sha] = std::move(d);
    }, bad);
  }
  std::vector<CommitDiff> out;
  for (const auto& s : shas) {
    auto it = got.find(s);
    out.push_back(it == got.end() ? CommitDiff{s, {}} : it->second);
  }
  return out;
}

std::map<std::string, std::string> Repo::patch_ids_tolerant(const std::vector<std::string>& shas,
                                                            std::vector<UnreadableCommit>& bad) const {
  std::map<std::string, std::string> out;
  for (size_t b = 0; b < shas.size(); b += kBatch) {
    std::vector<std::string> part(shas.begin() + long(b), shas.begin() + long(std::min(shas.size(), b + kBatch)));
    degrade(*this, part, [&](const std::vector<std::string>& s) {
      for (auto& [k, v] : patch_ids(s)) out[k] = v;
    }, bad);
  }
  return out;
}

std::map<std::string, std::vector<std::string>> Repo::added_lines(const std::vector<std::string>& shas,
                                                                  std::vector<UnreadableCommit>& bad) const {
  std::map<std::string, std::vector<std::string>> out;
  auto read = [&](const std::vector<std::string>& part) {
    std::string text = check({"diff-tree", "--stdin", "--always", "-p", "-U0", "-r", "--no-renames", "--no-ext-diff",
                              "--no-textconv", "--root"},
                             stdin_of(part));
    std::vector<std::string>* cur = nullptr;
    bool in_hunk = false;
    for (auto& l : lines_of(text)) {
      // Hunk bodies always start with '+', '-', ' ' or '\\', so a bare sha or "diff " is a header.
      if (is_sha_line(l)) {
        cur = &out[l];
        in_hunk = false;
      } else if (l.rfind("diff ", 0) == 0) {
        in_hunk = false;
      } else if (l.rfind("@@ ", 0) == 0) {
        in_hunk = true;
      } else if (in_hunk && cur && !l.empty() && l[0] == '+') {
        cur->push_back(l.substr(1));
      }
    }
  };
  for (size_t b = 0; b < shas.size(); b += kBatch)
    degrade(*this, {shas.begin() + long(b), shas.begin() + long(std::min(shas.size(), b + kBatch))}, read, bad);
  return out;
}

TrialPick Repo::trial_pick(const std::string& onto, const std::string& commit) const {
  CommitInfo c = commit_info(commit);
  std::string base_tree = c.parents.empty() ? check({"hash-object", "-t", "tree", "-w", "--stdin"}, "")
                                            : check({"rev-parse", c.parents[0] + "^{tree}"});
  auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  };
  // Helper commits need an identity; they are left unreferenced (git gc prunes them).
  auto commit_tree = [&](const std::string& tree, const std::string& parent) {
    std::vector<std::string> a = {"-c", "user.name=kbisect", "-c", "user.email=kbisect@localhost", "commit-tree", tree};
    if (!parent.empty()) a.insert(a.end(), {"-p", parent});
    a.insert(a.end(), {"-m", "kbisect trial pick"});
    return trim(check(a));
  };
  std::string base = commit_tree(trim(base_tree), "");
  std::string ours = commit_tree(trim(check({"rev-parse", onto + "^{tree}"})), base);
  std::string theirs = commit_tree(trim(check({"rev-parse", c.sha + "^{tree}"})), base);
  RunResult r = run({"merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs});
  if (!r.ok() && r.exit_code != 1)
    throw Error(fmt::format("git merge-tree for {} failed ({}): {}", short_sha(c.sha), r.status_text(), last_line(r.err)));
  auto ls = lines_of(r.out);
  TrialPick t;
  t.clean = r.exit_code == 0;
  if (!ls.empty()) t.tree = ls[0];
  std::set<std::string> seen;
  for (size_t i = 1; i < ls.size() && !ls[i].empty(); ++i)
    if (seen.insert(ls[i]).second) t.conflicts.push_back(unquote_path(ls[i]));
  return t;
}

}  // namespace kb::git
