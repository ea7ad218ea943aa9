#include "upstream/upstream.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "git/glob.h"
#include "core/error.h"
#include "report/html.h"
#include "core/text.h"
#include "core/fsutil.h"

namespace kb::upstream {

using git::short_sha;

const char* const kDefinitionDaysBehind =
    "days behind = committer date of the upstream head minus committer date of the integration point, "
    "in days of 86400 s (never negative); the integration point is the last upstream commit, in "
    "topological order, that the fork has together with all of its ancestors (by ancestry or "
    "cherry-pick), or the merge base when there is none";
const char* const kDefinitionBacklog =
    "backlog = pending upstream commits that are ancestors of the newest integrated upstream commit "
    "(older commits skipped while cherry-picking ahead)";
const char* const kDefinitionPending =
    "pending = non-merge upstream commits that are neither ancestors of the fork nor integrated";
const char* const kDefinitionIntegrated =
    "integrated = an upstream commit that is an ancestor of the fork, or whose change a fork commit "
    "carries: same `git patch-id --stable`, a \"(cherry picked from commit <sha>)\" trailer naming it, or "
    "(match_by_author) the same author, author date and subject, unique on both sides";

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kWeek = 7 * kDay;
constexpr int64_t kFirstMonday = 4 * kDay;  // 1970-01-05 00:00 UTC


std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// Config

struct YamlCx {
  std::string origin;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) throw InputError(fmt::format("{}: {}", origin, msg));
    throw InputError(fmt::format("{}:{}:{}: {}", origin, m.line + 1, m.column + 1, msg));
  }
  std::string scalar_text(const YAML::Node& n) const { return n.IsScalar() ? n.Scalar() : "(not a scalar)"; }
  int get_int(const YAML::Node& n, const std::string& field, int min) const {
    int v = 0;
    try {
      if (!n.IsScalar()) throw YAML::BadConversion(n.Mark());
      v = n.as<int>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("field '{}': expected an integer >= {}, got '{}'", field, min, scalar_text(n)));
    }
    if (v < min) fail(n, fmt::format("field '{}': expected an integer >= {}, got {}", field, min, v));
    return v;
  }
  bool get_bool(const YAML::Node& n, const std::string& field) const {
    try {
      if (!n.IsScalar()) throw YAML::BadConversion(n.Mark());
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("field '{}': expected true or false, got '{}'", field, scalar_text(n)));
    }
  }
};

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& origin) {
  YamlCx cx{origin};
  const YAML::Node root = yaml_load(yaml_text, origin);
  Config c;
  c.source = origin;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) cx.fail(root, "an upstream config must be a mapping (risky_paths, bundle_max_commits, ...)");
  static const std::vector<std::string> known = {"risky_paths",        "bundle_max_commits", "dependency",
                                                 "hunk_margin",        "fork_changes_risky", "large_commit_lines",
                                                 "history_weeks",      "match_by_author"};
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "risky_paths") {
      if (!v.IsSequence()) cx.fail(v, "field 'risky_paths': expected a list of path globs");
      c.risky_paths.clear();
      for (const auto& g : v) {
        if (!g.IsScalar() || g.Scalar().empty())
          cx.fail(g, "field 'risky_paths': each entry must be a non-empty glob string");
        c.risky_paths.push_back(g.Scalar());
      }
    } else if (key == "bundle_max_commits") {
      c.bundle_max_commits = cx.get_int(v, key, 1);
    } else if (key == "dependency") {
      std::string s = cx.scalar_text(v);
      if (s == "hunk") c.dependency = Config::Level::Hunk;
      else if (s == "file") c.dependency = Config::Level::File;
      else cx.fail(v, fmt::format("field 'dependency': expected 'hunk' or 'file', got '{}'", s));
    } else if (key == "hunk_margin") {
      c.hunk_margin = cx.get_int(v, key, 0);
    } else if (key == "fork_changes_risky") {
      c.fork_changes_risky = cx.get_bool(v, key);
    } else if (key == "match_by_author") {
      c.match_by_author = cx.get_bool(v, key);
    } else if (key == "large_commit_lines") {
      c.large_commit_lines = cx.get_int(v, key, 0);
    } else if (key == "history_weeks") {
      c.history_weeks = cx.get_int(v, key, 1);
    } else {
      cx.fail(kv.first, fmt::format("unknown field '{}' (known: {})", key, join(known, ", ")));
    }
  }
  return c;
}

Config load_config(const std::string& path) { return parse_config(read_file(path), path); }

std::string format_time(int64_t t) { return utc_time(t, "%Y-%m-%d %H:%M UTC"); }

namespace {

// ---------------------------------------------------------------------------------------------
// Integration state of one (fork, upstream) pair

CommitRef to_ref(const git::CommitInfo& c) {
  return CommitRef{c.sha, c.subject, c.author_name, c.author_time, c.commit_time};
}

enum How { kNotIntegrated = 0, kByPatchId = 1, kByTrailer = 2, kByAuthor = 3 };

const char* how_name(int how) {
  switch (how) {
    case kByPatchId: return "patch-id";
    case kByTrailer: return "cherry-pick trailer";
    case kByAuthor: return "author, author date and subject";
    default: return "not integrated";
  }
}

// Cherry-picks keep the author, the author date (to the second) and the subject.
std::string author_key(const git::CommitInfo& c) {
  return c.author_email + '\n' + std::to_string(c.author_time) + '\n' + c.subject;
}

struct State {
  std::string fork_sha, upstream_sha, base_sha;
  std::vector<std::string> up;  // U ^F, topological, oldest first (merges included)
  std::vector<std::vector<size_t>> parents;  // in-range parents
  std::vector<bool> merge;
  std::vector<int> how;
  std::vector<std::string> carrier;  // fork commit carrying an integrated upstream commit
  std::vector<std::string> fork;     // F ^U non-merges, oldest first
  std::vector<bool> fork_is_pick;
};

class Analyzer {
 public:
  explicit Analyzer(const git::Repo& repo) : repo_(repo) {}

