// A small, general wrapper around the `git` command line, run through the project's one process
// runner (core/process.h) with argv vectors only — never a shell (docs/design.md, rule 6).
//
// Used by `kbisect upstream` (integration detection, dependency graphs) and by the bisector (walking
// compiler commits between good and bad, files touched per commit, reading a file at a commit,
// building a commit in a separate worktree).
//
// Every call runs `git -C <dir>` with a fixed set of `-c` overrides so that a user's configuration
// (colour, quoting, signatures, mnemonic prefixes) cannot change the output that is parsed here, and
// with LC_ALL=C so messages are stable. Failures throw:
//   - InputError for things the user named: a directory that is not a repository, a ref that does
//     not resolve to a commit, a path missing at a commit (the message names the ref / path);
//   - Error for any other failing git command (message: the command, its status and stderr tail);
//   - EnvError (from run_process) when git itself cannot be started.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/process.h"

namespace kb::git {

// The one way a sha is shortened in messages and reports: its first 12 hex digits.
inline std::string short_sha(const std::string& sha) { return sha.substr(0, 12); }

// One commit's metadata. Times are seconds since the Unix epoch (UTC), as git stores them.
struct CommitInfo {
  std::string sha;                   // full 40-hex object name
  std::vector<std::string> parents;  // full names, first parent first; empty for a root commit
  std::string author_name, author_email;
  int64_t author_time = 0;           // %at
  int64_t commit_time = 0;           // %ct (committer date)
  std::string subject;               // first line of the message
  std::string message;               // the whole message (subject, blank line, body, trailers)

  bool is_merge() const { return parents.size() > 1; }
};

// A file a commit changed, relative to its first parent (or to the empty tree for a root commit).
struct ChangedFile {
  char status = 'M';  // git's letter: A added, D deleted, M modified, T type change (renames are off)
  std::string path;
};

// One hunk of a zero-context diff (`-U0`): lines [old_start, old_start+old_count) of the parent's
// version were replaced by lines [new_start, new_start+new_count) of the commit's version (1-based).
// A pure insertion has old_count == 0 and then means "after line old_start" (0 = at the top); a pure
// deletion has new_count == 0.
struct Hunk {
  int old_start = 0, old_count = 0;
  int new_start = 0, new_count = 0;
};

// All changes a commit made to one file.
struct FileDiff {
  std::string path;       // path in the commit (for a deletion: the deleted path)
  bool created = false;   // "new file mode"
  bool deleted = false;   // "deleted file mode"
  bool binary = false;    // "Binary files ... differ": no hunks, whole-file change
  std::vector<Hunk> hunks;
  int lines_added() const;
  int lines_removed() const;
};

// The diff of one commit against its first parent.
struct CommitDiff {
  std::string sha;
  std::vector<FileDiff> files;
};

struct RevListOptions {
  bool first_parent = false;  // --first-parent: follow only first parents (a branch's own line)
  bool reverse = false;       // oldest first (applied after the other limits, as in git)
  bool topo_order = false;    // --topo-order: parents never before children in the output
  bool no_merges = false;     // --no-merges
  int max_count = -1;         // --max-count when >= 0
  int64_t until = -1;         // --min-age: only commits whose committer date is <= until (epoch s)
  int64_t since = -1;         // --max-age: only commits whose committer date is >= since (epoch s)
};

// A commit git could not read: the paths whose blobs are unreadable (all its paths when none could
// be told apart) and git's message.
struct UnreadableCommit {
  std::string sha;
  std::vector<std::string> paths;
  std::string error;
};

// Result of Repo::trial_pick: the merged tree, and the conflicted paths when it did not apply cleanly.
struct TrialPick {
  bool clean = false;
  std::string tree;
  std::vector<std::string> conflicts;
};

class Repo {
 public:
  // `dir` is a work tree or a bare repository (or a subdirectory of one). Throws InputError when it
  // does not exist or is not inside a git repository. `timeout_s` applies to each git command.
  explicit Repo(std::string dir, double timeout_s = 600);

  const std::string& dir() const { return dir_; }

  // Runs `git <args>` and returns the raw result, whatever its status.
  RunResult run(const std::vector<std::string>& args, std::optional<std::string> stdin_data = {}) const;
  // Runs `git <args>`; returns stdout; throws Error naming the command, status and stderr tail on
  // failure.
  std::string check(const std::vector<std::string>& args, std::optional<std::string> stdin_data = {}) const;

