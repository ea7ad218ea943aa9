// Upstream-sync analysis for a fork of a fast-moving compiler (`kbisect upstream`).
//
// Given a fork ref F and an upstream ref U in one repository:
//   * the upstream range is `git rev-list U ^F` (upstream commits the fork does not have by
//     ancestry), in topological order, oldest first;
//   * an upstream commit in that range is *integrated* when a fork commit in `git rev-list F ^U`
//     has the same `git patch-id --stable` (a cherry-pick, whatever its hash — what `git cherry`
//     does), or carries a "(cherry picked from commit <sha>)" trailer naming it (`cherry-pick -x`,
//     also when conflict resolution changed the patch), or (Config::match_by_author) has the same
//     author, author date and subject, unique on both sides (a conflicted pick without -x);
//   * *pending* commits: non-merge commits of the range that are not integrated;
//   * *integration point*: the last commit of the range (in upstream's topological order) that is
//     integrated together with all of its ancestors (merges count when their parents do); when no
//     commit of the range qualifies, the newest merge base of F and U;
//   * *days behind* = (committer date of U) − (committer date of the integration point), in days
//     (86400 s), never negative. Picking newer commits ahead does not change it; only closing the
//     oldest gap does;
//   * *newest integrated*: the last integrated commit of the range in upstream order;
//   * *backlog*: pending commits that are ancestors of the newest integrated commit (upstream
//     commits older than it that are still missing). Zero when nothing was cherry-picked ahead.
//
// Pending commits then get a dependency graph (B depends on an older A when B's zero-context hunks
// overlap or touch lines A last changed — tracked through every upstream commit in between — or, at
// file level, when they change the same file; or when B's message references A: `Revert "..."`,
// "This reverts commit <sha>", `fixup!`/`squash!`/`amend!`, "Reland", or A's sha) and risk reasons
// (risky path globs, a trial merge onto the fork that conflicts, very large commits). Connected components with
// more than one commit or any risk are *chains* (ingest alone, in order); the rest are independent
// low-risk commits packed into size-capped *bundles*. The plan lists bundles first, then chains.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "git/git.h"

namespace kb::upstream {

struct Config {
  std::string source = "(defaults)";  // file the config came from
  // Globs (git/glob.h) of paths whose changes are risky (codegen, targets, backends).
  std::vector<std::string> risky_paths = {"lib/Target/**", "**/CodeGen/**", "**/codegen/**", "**/backend/**",
                                          "**/backends/**"};
  int bundle_max_commits = 20;             // commits per low-risk bundle
  enum class Level { File, Hunk };
  Level dependency = Level::Hunk;          // hunk: overlapping/touching lines; file: same file
  int hunk_margin = 1;                     // lines around a hunk that still count as touching
  bool fork_changes_risky = true;          // conflicting with the fork's own changes is a risk
  // How a collision with the fork is decided (upstream/conflicts.cpp). Trial: a pending commit whose
  // hunks lie within conflict_margin lines of the fork's own changes (merge base -> fork head) is
  // picked onto the fork by a trial merge (`git merge-tree --write-tree`), after its pending
  // dependencies; only a conflict is a risk. File: touching any file the fork changed is a risk.
  enum class ForkConflicts { File, Trial };
  ForkConflicts fork_conflicts = ForkConflicts::Trial;
  int conflict_margin = 3;
  // Fork commits that are rebases or squashes, left out of the fork's own changes: subjects matching
  // one of these regexes (case-insensitive), or commits changing more than this share of the fork
  // head's tracked files (0: off) and at least rebase_min_files files. Merge commits never count
  // (only non-merges of F ^U are read).
  std::vector<std::string> rebase_subjects = {R"(^(\[[^\]]*\]\s*)*(rebase|squash)\b)"};
  double rebase_file_share = 0.5;
  int rebase_min_files = 20;
  int large_commit_lines = 0;              // > this many changed lines is a risk; 0: off
  int history_weeks = 12;                  // rows of --history (one per week, newest last)
  // Also count an upstream commit as integrated when a fork commit has the same author, author date
  // (to the second) and subject, unique on both sides: cherry-picks whose patch changed (conflicts)
  // and that carry no -x trailer.
  bool match_by_author = true;

  // Pick recognition (upstream/picks.cpp). Presets: "git-x" (the "(cherry picked from commit <sha>)"
  // trailer), "github-squash" (an upstream subject's trailing "(#N)" named by a fork commit) and
  // "bundle" (the picked lists of a fork commit that integrates many upstream PRs).
  std::vector<std::string> pick_presets = {"git-x", "github-squash", "bundle"};
  // More trailer regexes naming an upstream sha (the first capture group, else the whole match),
  // e.g. "Reactor Cherry-pick Revision: ([0-9a-f]{7,40})".
  std::vector<std::string> pick_trailers;
  // The upstream PR number space: a range (0 = open end) and/or the repository ("owner/name") that
  // PR URLs and "owner/name#N" references name. A fork's own trailing "(#M)" is never upstream's
  // unless it lies in the configured range.
  int upstream_pr_min = 0, upstream_pr_max = 0;
  std::string upstream_pr_repo;
  // Bundle bodies: sections under these headings list picked PRs; under the skip headings, not.
  std::vector<std::string> bundle_pick_headings = {"Picked", "Applied", "Cherry-picked"};
  std::vector<std::string> bundle_skip_headings = {"Skipped", "Deferred", "Won't port", "Not picked"};
  // Last resort: at least this share of an upstream commit's added lines (of content_min_lines or
  // more distinct non-blank ones) is added by fork commits. 0: off.
  double content_threshold = 0.8;
  int content_min_lines = 3;