  const git::Repo& repo() const { return repo_; }

  void load_infos(const std::vector<std::string>& shas) {
    std::vector<std::string> missing;
    for (const auto& s : shas)
      if (!infos_.count(s)) missing.push_back(s);
    if (missing.empty()) return;
    for (auto& c : repo_.commit_infos(missing)) infos_.emplace(c.sha, std::move(c));
  }
  const git::CommitInfo& info(const std::string& sha) {
    auto it = infos_.find(sha);
    if (it == infos_.end()) {
      load_infos({sha});
      it = infos_.find(sha);
    }
    return it->second;
  }
  void load_patch_ids(const std::vector<std::string>& shas) {
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
  const std::optional<std::string>& pid(const std::string& sha) { return pids_.at(sha); }

  State state(const std::string& fork_sha, const std::string& upstream_sha, const std::string& fork_name,
              const std::string& upstream_name, bool match_by_author) {
    State s;
    s.fork_sha = fork_sha;
    s.upstream_sha = upstream_sha;
    auto bases = repo_.merge_bases(fork_sha, upstream_sha);
    if (bases.empty())
      throw InputError(fmt::format("fork '{}' ({}) and upstream '{}' ({}) have unrelated histories: no common "
                                   "ancestor in repository {}",
                                   fork_name, short_sha(fork_sha), upstream_name, short_sha(upstream_sha),
                                   repo_.dir()));
    load_infos(bases);
    s.base_sha = *std::max_element(bases.begin(), bases.end(), [&](const auto& a, const auto& b) {
      return info(a).commit_time < info(b).commit_time;
    });
    git::RevListOptions topo;
    topo.topo_order = true;
    topo.reverse = true;
    s.up = repo_.rev_list({upstream_sha, "^" + fork_sha}, topo);
    git::RevListOptions fopt = topo;
    fopt.no_merges = true;
    s.fork = repo_.rev_list({fork_sha, "^" + upstream_sha}, fopt);

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

    // Fork side: patch id -> first fork commit; cherry-pick trailers -> named sha (prefix).
    std::unordered_map<std::string, std::string> pid_to_fork;
    std::vector<std::pair<std::string, size_t>> trailers;  // (named sha prefix, fork index)
    std::unordered_map<std::string, long> author_to_fork;   // author key -> fork index (-1: ambiguous)
    static const std::regex trailer_re(R"(\(cherry picked from commit ([0-9a-fA-F]{7,64})\))");
    for (size_t j = 0; j < s.fork.size(); ++j) {
      if (const auto& p = pid(s.fork[j])) pid_to_fork.emplace(*p, s.fork[j]);
      if (match_by_author) {
        auto [it, fresh] = author_to_fork.emplace(author_key(info(s.fork[j])), long(j));
        if (!fresh) it->second = -1;
      }
      const std::string& msg = info(s.fork[j]).message;
      for (std::sregex_iterator it(msg.begin(), msg.end(), trailer_re), end; it != end; ++it) {
        std::string named = (*it)[1].str();
        std::transform(named.begin(), named.end(), named.begin(), ::tolower);
        trailers.emplace_back(named, j);
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
        auto it = pid_to_fork.find(*p);
        if (it != pid_to_fork.end()) {
          s.how[i] = kByPatchId;
          s.carrier[i] = it->second;
          continue;
        }
      }
      for (const auto& [named, j] : trailers)
        if (s.up[i].compare(0, named.size(), named) == 0) {
          s.how[i] = kByTrailer;
          s.carrier[i] = s.fork[j];
          s.fork_is_pick[j] = true;
          break;
        }
      if (s.how[i] == kNotIntegrated && match_by_author) {
        std::string key = author_key(info(s.up[i]));
        auto it = author_to_fork.find(key);
        if (it != author_to_fork.end() && it->second >= 0 && up_author_count[key] == 1) {
          s.how[i] = kByAuthor;
          s.carrier[i] = s.fork[size_t(it->second)];
          s.fork_is_pick[size_t(it->second)] = true;
        }
      }
    }
    for (size_t j = 0; j < s.fork.size(); ++j)
      if (const auto& p = pid(s.fork[j]); p && up_pids.count(*p)) s.fork_is_pick[j] = true;
    return s;
  }

  Metrics metrics(const State& s, const std::vector<bool>& integ) {
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

 private:
  const git::Repo& repo_;
  std::unordered_map<std::string, git::CommitInfo> infos_;
  std::unordered_map<std::string, std::optional<std::string>> pids_;
};

std::vector<bool> integrated_flags(const State& s) {
  std::vector<bool> v(s.up.size());
  for (size_t i = 0; i < s.up.size(); ++i) v[i] = s.how[i] != kNotIntegrated;
  return v;
}

// ---------------------------------------------------------------------------------------------
// Dependencies between pending commits

class DepBuilder {
 public:
  explicit DepBuilder(size_t n) : deps_(n) {}
  void add(size_t from, size_t on, const std::string& reason) {
    if (from == on) return;
    auto& rs = deps_[from][on];
    if (std::find(rs.begin(), rs.end(), reason) == rs.end()) rs.push_back(reason);
  }
  std::vector<Dependency> take(size_t from) {
    std::vector<Dependency> out;
    for (auto& [on, rs] : deps_[from]) out.push_back({on, rs});
    return out;
  }

 private:
  std::vector<std::map<size_t, std::vector<std::string>>> deps_;
};

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
        for (long k = a; k < b; ++k)
          if (own[size_t(k)] >= 0 && own[size_t(k)] != pending)
            deps.add(size_t(pending), size_t(own[size_t(k)]),
                     fmt::format("touches lines it changed in {}:{}", f.path, k + 1));
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

struct UnionFind {
  std::vector<size_t> p;
  explicit UnionFind(size_t n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  size_t find(size_t x) { return p[x] == x ? x : p[x] = find(p[x]); }
  void unite(size_t a, size_t b) { p[find(a)] = find(b); }
};

std::string quote_subject(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// The analysis

Report analyze(const git::Repo& repo, const std::string& fork_ref, const std::string& upstream_ref,
               const Config& cfg, const Options& opt) {
  Analyzer an(repo);
  Report r;
  r.repo = repo.dir();
  r.fork_ref = fork_ref;
  r.upstream_ref = upstream_ref;
  r.config = cfg;
  std::string fork_sha = repo.resolve(fork_ref, "fork ref");
  std::string up_sha = repo.resolve(upstream_ref, "upstream ref");
  State s = an.state(fork_sha, up_sha, fork_ref, upstream_ref, cfg.match_by_author);
  r.fork_head = to_ref(an.info(fork_sha));
  r.merge_base = to_ref(an.info(s.base_sha));
  std::vector<bool> integ = integrated_flags(s);
  r.metrics = an.metrics(s, integ);

  // Integrated and pending lists.
  std::vector<long> pending_of(s.up.size(), -1);
  std::vector<size_t> range_of;  // pending index -> range index
  for (size_t i = 0; i < s.up.size(); ++i) {
    if (s.merge[i]) continue;
    const auto& c = an.info(s.up[i]);
    if (integ[i]) {
      r.integrated.push_back({to_ref(c), how_name(s.how[i]), s.carrier[i]});
    } else {
      pending_of[i] = long(r.pending.size());
      range_of.push_back(i);
      PendingCommit p;
      p.commit = to_ref(c);
      r.pending.push_back(std::move(p));
    }
  }
  // Backlog flags: pending ancestors of the newest integrated commit.
  if (r.metrics.newest_integrated) {
    size_t newest = 0;
    for (size_t i = 0; i < s.up.size(); ++i)
      if (s.up[i] == r.metrics.newest_integrated->sha) newest = i;
    std::vector<bool> seen(s.up.size(), false);
    std::vector<size_t> stack = {newest};
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      if (pending_of[i] >= 0) r.pending[size_t(pending_of[i])].backlog = true;
      for (size_t p : s.parents[i])
        if (!seen[p]) seen[p] = true, stack.push_back(p);
    }
  }

  // Files the fork itself changed (fork commits that are not picks of upstream commits).
  std::map<std::string, std::string> fork_files;  // path -> first fork commit changing it
  {
    std::vector<std::string> local;
    for (size_t j = 0; j < s.fork.size(); ++j)
      if (!s.fork_is_pick[j]) local.push_back(s.fork[j]);
    for (const auto& d : repo.diffs(local))
      for (const auto& f : d.files) fork_files.emplace(f.path, d.sha);
    for (const auto& [path, sha] : fork_files) r.fork_changed_files.push_back(path);
  }

  // Diffs of every non-merge upstream commit in the range (integrated ones shift line numbers).
  bool linear = std::none_of(s.merge.begin(), s.merge.end(), [](bool b) { return b; });
  bool hunk_level = cfg.dependency == Config::Level::Hunk;
  if (hunk_level && !linear) {
    hunk_level = false;
    r.notes.push_back("upstream range contains merge commits: line tracking needs a linear history, so "
                      "dependencies are computed at file level");
  }
  r.dependency_level = hunk_level ? "hunk" : "file";
  std::vector<std::string> nonmerge;
  for (size_t i = 0; i < s.up.size(); ++i)
    if (!s.merge[i]) nonmerge.push_back(s.up[i]);
  std::vector<git::CommitDiff> diffs = repo.diffs(nonmerge);
  DepBuilder deps(r.pending.size());
  LineTracker tracker(hunk_level, cfg.hunk_margin);
  {
    size_t k = 0;
    for (size_t i = 0; i < s.up.size(); ++i) {
      if (s.merge[i]) continue;
      const auto& d = diffs[k++];
      tracker.apply(d, pending_of[i], deps);
      if (pending_of[i] >= 0) {
        auto& p = r.pending[size_t(pending_of[i])];
        for (const auto& f : d.files) {
          p.files.push_back(f.path);
          p.lines_changed += f.lines_added() + f.lines_removed();
        }
        std::sort(p.files.begin(), p.files.end());
      }
    }
  }

  // Message references.
  auto find_by_subject = [&](size_t before, const std::string& subject) -> long {
    for (size_t j = before; j-- > 0;)
      if (!s.merge[j] && an.info(s.up[j]).subject == subject) return long(j);
    return -1;
  };
  auto find_by_prefix = [&](size_t before, const std::string& prefix) -> long {
    long found = -1;
    for (size_t j = 0; j < before; ++j)
      if (!s.merge[j] && s.up[j].compare(0, prefix.size(), prefix) == 0) {
        if (found >= 0) return -1;  // ambiguous
        found = long(j);
      }
    return found;
  };
  auto how_text = [&](size_t j) {
    return fmt::format("by {} as {}", how_name(s.how[j]), short_sha(s.carrier[j]));
  };
  static const std::regex reverts_sha_re(R"(This reverts commit ([0-9a-fA-F]{7,64}))");
  static const std::regex revert_subj_re(R"re(^Revert "(.*)"$)re");
  static const std::regex reland_re(R"re(^(?:Reland|Re-land|Recommit|\[Reland\])(?::| )\s*(?:"(.*)"|(.*))$)re",
                                    std::regex::icase);
  static const std::regex fixup_re(R"(^(fixup|squash|amend)! (.*)$)");
  static const std::regex sha_re(R"((^|[^0-9A-Za-z])([0-9a-f]{7,40})(?![0-9A-Za-z]))");
  for (size_t pi = 0; pi < r.pending.size(); ++pi) {
    size_t i = range_of[pi];
    const auto& c = an.info(s.up[i]);
    auto& p = r.pending[pi];
    auto ref = [&](long j, const std::string& verb, const std::string& why) {
      if (j < 0) return;
      if (pending_of[size_t(j)] >= 0) {
        deps.add(pi, size_t(pending_of[size_t(j)]), fmt::format("{} it ({})", verb, why));
      } else {
        std::string note = fmt::format("{} {}, which the fork already has ({})", verb, short_sha(s.up[size_t(j)]),
                                       how_text(size_t(j)));
        if (std::find(p.notes.begin(), p.notes.end(), note) == p.notes.end()) p.notes.push_back(note);
      }
    };
    std::smatch m;
    std::set<std::string> explicit_shas;
    for (std::sregex_iterator it(c.message.begin(), c.message.end(), reverts_sha_re), end; it != end; ++it) {
      std::string named = (*it)[1].str();
      std::transform(named.begin(), named.end(), named.begin(), ::tolower);
      explicit_shas.insert(named);
      long j = find_by_prefix(i, named);
      if (j >= 0) {
        ref(j, "reverts", "\"This reverts commit " + named.substr(0, 10) + "\"");
      } else if (auto full = repo.try_resolve(named); full && repo.is_ancestor(*full, fork_sha)) {
        p.notes.push_back(fmt::format("reverts {}, which is in the fork's history", short_sha(*full)));
      }
    }
    if (std::regex_match(c.subject, m, revert_subj_re)) {
      std::string inner = m[1].str();
      ref(find_by_subject(i, inner), "reverts", "Revert " + quote_subject(inner));
    } else if (std::regex_match(c.subject, m, reland_re)) {
      std::string inner = m[1].matched ? m[1].str() : m[2].str();
      ref(find_by_subject(i, inner), "relands", "Reland " + quote_subject(inner));
      ref(find_by_subject(i, "Revert " + quote_subject(inner)), "relands after", "this reverted the original");
    }
    if (std::regex_match(c.subject, m, fixup_re)) {
      std::string kind = m[1].str(), target = m[2].str();
      long j = find_by_subject(i, target);
      // git also accepts a sha (prefix) after "fixup! ".
      if (j < 0 && std::regex_match(target, std::regex("[0-9a-f]{7,40}"))) j = find_by_prefix(i, target);
      ref(j, "amends", kind + "! " + quote_subject(target));
    }
    for (std::sregex_iterator it(c.message.begin(), c.message.end(), sha_re), end; it != end; ++it) {
      std::string tok = (*it)[2].str();
      if (explicit_shas.count(tok)) continue;
      long j = find_by_prefix(i, tok);
      if (j >= 0) ref(j, "mentions", "its sha " + tok + " is in the message");
    }
  }
  for (size_t pi = 0; pi < r.pending.size(); ++pi) {
    r.pending[pi].depends_on = deps.take(pi);
    for (const auto& d : r.pending[pi].depends_on) r.pending[d.on].needed_by.push_back(pi);
  }

  // Risks.
  for (auto& p : r.pending) {
    std::vector<std::string> risky, collide;
    for (const auto& f : p.files) {
      for (const auto& g : cfg.risky_paths)
        if (glob_match(g, f)) {
          risky.push_back(fmt::format("{} ({})", f, g));
          break;
        }
      if (cfg.fork_changes_risky)
        if (auto it = fork_files.find(f); it != fork_files.end())
          collide.push_back(fmt::format("{} (fork commit {})", f, short_sha(it->second)));
    }
    auto listed = [](const std::vector<std::string>& v) {
      std::vector<std::string> head(v.begin(), v.begin() + long(std::min<size_t>(v.size(), 3)));
      std::string s = join(head, ", ");
      if (v.size() > 3) s += fmt::format(" and {} more", v.size() - 3);
      return s;
    };
    if (!risky.empty()) p.risks.push_back("touches risky paths: " + listed(risky));
    if (!collide.empty()) p.risks.push_back("touches files the fork changed (likely conflict): " + listed(collide));
    if (cfg.large_commit_lines > 0 && p.lines_changed > cfg.large_commit_lines)
      p.risks.push_back(fmt::format("large: {} changed lines (> {})", p.lines_changed, cfg.large_commit_lines));
  }

  // Components, chains and bundles.
  UnionFind uf(r.pending.size());
  for (size_t pi = 0; pi < r.pending.size(); ++pi)
    for (const auto& d : r.pending[pi].depends_on) uf.unite(pi, d.on);
  std::map<size_t, std::vector<size_t>> comps;  // root -> members in order
  for (size_t pi = 0; pi < r.pending.size(); ++pi) comps[uf.find(pi)].push_back(pi);
  std::vector<std::vector<size_t>> chains;
  std::vector<size_t> independent;
  for (auto& [root, members] : comps) {
    bool risky = std::any_of(members.begin(), members.end(), [&](size_t k) { return !r.pending[k].risks.empty(); });
    if (members.size() == 1 && !risky) independent.push_back(members[0]);
    else chains.push_back(members);
  }
  std::sort(independent.begin(), independent.end());
  std::sort(chains.begin(), chains.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  for (size_t b = 0; b < independent.size(); b += size_t(cfg.bundle_max_commits)) {
    PlanStep st;
    st.kind = "bundle";
    st.commits.assign(independent.begin() + long(b),
                      independent.begin() + long(std::min(independent.size(), b + size_t(cfg.bundle_max_commits))));
    st.reasons.push_back(fmt::format(
        "{} independent commit{}: no dependency on or from another pending commit, no risky path, no file the fork "
        "changed (at most {} per bundle)",
        st.commits.size(), st.commits.size() == 1 ? "" : "s", cfg.bundle_max_commits));
    r.plan.push_back(std::move(st));
  }
  for (const auto& members : chains) {
    PlanStep st;
    st.kind = "chain";
    st.commits = members;
    if (members.size() > 1)
      st.reasons.push_back(fmt::format("{} commits linked by dependencies: ingest together, in this order",
                                       members.size()));
    for (size_t k : members)
      for (const auto& risk : r.pending[k].risks) {
        st.risky = true;
        st.reasons.push_back(fmt::format("{}: {}", short_sha(r.pending[k].commit.sha), risk));
      }
    if (members.size() == 1) st.reasons.insert(st.reasons.begin(), "single commit with risks: ingest alone");
    r.plan.push_back(std::move(st));
  }
  for (size_t step = 0; step < r.plan.size(); ++step)
    for (size_t k : r.plan[step].commits) r.pending[k].step = step + 1;

  // --emergency: the dependency closure of one pending commit, and what picking it alone does.
  if (!opt.emergency.empty()) {
    std::string sha = repo.resolve(opt.emergency, "--emergency commit");
    long idx = -1;
    for (size_t pi = 0; pi < r.pending.size(); ++pi)
      if (r.pending[pi].commit.sha == sha) idx = long(pi);
    if (idx < 0) {
      for (const auto& ic : r.integrated)
        if (ic.commit.sha == sha)
          throw InputError(fmt::format("--emergency commit '{}' ({}) is already integrated ({} as {})", opt.emergency,
                                       short_sha(sha), ic.how, short_sha(ic.fork_sha)));
      if (repo.is_ancestor(sha, fork_sha))
        throw InputError(fmt::format("--emergency commit '{}' ({}) is already in the fork's history", opt.emergency,
                                     short_sha(sha)));
      if (!repo.is_ancestor(sha, up_sha))
        throw InputError(fmt::format("--emergency commit '{}' ({}) is not an upstream commit (not an ancestor of {})",
                                     opt.emergency, short_sha(sha), upstream_ref));
      throw InputError(fmt::format("--emergency commit '{}' ({}) is a merge commit; name one of its changes",
                                   opt.emergency, short_sha(sha)));
    }
    Emergency e;
    e.target = r.pending[size_t(idx)].commit;
    std::set<size_t> closure;
    std::vector<size_t> stack = {size_t(idx)};
    while (!stack.empty()) {
      size_t k = stack.back();
      stack.pop_back();
      if (!closure.insert(k).second) continue;
      for (const auto& d : r.pending[k].depends_on) stack.push_back(d.on);
    }
    e.closure.assign(closure.begin(), closure.end());
    std::vector<bool> after = integ;
    for (size_t k : e.closure) after[range_of[k]] = true;
    e.after = an.metrics(s, after);
    const Metrics& b = r.metrics;
    if (e.after.seconds_behind == b.seconds_behind) {
      std::string why;
      for (size_t i = 0; i < s.up.size(); ++i)
        if (!s.merge[i] && !after[i]) {
          why = fmt::format(": older upstream commit {} {} is still missing", short_sha(s.up[i]),
                            quote_subject(an.info(s.up[i]).subject));
          break;
        }
      e.effect.push_back(fmt::format("days behind unchanged at {:.2f}{}", b.days_behind, why));
    } else {
      e.effect.push_back(fmt::format("days behind {:.2f} -> {:.2f} (integration point moves to {})", b.days_behind,
                                     e.after.days_behind, short_sha(e.after.integration_point.sha)));
    }
    e.effect.push_back(fmt::format("backlog {} -> {}", b.backlog_commits, e.after.backlog_commits));
    e.effect.push_back(fmt::format("pending {} -> {}", b.pending_commits, e.after.pending_commits));
    if (e.closure.size() > 1)
      e.effect.push_back(fmt::format("{} needs {} other pending commit{} first", short_sha(sha), e.closure.size() - 1,
                                     e.closure.size() == 2 ? "" : "s"));
    r.emergency = std::move(e);
  }

  // --history: one row per week along the fork's and upstream's first-parent lines.
  if (opt.history) {
    int64_t end = std::max(r.fork_head.commit_time, r.metrics.upstream_head.commit_time);
    std::vector<int64_t> samples = {end};
    int64_t boundary = ((end - 1 - kFirstMonday) / kWeek) * kWeek + kFirstMonday;  // last Monday before end
    if (end - 1 - kFirstMonday < 0) boundary = kFirstMonday - kWeek;
    for (int k = 1; k < cfg.history_weeks; ++k, boundary -= kWeek) samples.push_back(boundary);
    std::reverse(samples.begin(), samples.end());
    for (int64_t t : samples) {
      git::RevListOptions o;
      o.first_parent = true;
      o.max_count = 1;
      o.until = t;
      auto f = repo.rev_list({fork_sha}, o);
      auto u = repo.rev_list({up_sha}, o);
      if (f.empty() || u.empty() || repo.merge_bases(f[0], u[0]).empty()) continue;
      State hs = an.state(f[0], u[0], fork_ref, upstream_ref, cfg.match_by_author);
      r.history.push_back({t, f[0], u[0], an.metrics(hs, integrated_flags(hs))});
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Printers

namespace {

nlohmann::json ref_json(const CommitRef& c) {
  return {{"sha", c.sha},
          {"subject", c.subject},
          {"author", c.author},
          {"author_time", c.author_time},
          {"commit_time", c.commit_time},
          {"commit_date", format_time(c.commit_time)}};
}

nlohmann::json metrics_json(const Metrics& m) {
  nlohmann::json j = {{"days_behind", m.days_behind},
                      {"seconds_behind", m.seconds_behind},
                      {"upstream_head", ref_json(m.upstream_head)},
                      {"integration_point", ref_json(m.integration_point)},
                      {"integration_point_is_merge_base", m.integration_point_is_merge_base},
                      {"newest_integrated", m.newest_integrated ? ref_json(*m.newest_integrated) : nlohmann::json()},
                      {"upstream_commits", m.upstream_commits},
                      {"integrated_commits", m.integrated_commits},
                      {"pending_commits", m.pending_commits},
                      {"backlog_commits", m.backlog_commits}};
  return j;
}

// One list of reasons per pending commit, for tables.
std::vector<std::string> commit_reasons(const Report& r, size_t k) {
  const auto& p = r.pending[k];
  std::vector<std::string> out;
  for (const auto& d : p.depends_on)
    out.push_back(fmt::format("depends on {}: {}", short_sha(r.pending[d.on].commit.sha), join(d.reasons, "; ")));
  for (const auto& x : p.risks) out.push_back(x);
  for (const auto& x : p.notes) out.push_back(x);
  if (out.empty()) {
    if (r.plan.empty() || p.step == 0 || r.plan[p.step - 1].kind == "bundle")
      out.push_back("independent, low-risk");
    else if (!p.needed_by.empty())
      out.push_back(fmt::format("needed by {}", short_sha(r.pending[p.needed_by.front()].commit.sha)));
  }
  if (p.backlog) out.push_back("backlog");
  return out;
}

std::string truncate(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}


// The history chart: days behind (left axis, solid) and backlog commits (right axis, dashed).
std::string history_svg(const std::vector<HistoryRow>& rows) {
  const double W = 720, H = 260, L = 56, R = 56, T = 20, B = 44;
  double max_days = 1, max_backlog = 1;
  for (const auto& h : rows) {
    max_days = std::max(max_days, h.metrics.days_behind);
    max_backlog = std::max(max_backlog, double(h.metrics.backlog_commits));
  }
  max_backlog = std::ceil(max_backlog / 4) * 4;  // integer ticks
  auto x = [&](size_t i) { return rows.size() <= 1 ? L + (W - L - R) / 2 : L + (W - L - R) * double(i) / double(rows.size() - 1); };
  auto yd = [&](double v) { return T + (H - T - B) * (1 - v / max_days); };
  auto yb = [&](double v) { return T + (H - T - B) * (1 - v / max_backlog); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"days behind and backlog per week\">\n",
      W, H);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#bbb\"/>\n", L, T,
                   W - L - R, H - T - B);
  for (int k = 0; k <= 4; ++k) {
    double v = max_days * k / 4, y = yd(v);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", L, y, W - R, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" fill=\"#1f5fa8\">{:.1f}</text>\n",
                     L - 6, y + 4, v);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#b04a00\">{:.1f}</text>\n", W - R + 6, y + 4,
                     max_backlog * k / 4);
  }
  std::string pd, pb;
  for (size_t i = 0; i < rows.size(); ++i) {
    pd += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x(i), yd(rows[i].metrics.days_behind));
    pb += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x(i), yb(double(rows[i].metrics.backlog_commits)));
  }
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"2\"/>\n", pd);
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#b04a00\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n", pb);
  for (size_t i = 0; i < rows.size(); ++i) {
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#1f5fa8\"><title>{}: {:.2f} days behind</title></circle>\n",
                     x(i), yd(rows[i].metrics.days_behind), format_time(rows[i].as_of), rows[i].metrics.days_behind);
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#b04a00\"><title>{}: backlog {}</title></circle>\n",
                     x(i), yb(double(rows[i].metrics.backlog_commits)), format_time(rows[i].as_of),
                     rows[i].metrics.backlog_commits);
    if (rows.size() <= 16 || i % ((rows.size() + 15) / 16) == 0)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n", x(i), H - B + 14,
                       format_time(rows[i].as_of).substr(0, 10));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1f5fa8\">— days behind</text>\n", L, H - 8);
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#b04a00\">- - backlog commits</text>\n", L + 120, H - 8);
  s += "</svg>\n";
  return s;
}

}  // namespace