  // --- refs and ancestry --------------------------------------------------------------------------
  // Full sha of the commit `ref` names (branch, tag, sha prefix, HEAD~3, ...). Throws InputError
  // "<what> 'REF' is not a commit in repository DIR" (what defaults to "ref"). Refs that start with
  // '-' are rejected (they would read as options).
  std::string resolve(const std::string& ref, const std::string& what = "ref") const;
  // Like resolve, but returns nullopt instead of throwing.
  std::optional<std::string> try_resolve(const std::string& ref) const;
  // True when `ancestor` is an ancestor of (or equal to) `descendant`.
  bool is_ancestor(const std::string& ancestor, const std::string& descendant) const;
  // The best common ancestor, or nullopt for unrelated histories.
  std::optional<std::string> merge_base(const std::string& a, const std::string& b) const;
  // All best common ancestors (criss-cross merges have several); empty for unrelated histories.
  std::vector<std::string> merge_bases(const std::string& a, const std::string& b) const;

  // --- walking history ----------------------------------------------------------------------------
  // `git rev-list [options] <revs...>`; revs may use any rev-list syntax ("A..B", "^A", "B").
  std::vector<std::string> rev_list(const std::vector<std::string>& revs, const RevListOptions& opts = {}) const;
  // Commits in good..bad (reachable from bad, not from good), oldest first: excludes good, includes
  // bad. With first_parent, only bad's first-parent line (what a bisector walks on a branch that
  // merges topic branches).
  std::vector<std::string> commits_between(const std::string& good, const std::string& bad,
                                           bool first_parent = true) const;

  // --- commit contents ----------------------------------------------------------------------------
  CommitInfo commit_info(const std::string& rev) const;
  // Metadata for many commits in one git process, in the order given. Unknown revs throw.
  std::vector<CommitInfo> commit_infos(const std::vector<std::string>& revs) const;
  // Files `rev` changed against its first parent (renames reported as delete + add), sorted.
  std::vector<ChangedFile> changed_files(const std::string& rev) const;
  // Zero-context diff of `rev` against its first parent.
  CommitDiff diff(const std::string& rev) const;
  // The same for many non-merge commits in one git process (merges yield an empty file list).
  std::vector<CommitDiff> diffs(const std::vector<std::string>& shas) const;
  // `git patch-id --stable` of the commit's diff: equal for the same change applied on a different
  // parent (a cherry-pick), whitespace and line numbers aside. nullopt for an empty diff or a merge.
  std::optional<std::string> patch_id(const std::string& rev) const;
  // Patch ids for many commits (batched); commits without one are absent from the map.
  std::map<std::string, std::string> patch_ids(const std::vector<std::string>& shas) const;
  // --- reads that degrade per commit (git/tolerant_reads.cpp) ------------------------------------
  // Like diffs() / patch_ids(), but a commit git cannot read (an unreadable or missing blob) does not
  // fail the call: it gets an empty diff / no patch id and an entry in `bad` naming it and its paths.
  std::vector<CommitDiff> diffs_tolerant(const std::vector<std::string>& shas,
                                         std::vector<UnreadableCommit>& bad) const;
  std::map<std::string, std::string> patch_ids_tolerant(const std::vector<std::string>& shas,
                                                        std::vector<UnreadableCommit>& bad) const;
  // The lines each commit adds (its zero-context diff's '+' lines, without the '+'), keyed by sha.
  std::map<std::string, std::vector<std::string>> added_lines(const std::vector<std::string>& shas,
                                                              std::vector<UnreadableCommit>& bad) const;
  // Applies `commit`'s change (against its first parent) to the tree of `onto` (a commit or tree) as a
  // cherry-pick would, without touching refs, index or work tree: `git merge-tree --write-tree` on
  // parentless helper commits whose merge base is commit^.
  TrialPick trial_pick(const std::string& onto, const std::string& commit) const;

  // The bytes of PATH at REV (`git cat-file blob REV:PATH`). InputError when it does not exist.
  std::string show_file(const std::string& rev, const std::string& path) const;

  // --- worktrees ----------------------------------------------------------------------------------
  // `git worktree add --detach PATH REV`: a separate checkout of REV (e.g. to build a compiler at a
  // commit without touching the main checkout).
  void worktree_add(const std::string& path, const std::string& rev) const;
  // `git worktree remove [--force] PATH`.
  void worktree_remove(const std::string& path, bool force = true) const;

 private:
  std::string dir_;
  double timeout_s_;
};

// Parses the output of `git diff-tree -p -U0` (one commit, or several with --stdin, where each diff
// is preceded by a line holding the commit's sha). Hunk bodies are skipped by their counts, so
// content lines that look like headers are never misread. Exposed for tests.
std::vector<CommitDiff> parse_diff_tree(const std::string& text);

// Un-quotes a path git printed in C style ("a\tb" with quotes); returns other text unchanged.
std::string unquote_path(const std::string& s);

}  // namespace kb::git