  // Upstream commits the fork decided not to take: by sha (prefix), PR number or subject glob.
  struct Skip {
    std::string sha, subject;
    int pr = 0;
    std::string reason;
    std::string kind;  // "won't port" (default) or "deferred"
  };
  std::vector<Skip> skip;
  bool preset(const std::string& name) const;
};

// Reads a YAML config. Errors name file:line:column and the field (InputError).
Config load_config(const std::string& path);
Config parse_config(const std::string& yaml_text, const std::string& origin);

struct CommitRef {
  std::string sha, subject, author;
  int64_t author_time = 0, commit_time = 0;
};

struct IntegratedCommit {
  CommitRef commit;      // the upstream commit
  // "patch-id", "cherry-pick trailer", "PR number", "bundle", "author, author date and subject" or
  // "content" (weaker evidence: a share of its added lines).
  std::string how;
  std::string fork_sha;  // the fork commit that carries it
  std::string evidence;  // what matched, e.g. "trailer Reactor Cherry-pick Revision", "#10702"
  bool weak = false;     // content rule only
};

// An upstream commit the config excludes (won't port / deferred).
struct ExcludedCommit {
  CommitRef commit;
  std::string kind, reason, rule;
};

struct Dependency {
  size_t on = 0;                     // index into Report::pending (always an older commit)
  std::vector<std::string> reasons;  // e.g. "touches lines it changed in docs/guide.md:3"
};

struct PendingCommit {
  CommitRef commit;
  std::vector<std::string> files;   // changed files (renames as delete + add)
  int lines_changed = 0;            // added + removed
  bool backlog = false;
  std::vector<Dependency> depends_on;
  std::vector<size_t> needed_by;    // pending commits that depend on this one
  std::vector<std::string> risks;   // why it is risky (paths, fork collisions, size)
  std::vector<std::string> notes;   // e.g. "reverts 1234abcd, which the fork already has"
  // Collision with the fork's own changes (Config::fork_conflicts == Trial): "path:line" runs near
  // them, the trial merge's verdict ("clean", "conflict"; empty when not tried) and conflicted paths.
  std::vector<std::string> fork_collisions;
  std::string trial;
  std::vector<std::string> conflicts;
  size_t step = 0;                  // 1-based plan step
  std::string reverts, relands;     // the upstream commit this one reverts / relands (full sha)
};

struct Metrics {
  CommitRef upstream_head;
  CommitRef integration_point;
  bool integration_point_is_merge_base = false;
  int64_t seconds_behind = 0;
  double days_behind = 0;
  std::optional<CommitRef> newest_integrated;
  int upstream_commits = 0;    // non-merge commits in U ^F
  int integrated_commits = 0;  // of those, integrated by patch-id or trailer
  int pending_commits = 0;
  int backlog_commits = 0;
  int excluded_commits = 0;  // won't port / deferred (config `skip`)
  // The frontier: newest integrated commit; days behind measured from it.
  int64_t seconds_behind_frontier = 0;
  double days_behind_frontier = 0;
};

struct PlanStep {
  std::string kind;             // "bundle", "chain" or "skip" (a pair that nets to nothing)
  bool risky = false;           // any commit carries a risk reason
  std::vector<size_t> commits;  // indexes into Report::pending, upstream order
  std::vector<std::string> reasons;
};

struct Emergency {
  CommitRef target;
  std::vector<size_t> closure;  // indexes into Report::pending, upstream order (target last)
  Metrics after;                // metrics if exactly these commits were picked now
  std::vector<std::string> effect;
};

struct HistoryRow {
  int64_t as_of = 0;  // sample time (end of a week, or the newest commit time for the last row)
  std::string fork_sha, upstream_sha;
  Metrics metrics;
};

struct Report {
  std::string repo;
  std::string fork_ref, upstream_ref;
  CommitRef fork_head;
  CommitRef merge_base;
  Config config;
  std::string dependency_level;     // level actually used ("hunk" or "file")
  std::vector<std::string> notes;   // analysis-wide notes (e.g. level downgraded)
  std::vector<std::string> warnings;  // degraded commits (unreadable blobs), naming commit and path
  Metrics metrics;
  std::vector<ExcludedCommit> excluded;
  std::vector<IntegratedCommit> integrated;
  std::vector<PendingCommit> pending;  // upstream order, oldest first
  std::vector<std::string> fork_changed_files;  // by fork commits that are neither picks nor rebases
  struct RebaseCommit {
    std::string sha, subject, why;
  };
  std::vector<RebaseCommit> fork_rebase_commits;  // left out of fork_changed_files
  std::vector<PlanStep> plan;
  std::optional<Emergency> emergency;
  std::vector<HistoryRow> history;
};

struct Options {
  std::string emergency;  // a pending upstream commit to pick alone; empty: none
  bool history = false;
};

// Runs the whole analysis. InputError for bad refs, unrelated histories and an --emergency commit
// that is not pending.
Report analyze(const git::Repo& repo, const std::string& fork_ref, const std::string& upstream_ref,
               const Config& config, const Options& options = {});

// Printers: they only render a Report.
nlohmann::json to_json(const Report& r);
std::string render_table(const Report& r);
std::string render_markdown(const Report& r);
std::string render_html(const Report& r);

// "2024-01-03 00:00 UTC"
std::string format_time(int64_t epoch_s);

// One-line definitions used in every output.
extern const char* const kDefinitionDaysBehind;
extern const char* const kDefinitionBacklog;
extern const char* const kDefinitionPending;
extern const char* const kDefinitionIntegrated;

}  // namespace kb::upstream