nlohmann::json to_json(const Report& r) {
  nlohmann::json j;
  j["schema"] = "kbisect.upstream/1";
  j["repo"] = r.repo;
  j["fork"] = {{"ref", r.fork_ref}, {"head", ref_json(r.fork_head)}};
  j["upstream"] = {{"ref", r.upstream_ref}, {"head", ref_json(r.metrics.upstream_head)}};
  j["merge_base"] = ref_json(r.merge_base);
  j["definitions"] = {{"days_behind", kDefinitionDaysBehind},
                      {"backlog", kDefinitionBacklog},
                      {"pending", kDefinitionPending},
                      {"integrated", kDefinitionIntegrated}};
  j["config"] = {{"source", r.config.source},
                 {"risky_paths", r.config.risky_paths},
                 {"bundle_max_commits", r.config.bundle_max_commits},
                 {"dependency", r.config.dependency == Config::Level::Hunk ? "hunk" : "file"},
                 {"hunk_margin", r.config.hunk_margin},
                 {"fork_changes_risky", r.config.fork_changes_risky},
                 {"large_commit_lines", r.config.large_commit_lines},
                 {"history_weeks", r.config.history_weeks},
                 {"match_by_author", r.config.match_by_author}};
  j["dependency_level"] = r.dependency_level;
  j["notes"] = r.notes;
  j["metrics"] = metrics_json(r.metrics);
  j["integrated"] = nlohmann::json::array();
  for (const auto& ic : r.integrated)
    j["integrated"].push_back({{"commit", ref_json(ic.commit)}, {"how", ic.how}, {"fork_sha", ic.fork_sha}});
  j["pending"] = nlohmann::json::array();
  for (size_t k = 0; k < r.pending.size(); ++k) {
    const auto& p = r.pending[k];
    nlohmann::json d = nlohmann::json::array(), nb = nlohmann::json::array();
    for (const auto& x : p.depends_on) d.push_back({{"sha", r.pending[x.on].commit.sha}, {"reasons", x.reasons}});
    for (size_t x : p.needed_by) nb.push_back(r.pending[x].commit.sha);
    j["pending"].push_back({{"commit", ref_json(p.commit)},
                            {"files", p.files},
                            {"lines_changed", p.lines_changed},
                            {"backlog", p.backlog},
                            {"depends_on", d},
                            {"needed_by", nb},
                            {"risks", p.risks},
                            {"notes", p.notes},
                            {"step", p.step},
                            {"reasons", commit_reasons(r, k)}});
  }
  j["fork_changed_files"] = r.fork_changed_files;
  j["plan"] = nlohmann::json::array();
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    nlohmann::json cs = nlohmann::json::array();
    for (size_t k : st.commits) cs.push_back(r.pending[k].commit.sha);
    j["plan"].push_back({{"step", i + 1}, {"kind", st.kind}, {"risky", st.risky}, {"commits", cs}, {"reasons", st.reasons}});
  }
  if (r.emergency) {
    const auto& e = *r.emergency;
    nlohmann::json cs = nlohmann::json::array();
    for (size_t k : e.closure) cs.push_back(r.pending[k].commit.sha);
    j["emergency"] = {{"target", ref_json(e.target)},
                      {"closure", cs},
                      {"before", metrics_json(r.metrics)},
                      {"after", metrics_json(e.after)},
                      {"effect", e.effect}};
  }
  if (!r.history.empty()) {
    j["history"] = nlohmann::json::array();
    for (const auto& h : r.history)
      j["history"].push_back({{"as_of", h.as_of},
                              {"as_of_date", format_time(h.as_of)},
                              {"fork_sha", h.fork_sha},
                              {"upstream_sha", h.upstream_sha},
                              {"days_behind", h.metrics.days_behind},
                              {"backlog_commits", h.metrics.backlog_commits},
                              {"pending_commits", h.metrics.pending_commits},
                              {"integrated_commits", h.metrics.integrated_commits},
                              {"integration_point", h.metrics.integration_point.sha}});
  }
  return j;
}

