// How often does a bisection's reproduce step see a real code-change regression?
//
// A generated 40-commit compiler repository holds an in-tree toolchain spec (kernel-compiler.yaml):
// clang-19 -O3 -march=x86-64-v3 up to commit 24, -O2 from there on (the other commits touch a changelog).
// `kbisect bisect` (threshold 2% by default, matmul_tiled MR=6 NR=16 fp32 256^3 on the CPU backend) runs in P fresh
// processes (default 20), each stopped after its reproduce step (budgets.max_builds: 2, the two endpoints),
// so every process draws its own placements and decides good against bad once. (The budget does not stop
// a bisection whose builds are cached, so some go on to name the culprit; only the reproduce step counts.) The pooled estimate is the
// median of the reproduce effects. When it is at least twice the threshold, a `not-reproduced` is a wrong
// verdict; the target is at least 19 reproduced of 20. The last line is
//   reproduce_rate: reproduced=<k>/<P> pooled_effect=<x>% not_reproduced=<m>
// Usage: reproduce_rate [--processes P] [--threshold PCT] [--placement loads|process] [--block-rounds N]
//                       [--kbisect PATH] [--keep DIR]
// (--placement: the bisection's measure.placement, default the bisector's own; default threshold 2,
// as measured on a Zen 3 VM where the change read +2% to +11%; a CPU where -O2 costs less needs a lower threshold for
// the check to mean anything). It takes about P x 4 s; run it on a quiet machine.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/ab_processes.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "stats/stats.h"

using namespace kb;
namespace fs = std::filesystem;

