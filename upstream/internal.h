// Declarations shared by the upstream/ files; not part of the public API (upstream/upstream.h).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "upstream/upstream.h"

namespace kb::upstream::detail {

constexpr int64_t kDay = 86400;

std::string join(const std::vector<std::string>& v, const std::string& sep);
std::string quote_subject(const std::string& s);  // "\"s\""
CommitRef to_ref(const git::CommitInfo& c);

// How an upstream commit reached the fork.
enum How { kNotIntegrated = 0, kByPatchId, kByTrailer, kByPr, kByBundle, kByAuthor, kByContent };
const char* how_name(int how);

// Integration state of one (fork, upstream) pair.
struct State {
  std::string fork_sha, upstream_sha, base_sha;
  std::vector<std::string> up;  // U ^F, topological, oldest first (merges included)
  std::vector<std::vector<size_t>> parents;  // in-range parents
  std::vector<bool> merge;
  std::vector<int> how;
  std::vector<std::string> carrier;   // fork commit carrying an integrated upstream commit
  std::vector<std::string> evidence;  // what matched (trailer, PR number, share of lines)
  std::vector<int> skip;              // index into Config::skip + 1 for an excluded commit, else 0
  std::vector<std::string> skip_rule;  // which field of the skip entry matched
  std::vector<std::string> fork;     // F ^U non-merges, oldest first
  std::vector<bool> fork_is_pick;
};
std::vector<bool> integrated_flags(const State& s);

// Reads commits, patch ids and added lines once (cached) and computes integration states and
// metrics (upstream/integration.cpp). Commits git cannot read degrade to warnings.
class Analyzer {
 public:
  explicit Analyzer(const git::Repo& repo) : repo_(repo) {}
  const git::Repo& repo() const { return repo_; }
  void load_infos(const std::vector<std::string>& shas);
  const git::CommitInfo& info(const std::string& sha);
  void load_patch_ids(const std::vector<std::string>& shas);
  const std::optional<std::string>& pid(const std::string& sha) { return pids_.at(sha); }
  void load_added(const std::vector<std::string>& shas);
  const std::vector<std::string>& added(const std::string& sha) { return added_.at(sha); }
  std::vector<git::CommitDiff> diffs(const std::vector<std::string>& shas);
  State state(const std::string& fork_sha, const std::string& upstream_sha, const std::string& fork_name,
              const std::string& upstream_name, const Config& cfg);
  Metrics metrics(const State& s, const std::vector<bool>& integ);
  // One line per degraded commit: "commit <sha> (<subject>): cannot read <paths>: <git's message>".
  std::vector<std::string> warnings();

 private:
  void load_ranges(State& s, const std::string& fork_name, const std::string& upstream_name);
  const git::Repo& repo_;
  std::unordered_map<std::string, git::CommitInfo> infos_;
  std::unordered_map<std::string, std::optional<std::string>> pids_;
  std::unordered_map<std::string, std::vector<std::string>> added_;
  std::vector<git::UnreadableCommit> bad_;
  std::vector<std::string> not_utf8_;  // commits whose message or author was read as Latin-1, in read order
};

// upstream/picks.cpp: which upstream commits the fork carries (fills how, carrier, evidence,
// fork_is_pick) and which the config excludes (skip).
void match_picks(Analyzer& an, State& s, const Config& cfg);
// One analysis in progress: the state of the head pair and where each pending commit sits.
struct Work {
  Analyzer& an;
  const git::Repo& repo;
  const Config& cfg;
  std::string fork_sha, up_sha;
  State s;
  std::vector<bool> integ;
  std::vector<long> pending_of;  // range index -> pending index, -1: merge or integrated
  std::vector<size_t> range_of;  // pending index -> range index
};

// Collects dependency reasons per (pending commit, older pending commit).
class DepBuilder {
 public:
  explicit DepBuilder(size_t n) : deps_(n) {}
  void add(size_t from, size_t on, const std::string& reason);
  std::vector<Dependency> take(size_t from);

 private:
  std::vector<std::map<size_t, std::vector<std::string>>> deps_;
};

// upstream/dependencies.cpp: diff-based dependencies (fills files and lines_changed of each pending
// commit and r.dependency_level), message references (reverts, relands, fixups, shas).
void add_diff_dependencies(const Work& w, Report& r, DepBuilder& deps);
void add_message_dependencies(Work& w, Report& r, DepBuilder& deps);

// upstream/conflicts.cpp: the files the fork's own commits changed (path -> first such commit; picks
// and rebase/squash commits left out, the latter listed in r.fork_rebase_commits), and the trial
// merges of pending commits near the fork's changed lines (fork_collisions, trial, conflicts).
std::map<std::string, std::string> fork_changed_files(const Work& w, Report& r);
void check_fork_conflicts(const Work& w, const std::map<std::string, std::string>& fork_files, Report& r);

// upstream/plan.cpp. dependency_closure: pi and every pending commit it depends on, transitively,
// in upstream order.
std::vector<size_t> dependency_closure(const Report& r, size_t pi);
void assess_risks(const Config& cfg, const std::map<std::string, std::string>& fork_files, Report& r);
void build_plan(const Config& cfg, Report& r);
Emergency plan_emergency(Work& w, const Report& r, const Options& opt, const std::string& upstream_ref);

// Per-commit detail in the text and HTML reports is capped (JSON stays complete): rows per plan step
// and characters of the reasons cell.
constexpr size_t kDetailRowsPerStep = 40;
constexpr size_t kReasonChars = 240;

// The summary the text and HTML reports start with (upstream/summary.cpp): "1. bundle of 20 commits",
// "2. chain of 3 commits, risky from <sha>", capped at max_steps; and one line per risky pending
// commit ("<sha> (step N) <subject>: <risks>"), capped at max.
constexpr size_t kSummarySteps = 20;
constexpr size_t kSummaryRisks = 10;
std::vector<std::string> plan_overview(const Report& r, size_t max_steps);
std::vector<std::string> top_risks(const Report& r, size_t max);

// One list of reasons per pending commit, for tables (upstream/definitions.cpp).
std::vector<std::string> commit_reasons(const Report& r, size_t k);

}  // namespace kb::upstream::detail