std::string render_table(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o;
  o += fmt::format("kbisect upstream: fork {} ({}) vs upstream {} ({})\n", r.fork_ref, short_sha(r.fork_head.sha),
                   r.upstream_ref, short_sha(m.upstream_head.sha));
  o += fmt::format("  merge base          {} {}  {}\n", short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time),
                   truncate(r.merge_base.subject, 60));
  o += fmt::format("  days behind         {:.2f}   upstream head {} minus integration point {} ({}{})\n", m.days_behind,
                   format_time(m.upstream_head.commit_time), short_sha(m.integration_point.sha),
                   format_time(m.integration_point.commit_time), m.integration_point_is_merge_base ? ", the merge base" : "");
  o += fmt::format("  backlog commits     {}", m.backlog_commits);
  if (m.newest_integrated) o += fmt::format("   missing commits older than newest integrated {}", short_sha(m.newest_integrated->sha));
  o += "\n";
  o += fmt::format("  pending commits     {}   of {} upstream commits the fork lacks by ancestry ({} integrated by cherry-pick)\n",
                   m.pending_commits, m.upstream_commits, m.integrated_commits);
  o += fmt::format("  dependencies        {} level\n", r.dependency_level);
  for (const auto& n : r.notes) o += "  note: " + n + "\n";
  o += "\n";
  if (r.plan.empty()) {
    o += "nothing pending: the fork has every upstream commit\n";
  } else {
    o += "ingestion plan (bundles first, then each chain alone, in this order):\n";
    o += fmt::format("  {:>4}  {:<6} {:<5} {:<10} {:<17} {:<44} {}\n", "step", "kind", "risk", "commit", "date", "subject", "reasons");
    for (size_t i = 0; i < r.plan.size(); ++i) {
      const auto& st = r.plan[i];
      bool first = true;
      for (size_t k : st.commits) {
        const auto& p = r.pending[k];
        o += fmt::format("  {:>4}  {:<6} {:<5} {:<10} {:<17} {:<44} {}\n", first ? std::to_string(i + 1) : "",
                         first ? st.kind : "", first ? (st.risky ? "yes" : "no") : "", short_sha(p.commit.sha),
                         format_time(p.commit.commit_time).substr(0, 16), truncate(p.commit.subject, 44),
                         join(commit_reasons(r, k), "; "));
        first = false;
      }
    }
  }
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("\nemergency pick of {} ({}): pick {} commit{} alone, in this order:\n", short_sha(e.target.sha),
                     truncate(e.target.subject, 60), e.closure.size(), e.closure.size() == 1 ? "" : "s");
    for (size_t k : e.closure)
      o += fmt::format("  {}  {}\n", short_sha(r.pending[k].commit.sha), truncate(r.pending[k].commit.subject, 70));
    for (const auto& x : e.effect) o += "  effect: " + x + "\n";
  }
  if (!r.history.empty()) {
    o += "\nhistory (one row per week, fork and upstream first-parent lines as of each time):\n";
    o += fmt::format("  {:<20} {:<10} {:<10} {:>11} {:>8} {:>8}\n", "as of", "fork", "upstream", "days_behind", "backlog",
                     "pending");
    for (const auto& h : r.history)
      o += fmt::format("  {:<20} {:<10} {:<10} {:>11.2f} {:>8} {:>8}\n", format_time(h.as_of), short_sha(h.fork_sha),
                       short_sha(h.upstream_sha), h.metrics.days_behind, h.metrics.backlog_commits, h.metrics.pending_commits);
  }
  o += "\n" + std::string(kDefinitionDaysBehind) + ".\n" + kDefinitionBacklog + ".\n";
  return o;
}

