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
// (risky path globs, files the fork itself changed, very large commits). Connected components with
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
  bool fork_changes_risky = true;          // touching a file the fork changed is a risk
  int large_commit_lines = 0;              // > this many changed lines is a risk; 0: off
  int history_weeks = 12;                  // rows of --history (one per week, newest last)
  // Also count an upstream commit as integrated when a fork commit has the same author, author date
  // (to the second) and subject, unique on both sides: cherry-picks whose patch changed (conflicts)
  // and that carry no -x trailer.
  bool match_by_author = true;
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
  std::string how;       // "patch-id", "cherry-pick trailer" or "author, author date and subject"
  std::string fork_sha;  // the fork commit that carries it
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
  size_t step = 0;                  // 1-based plan step
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
};

struct PlanStep {
  std::string kind;             // "bundle" or "chain"
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
  Metrics metrics;
  std::vector<IntegratedCommit> integrated;
  std::vector<PendingCommit> pending;  // upstream order, oldest first
  std::vector<std::string> fork_changed_files;
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