namespace {

constexpr int kCommits = 40, kSwitch = 24;

void git(const std::string& repo, const std::vector<std::string>& args, int64_t when = -1) {
  std::vector<std::string> argv = {"git", "-C", repo, "-c", "user.name=Bench", "-c", "user.email=bench@example.com",
                                   "-c", "commit.gpgsign=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.timeout_s = 60;
  o.env_set = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"}};
  if (when >= 0) {
    o.env_set["GIT_AUTHOR_DATE"] = fmt::format("@{} +0000", when);
    o.env_set["GIT_COMMITTER_DATE"] = fmt::format("@{} +0000", when);
  }
  auto r = run_process(argv, o);
  if (!r.ok()) throw Error(fmt::format("{} failed: {}", argv_to_display(argv), tail(r.err)));
}

// The repository: commit i (1-based) has the spec at -O3 before kSwitch and -O2 from kSwitch on.
void make_repo(const std::string& repo) {
  make_dirs(repo);
  git(repo, {"init", "-q", "-b", "main"});
  std::string log;
  for (int i = 1; i <= kCommits; ++i) {
    const char* opt = i < kSwitch ? "-O3" : "-O2";
    write_file_atomic(repo + "/kernel-compiler.yaml",
                      fmt::format("name: kernel-compiler\nbackend: cpu\nkind: clang\ncompiler: clang++-19\n"
                                  "flags: [\"{}\", \"-march=x86-64-v3\"]\n", opt));
    log += fmt::format("change {}\n", i);
    write_file_atomic(repo + "/CHANGELOG", log);
    git(repo, {"add", "-A"});
    const std::string subject = i == kSwitch ? "opt: default to -O2" : fmt::format("change {}", i);
    git(repo, {"commit", "-q", "-m", subject}, 1735689600 + int64_t(i) * 3600);
  }
}

// The config's measure line: the placement and rounds per block asked for, or none (the bisector's defaults).
std::string measure_line(const std::string& placement, int block_rounds) {
  std::string fields;
  if (!placement.empty()) fields = "placement: " + placement;
  if (block_rounds > 0) fields += fmt::format("{}block_rounds: {}", fields.empty() ? "" : ", ", block_rounds);
  return fields.empty() ? "" : "measure: {" + fields + "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  int processes = 20;
  double threshold = 2;
  std::string kbisect, keep, placement;
  int block_rounds = 0;  // 0: the bisector's default for the placement
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--processes" && i + 1 < argc) processes = std::max(3, std::atoi(argv[++i]));
    else if (a == "--kbisect" && i + 1 < argc) kbisect = argv[++i];
    else if (a == "--threshold" && i + 1 < argc) threshold = std::atof(argv[++i]);
    else if (a == "--keep" && i + 1 < argc) keep = argv[++i];  // the repository and every run's workdir
    else if (a == "--placement" && i + 1 < argc) placement = argv[++i];
    else if (a == "--block-rounds" && i + 1 < argc) block_rounds = std::atoi(argv[++i]);
    else {
      std::cerr << "reproduce_rate: unknown argument '" << a << "' (see bench/reproduce_rate.cpp)\n";
      return 2;
    }
  }
  if (kbisect.empty()) kbisect = (fs::path(executable_path()).parent_path().parent_path() / "kbisect").string();
  try {
    const std::string root = keep.empty() ? temp_dir("kb-reproduce-rate") : keep;
    const std::string repo = root + "/compiler";
    make_repo(repo);
    write_file_atomic(root + "/bisect.yaml",
                      fmt::format("name: reproduce-rate\nrepo: {}\ngood: main~{}\nbad: main\n"
                                  "provider: {{in_tree: kernel-compiler.yaml}}\n"
                                  "benchmarks:\n  - kernel: matmul_tiled\n    backend: cpu\n"
                                  "    params: {{MR: 6, NR: 16}}\n    dtypes: [f32]\n    shapes: [[256, 256, 256]]\n"
                                  "metric: time\nthreshold: {}%\nbudgets: {{max_builds: 2}}\n{}",
                                  repo, kCommits - 1, threshold,
                                  measure_line(placement, block_rounds)));
    std::cout << fmt::format("machine: {}; {} commits, -O3 -> -O2 at commit {}, threshold {}%, {} processes, "
                             "placement {}, {}\n",
                             bench::cpu_model(), kCommits, kSwitch, threshold, processes,
                             placement.empty() ? "(the bisector's default)" : placement,
                             block_rounds > 0 ? fmt::format("{} rounds per block", block_rounds)
                                              : "the default rounds per block");
    std::vector<double> effects;
    int reproduced = 0, not_reproduced = 0;
    for (int k = 0; k < processes; ++k) {
      const std::string work = fmt::format("{}/run{}", root, k);
      RunOptions o;
      o.timeout_s = 600;
      auto r = run_process({kbisect, "bisect", root + "/bisect.yaml", "--workdir", work}, o);
      std::string result;
      for (const auto& e : fs::recursive_directory_iterator(work))
        if (e.path().filename() == "result.json") result = e.path().string();
      if (result.empty()) throw Error(fmt::format("bisect wrote no result.json ({}): {}", r.status_text(),
                                                  tail(r.out + r.err)));
      auto j = nlohmann::json::parse(read_file(result));
      const std::string verdict = j.value("verdict", "");
      double effect = NAN;
      std::string step_verdict = "?";
      if (j.contains("reproduce") && j["reproduce"].contains("decision")) {
        const auto& d = j["reproduce"]["decision"];
        effect = d.value("effect_pct", NAN);
        step_verdict = d.value("verdict", "?");
      }
      effects.push_back(effect);
      const bool rep = verdict != "not-reproduced" && verdict != "inconclusive";
      reproduced += rep;
      not_reproduced += verdict == "not-reproduced";
      std::cerr << fmt::format("  {}/{}: reproduce {:+.2f}% ({}), outcome {}\n", k + 1, processes, effect,
                               step_verdict, verdict);
    }
    if (keep.empty()) remove_tree(root);
    const double pooled = stats::median(effects);
    std::cout << fmt::format("pooled reproduce effect {:+.2f}% ({} the {}% (2 x threshold) that makes "
                             "not-reproduced wrong)\n",
                             pooled, pooled >= 2 * threshold ? "at least" : "below", 2 * threshold);
    std::cout << fmt::format("reproduce_rate: reproduced={}/{} pooled_effect={:+.2f}% not_reproduced={}\n",
                             reproduced, processes, pooled, not_reproduced);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "reproduce_rate: " << e.what() << "\n";
    return 1;
  }
}