std::string render_markdown(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o;
  o += fmt::format("# Upstream sync: `{}` vs `{}`\n\n", r.fork_ref, r.upstream_ref);
  o += "| metric | value | detail |\n|---|---:|---|\n";
  o += fmt::format("| days behind | {:.2f} | upstream head `{}` ({}) minus integration point `{}` ({}){} |\n", m.days_behind,
                   short_sha(m.upstream_head.sha), format_time(m.upstream_head.commit_time),
                   short_sha(m.integration_point.sha), format_time(m.integration_point.commit_time),
                   m.integration_point_is_merge_base ? ", the merge base" : "");
  o += fmt::format("| backlog commits | {} | {} |\n", m.backlog_commits,
                   m.newest_integrated ? fmt::format("older than newest integrated `{}`", short_sha(m.newest_integrated->sha))
                                       : std::string("nothing picked ahead"));
  o += fmt::format("| pending commits | {} | of {} upstream commits not in the fork's ancestry |\n", m.pending_commits,
                   m.upstream_commits);
  o += fmt::format("| integrated by cherry-pick | {} | patch-id, -x trailer or author+date+subject |\n", m.integrated_commits);
  o += fmt::format("| merge base | `{}` | {} |\n\n", short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time));
  for (const auto& n : r.notes) o += "> note: " + md_escape(n) + "\n\n";
  o += "## Ingestion plan\n\nBundles first, then each chain alone, in this order.\n\n";
  o += "| step | kind | risky | commit | date | subject | reasons |\n|---:|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    for (size_t k : st.commits) {
      const auto& p = r.pending[k];
      o += fmt::format("| {} | {} | {} | `{}` | {} | {} | {} |\n", i + 1, st.kind, st.risky ? "yes" : "no",
                       short_sha(p.commit.sha), format_time(p.commit.commit_time).substr(0, 10), md_escape(p.commit.subject),
                       md_escape(join(commit_reasons(r, k), "; ")));
    }
  }
  if (r.plan.empty()) o += "| | | | | | nothing pending | |\n";
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("\n## Emergency pick `{}`\n\n{}\n\n", short_sha(e.target.sha), md_escape(e.target.subject));
    for (size_t k : e.closure)
      o += fmt::format("1. `{}` {}\n", short_sha(r.pending[k].commit.sha), md_escape(r.pending[k].commit.subject));
    o += "\n";
    for (const auto& x : e.effect) o += "- " + md_escape(x) + "\n";
  }
  if (!r.history.empty()) {
    o += "\n## History (per week)\n\n| as of | fork | upstream | days behind | backlog | pending |\n|---|---|---|---:|---:|---:|\n";
    for (const auto& h : r.history)
      o += fmt::format("| {} | `{}` | `{}` | {:.2f} | {} | {} |\n", format_time(h.as_of), short_sha(h.fork_sha),
                       short_sha(h.upstream_sha), h.metrics.days_behind, h.metrics.backlog_commits, h.metrics.pending_commits);
  }
  o += "\n## Definitions\n\n";
  for (const char* d : {kDefinitionDaysBehind, kDefinitionBacklog, kDefinitionPending, kDefinitionIntegrated})
    o += "- " + md_escape(d) + ".\n";
  return o;
}

