// The history of issue 49 for the expensive-sample tests (tests/bisect/bisector/test_l3.cpp,
// tests/bisect/test_slurm_runs.cpp): a real git repository of 32 commits after good whose build carries a level
// (level.txt, copied from the checked-out tree into the build's output), 1% lower throughput from commit 19
// on, and a "training job" script that prints 1000 x that level with 0.3% run-to-run noise seeded by the
// commit and the run's index.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"

namespace kbtest {

// The build: a compiler wrapper and the commit's level beside it.
inline constexpr const char* kL3Build = R"SH(#!/bin/sh
set -e
cp level.txt "$KBISECT_OUT/level.txt"
printf '#!/bin/sh\nexec clang++-19 -O2 "$@"\n' > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
)SH";

// The training job: reads the level next to the compiler it was handed, draws its noise from a seed made of
// the commit and the run's index (cksum mixes them; mawk's first draws after srand follow the seed, so a few
// are dropped), prints a log with the throughput in it. KB_TEST_JOB_SLEEP makes a run take that long.
inline constexpr const char* kL3Job = R"SH(#!/bin/sh
set -e
level=$(cat "$(dirname "$KBISECT_TOOLCHAIN_COMPILER")/level.txt")
seed=$(printf '%s-%s' "$KBISECT_COMMIT" "$KBISECT_RUN_INDEX" | cksum | cut -d' ' -f1)
if [ -n "$KB_TEST_JOB_SLEEP" ]; then sleep "$KB_TEST_JOB_SLEEP"; fi
echo "step 100 loss 2.31"
awk -v l="$level" -v s="$seed" 'BEGIN {
  srand(s % 2147483647); for (i = 0; i < 7; i++) rand();
  u1 = rand(); u2 = rand(); if (u1 < 1e-12) u1 = 1e-12;
  z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
  printf "throughput: %.4f samples/s\n", 1000 * l * exp(0.003 * z) }'
echo "step 200 loss 2.07"
)SH";

inline constexpr int kCulprit = 19;

struct L3History {
  kbtest::GitRepo repo;
  std::vector<std::string> shas;  // [0] good .. [32] bad
  std::string job;
  L3History() {
    shas.push_back(repo.commit({{"build.sh", kL3Build}, {"level.txt", "1.000\n"}}, "good"));
    for (int i = 1; i <= 32; ++i) {
      std::map<std::string, std::string> files = {{"CHANGES", std::to_string(i) + "\n"}};
      if (i == kCulprit) files["level.txt"] = "0.990\n";
      shas.push_back(repo.commit(files, i == kCulprit ? "Enable the new scheduler (1% slower)" : "change " + std::to_string(i)));
    }
    job = repo.tmp() + "/job.sh";
    kb::write_file_atomic(job, kL3Job);
    EXPECT_TRUE(kb::run_process({"chmod", "+x", job}, {}).ok());
  }
  // The config; `extra` lines go last.
  std::string config(const std::string& extra = "") const {
    return fmt::format(
        "name: l3\nrepo: {}\ngood: {}\nbad: {}\n"
        "provider: {{build: {{command: 'sh build.sh', timeout_s: 60, toolchain: {{name: built, backend: cpu, kind: clang, "
        "compiler: '{{out}}/cc'}}}}}}\n{}"
        "metric: {{external: {{command: [{}], parse: 'throughput: ([0-9.]+)', better: higher, timeout_s: 60}}}}\n"
        "threshold: 0.5%\nbudgets: {{max_builds: 40, max_runs: 80}}\n{}",
        repo.path(), shas.front(), shas.back(), kbtest::kSmallCase, job, extra);
  }
};

}  // namespace kbtest
