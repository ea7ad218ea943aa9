// kbisect upstream: metrics, dependency chains, bundles, plans, --emergency and --history on a
// temporary repository whose every date is fixed, so all expected values are exact.
//
// Upstream branch `up` (linear, one commit per day, U<n> committed at day n 00:00 UTC):
//   U0 initial  U1 util:2  U2 tools/a  | U3 tools/b (skipped by the fork)  U4 util:15 (picked)
//   U5 isel:4 (picked with -x, patch changed while picking)  U6 docs:3  U7 Revert U6  U8 Reland U6
//   U9 core:12 (the fork changed src/core.c)  U10 isel:8 (risky path)  U11 tools/c:2  U12 tools/c:3
//   U13 tools/c:9  U14 util:10 (emergency fix, picked ahead)  U15 README:1  U16 fixup! U15 (README:4)
// Fork branch `fork`: created at U0 with a local src/core.c edit, rebased onto U2 (merge base U2),
// then cherry-picks U4, U5 (-x, amended), U14 and adds fork/only.txt at day 16.25.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "git/git.h"
#include "upstream/upstream.h"
#include "tests/common/temp_repo.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kbtest::upstream_scenario {

using namespace kb;
using kbtest::day;


struct Scenario {
  kbtest::TempRepo repo;
  std::map<std::string, std::string> sha;  // "U3", "F1", "P4", ...
};

inline Scenario& scenario() {
  static Scenario* s = [] {
    auto* sc = new Scenario;
    auto& r = sc->repo;
    auto& sha = sc->sha;
    r.write_lines("README.md", "readme", 5);
    r.write_lines("docs/guide.md", "guide", 10);
    r.write_lines("lib/Target/X86/isel.cpp", "isel", 10);
    r.write_lines("src/core.c", "core", 20);
    r.write_lines("src/util.c", "util", 20);
    r.write_lines("tools/a.py", "a", 10);
    r.write_lines("tools/b.py", "b", 10);
    r.write_lines("tools/c.py", "c", 10);
    sha["U0"] = r.commit("initial import", day(0));
    r.git({"checkout", "-q", "-b", "fork"});
    sha["F1"] = r.commit_line("src/core.c", 5, "core line 5 (fork)", "fork: local core tweak", day(0.5));
    r.git({"checkout", "-q", "up"});
    sha["U1"] = r.commit_line("src/util.c", 2, "util line 2 v2", "util: tweak line 2", day(1));
    sha["U2"] = r.commit_line("tools/a.py", 1, "a line 1 v2", "tools: a tweak", day(2));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"rebase", "-q", "up"}, day(2.5));
    sha["F1r"] = r.git({"rev-parse", "HEAD"});
    r.git({"checkout", "-q", "up"});
    sha["U3"] = r.commit_line("tools/b.py", 5, "b line 5 v2", "tools: b tweak", day(3));
    sha["U4"] = r.commit_line("src/util.c", 15, "util line 15 fixed", "util: fix line 15", day(4));
    sha["U5"] = r.commit_line("lib/Target/X86/isel.cpp", 4, "isel line 4 fixed", "x86: isel fix 4", day(5));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"cherry-pick", sha["U4"]}, day(4.5));
    sha["P4"] = r.git({"rev-parse", "HEAD"});
    r.git_committer({"cherry-pick", "-x", sha["U5"]}, day(5.5));
    r.set_line("lib/Target/X86/isel.cpp", 9, "isel line 9 (fork adaptation)");
    r.git({"add", "-A"});
    r.git_committer({"commit", "-q", "--amend", "--no-edit"}, day(5.5));
    sha["P5"] = r.git({"rev-parse", "HEAD"});
    r.git({"checkout", "-q", "up"});
    sha["U6"] = r.commit_line("docs/guide.md", 3, "guide line 3 clarified", "docs: clarify guide", day(6));
    r.git({"revert", "--no-edit", sha["U6"]}, day(7));
    sha["U7"] = r.git({"rev-parse", "HEAD"});
    sha["U8"] = r.commit_line("docs/guide.md", 3, "guide line 3 clarified", "Reland \"docs: clarify guide\"", day(8));
    sha["U9"] = r.commit_line("src/core.c", 12, "core line 12 upstream", "core: upstream change", day(9));
    sha["U10"] = r.commit_line("lib/Target/X86/isel.cpp", 8, "isel line 8 v2", "x86: isel change 8", day(10));
    sha["U11"] = r.commit_line("tools/c.py", 2, "c line 2 v2", "tools: c line 2", day(11));
    sha["U12"] = r.commit_line("tools/c.py", 3, "c line 3 v2", "tools: c line 3", day(12));
    sha["U13"] = r.commit_line("tools/c.py", 9, "c line 9 v2", "tools: c line 9", day(13));
    sha["U14"] = r.commit_line("src/util.c", 10, "util line 10 crash fixed", "util: emergency crash fix", day(14));
    sha["U15"] = r.commit_line("README.md", 1, "readme intro v2", "readme: update intro", day(15));
    sha["U16"] = r.commit_line("README.md", 4, "readme line 4 v2", "fixup! readme: update intro", day(16));
    r.git({"checkout", "-q", "fork"});
    r.git_committer({"cherry-pick", sha["U14"]}, day(14.5));
    sha["P14"] = r.git({"rev-parse", "HEAD"});
    r.write("fork/only.txt", "fork notes\n");
    sha["F2"] = r.commit("fork: add notes", day(16.25));
    // An unrelated history.
    r.git({"checkout", "-q", "--orphan", "other"});
    r.git({"rm", "-q", "-rf", "."});
    r.write("other.txt", "other\n");
    sha["O1"] = r.commit("unrelated root", day(3));
    r.git({"checkout", "-q", "fork"});
    return sc;
  }();
  return *s;
}

inline const std::string& S(const std::string& name) { return scenario().sha.at(name); }

inline upstream::Config test_config() {
  return upstream::parse_config("risky_paths: ['lib/Target/**']\nbundle_max_commits: 20\nfork_conflicts: file\n", "test.yaml");
}

inline std::vector<std::string> shas_of(const upstream::Report& r, const std::vector<size_t>& idx) {
  std::vector<std::string> out;
  for (size_t k : idx) out.push_back(r.pending[k].commit.sha);
  return out;
}

inline std::vector<std::string> names(const std::vector<std::string>& n) {
  std::vector<std::string> out;
  for (const auto& x : n) out.push_back(S(x));
  return out;
}

inline const upstream::PendingCommit& pending(const upstream::Report& r, const std::string& name) {
  for (const auto& p : r.pending)
    if (p.commit.sha == S(name)) return p;
  throw std::runtime_error(name + " is not pending");
}

inline bool depends_on(const upstream::Report& r, const std::string& from, const std::string& on, const std::string& reason_part) {
  for (const auto& d : pending(r, from).depends_on)
    if (r.pending[d.on].commit.sha == S(on))
      for (const auto& why : d.reasons)
        if (why.find(reason_part) != std::string::npos) return true;
  return false;
}


}  // namespace kbtest::upstream_scenario
