// Prints the time of `kbisect upstream`'s analysis and the sizes of its reports on a generated pair:
// 2,000 pending upstream commits (squash-merge subjects "(#N)", one file line each over 200 files)
// and a fork that bundles every tenth upstream PR, changes 10 files itself and has one rebase-like
// commit over 150 files. A figure-printing program: no assertions.
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/fsutil.h"
#include "core/process.h"
#include "git/git.h"
#include "upstream/upstream.h"

namespace {

constexpr int kUpstream = 2200, kFiles = 200, kLines = 40, kLocal = 10, kRebased = 150;
constexpr long kT0 = 1704067200;

std::string blob(int file, int version) {
  std::string s;
  for (int l = 1; l <= kLines; ++l) s += fmt::format("f{} line {}{}\n", file, l, l == 1 + version % kLines ? " v" + std::to_string(version) : "");
  return s;
}

// A git fast-import stream: upstream `up` (one commit per hour) and fork `fork` from the base.
std::string stream() {
  std::string s;
  auto data = [&](const std::string& d) { s += fmt::format("data {}\n{}\n", d.size(), d); };
  auto commit = [&](const std::string& ref, int mark, long t, const std::string& msg, int from) {
    s += fmt::format("commit refs/heads/{}\nmark :{}\nauthor A <a@x> {} +0000\ncommitter A <a@x> {} +0000\n", ref,
                     mark, t, t);
    data(msg);
    if (from > 0) s += fmt::format("from :{}\n", from);
  };
  commit("up", 1, kT0, "initial import", 0);
  for (int f = 0; f < kFiles; ++f) {
    s += fmt::format("M 100644 inline src/f{}.c\n", f);
    data(blob(f, 0));
  }
  std::vector<int> version(kFiles, 0);
  std::string bundle = "[Cherry-pick][BUNDLE] upstream picks (#7)\n\nApplied:\n";
  for (int i = 1; i <= kUpstream; ++i) {
    int f = (i * 7) % kFiles;
    commit("up", i + 1, kT0 + 3600L * i, fmt::format("area{}: change {} (#{})", f % 13, i, 10000 + i), i);
    s += fmt::format("M 100644 inline src/f{}.c\n", f);
    data(blob(f, ++version[f]));
    if (i % 10 == 0) bundle += fmt::format("- #{}\n", 10000 + i);
  }
  commit("fork", kUpstream + 2, kT0 + 3600L * (kUpstream + 1), bundle + "\nSkipped:\n- #10001\n", 1);
  s += "M 100644 inline fork/notes.txt\n";
  data("fork\n");
  // The fork's own changes: line 6 of the first kLocal files (pending commits near it get a trial
  // merge), then a rebase-like commit rewriting the last line of kRebased files (left out).
  auto edited = [](int f, int line, const std::string& text) {
    std::string b = blob(f, 0);
    std::string from = fmt::format("f{} line {}\n", f, line);
    return b.replace(b.find(from), from.size(), text + "\n");
  };
  commit("fork", kUpstream + 3, kT0 + 3600L * (kUpstream + 2), "fork: local tweaks", 0);
  for (int f = 0; f < kLocal; ++f) {
    s += fmt::format("M 100644 inline src/f{}.c\n", f);
    data(edited(f, 6, "fork line 6"));
  }
  commit("fork", kUpstream + 4, kT0 + 3600L * (kUpstream + 3), "fork: reformat", 0);
  for (int f = kLocal; f < kLocal + kRebased; ++f) {
    s += fmt::format("M 100644 inline src/f{}.c\n", f);
    data(edited(f, kLines, "// reformatted"));
  }
  return s;
}

}  // namespace

int main() {
  std::string dir = kb::temp_dir("kb-upstream-bench");
  kb::RunOptions o;
  o.stdin_data = stream();
  o.timeout_s = 600;
  kb::run_process({"git", "init", "-q", dir}, {});
  kb::RunResult r = kb::run_process({"git", "-C", dir, "fast-import", "--quiet"}, o);
  if (!r.ok()) {
    std::fprintf(stderr, "fast-import failed: %s\n", r.err.c_str());
    return 1;
  }
  kb::git::Repo repo(dir);
  auto cfg = kb::upstream::parse_config("upstream_pr_range: [10000, 0]\n", "bench.yaml");
  auto t0 = std::chrono::steady_clock::now();
  auto rep = kb::upstream::analyze(repo, "fork", "up", cfg);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = kb::upstream::render_table(rep), html = kb::upstream::render_html(rep);
  std::string json = kb::upstream::to_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  size_t tried = 0, conflicts = 0;
  for (const auto& p : rep.pending) tried += !p.trial.empty(), conflicts += p.trial == "conflict";
  std::printf("upstream commits %d, integrated %d, pending %d, backlog %d, plan steps %zu\n",
              rep.metrics.upstream_commits, rep.metrics.integrated_commits, rep.metrics.pending_commits,
              rep.metrics.backlog_commits, rep.plan.size());
  std::printf("fork-changed files %zu, rebase-like fork commits %zu, trial merges %zu (%zu conflict)\n",
              rep.fork_changed_files.size(), rep.fork_rebase_commits.size(), tried, conflicts);
  std::printf("analysis %.2f s; text %.1f KB, html %.1f KB, json %.1f KB (target: text and html <= 1024 KB)\n", secs,
              double(text.size()) / 1024, double(html.size()) / 1024, double(json.size()) / 1024);
  kb::remove_tree(dir);
  return 0;
}