std::string render_html(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o;
  o += report::page_begin("kbisect upstream: " + r.fork_ref + " vs " + r.upstream_ref,
                          ".risky{background:#fff1e6}.bundle{background:#eef7ee}.big{font-size:1.6em;font-weight:bold}");
  o += fmt::format("<h1>Upstream sync: <code>{}</code> vs <code>{}</code></h1>\n", html_escape(r.fork_ref),
                   html_escape(r.upstream_ref));
  o += fmt::format("<p><small>repository {} · fork head <code>{}</code> · upstream head <code>{}</code> · merge base "
                   "<code>{}</code> ({})</small></p>\n",
                   html_escape(r.repo), short_sha(r.fork_head.sha), short_sha(m.upstream_head.sha),
                   short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time));
  o += "<table><tr><th>days behind</th><th>backlog commits</th><th>pending commits</th><th>integrated by cherry-pick</th></tr>\n";
  o += fmt::format("<tr><td class=\"num big\">{:.2f}</td><td class=\"num big\">{}</td><td class=\"num big\">{}</td>"
                   "<td class=\"num big\">{}</td></tr></table>\n",
                   m.days_behind, m.backlog_commits, m.pending_commits, m.integrated_commits);
  o += fmt::format("<p>Integration point <code>{}</code> {} ({}){}; upstream head {}.</p>\n", short_sha(m.integration_point.sha),
                   html_escape(m.integration_point.subject), format_time(m.integration_point.commit_time),
                   m.integration_point_is_merge_base ? ", the merge base" : "", format_time(m.upstream_head.commit_time));
  for (const auto& n : r.notes) o += "<p><em>note: " + html_escape(n) + "</em></p>\n";
  if (!r.history.empty()) {
    o += "<h2>History</h2>\n" + history_svg(r.history);
    o += "<table><tr><th>as of</th><th>fork</th><th>upstream</th><th>days behind</th><th>backlog</th><th>pending</th></tr>\n";
    for (const auto& h : r.history)
      o += fmt::format("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{:.2f}</td>"
                       "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                       format_time(h.as_of), short_sha(h.fork_sha), short_sha(h.upstream_sha), h.metrics.days_behind,
                       h.metrics.backlog_commits, h.metrics.pending_commits);
    o += "</table>\n";
  }
  o += "<h2>Ingestion plan</h2>\n<p>Bundles first, then each chain alone, in this order.</p>\n";
  o += "<table><tr><th>step</th><th>kind</th><th>commit</th><th>date</th><th>subject</th><th>reasons</th></tr>\n";
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    bool first = true;
    for (size_t k : st.commits) {
      const auto& p = r.pending[k];
      o += fmt::format("<tr class=\"{}\">", st.kind == "bundle" ? "bundle" : (st.risky ? "risky" : ""));
      if (first)
        o += fmt::format("<td rowspan=\"{}\">{}</td><td rowspan=\"{}\">{}{}</td>", st.commits.size(), i + 1,
                         st.commits.size(), st.kind, st.risky ? " (risky)" : "");
      o += fmt::format("<td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>\n", short_sha(p.commit.sha),
                       format_time(p.commit.commit_time).substr(0, 10), html_escape(p.commit.subject),
                       html_escape(join(commit_reasons(r, k), "; ")));
      first = false;
    }
  }
  o += "</table>\n";
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("<h2>Emergency pick <code>{}</code></h2>\n<ol>\n", short_sha(e.target.sha));
    for (size_t k : e.closure)
      o += fmt::format("<li><code>{}</code> {}</li>\n", short_sha(r.pending[k].commit.sha),
                       html_escape(r.pending[k].commit.subject));
    o += "</ol><ul>\n";
    for (const auto& x : e.effect) o += "<li>" + html_escape(x) + "</li>\n";
    o += "</ul>\n";
  }
  o += "<h2>Definitions</h2><ul>\n";
  for (const char* d : {kDefinitionDaysBehind, kDefinitionBacklog, kDefinitionPending, kDefinitionIntegrated})
    o += "<li>" + html_escape(d) + ".</li>\n";
  o += "</ul>" + report::page_end();
  return o;
}

}  // namespace kb::upstream
