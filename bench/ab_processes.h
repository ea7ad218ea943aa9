// Shared by bench/layout_calibration and bench/sensitivity's code-change arm: pairs of CPU builds whose
// code differs, each run through `kbisect ab` in its own process (so each sees its own ASLR placement on top
// of the per-block placement draws), with the decision read back from ab.json.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/tuned_table.h"

namespace kb::bench {

struct Side {
  std::string compiler;
  std::string flags;  // YAML list items, comma separated
};

struct Pair {
  std::string id, what;
  Side a, b;
};

inline const std::string kV3 = "\"-march=x86-64-v3\"";

inline std::vector<Pair> all_pairs() {
  return {
      {"a", "same build (clang-19 -O3)", {"clang++-19", "\"-O3\", " + kV3}, {"clang++-19", "\"-O3\", " + kV3}},
      {"b", "-falign-functions=16 vs 64",
       {"clang++-19", "\"-O3\", " + kV3 + ", \"-falign-functions=16\""},
       {"clang++-19", "\"-O3\", " + kV3 + ", \"-falign-functions=64\""}},
      {"c", "-O3 vs -O2", {"clang++-19", "\"-O3\", " + kV3}, {"clang++-19", "\"-O2\", " + kV3}},
      {"d", "clang-19 vs clang-16", {"clang++-19", "\"-O3\", " + kV3}, {"clang++-16", "\"-O3\", " + kV3}},
  };
}

inline void write_toolchain(const std::string& path, const std::string& name, const Side& s) {
  write_file_atomic(path, fmt::format("name: {}\nbackend: cpu\nkind: clang\ncompiler: {}\nflags: [{}]\n", name,
                                      s.compiler, s.flags));
}

struct Estimate {
  double effect = NAN, lo = NAN, hi = NAN;
  std::string verdict;
};

// One `kbisect ab` process; its decision from ab.json.
// extra: more `kbisect ab` arguments (e.g. --min-blocks 20).
inline Estimate run_ab(const std::string& kbisect, const std::string& dir, const std::string& out, double budget_s,
                       const std::vector<std::string>& extra = {}) {
  RunOptions o;
  o.timeout_s = budget_s * 4 + 120;
  std::vector<std::string> argv = {kbisect, "ab", dir + "/sweep.yaml", "--toolchain", dir + "/A.yaml", "--toolchain",
                                   dir + "/B.yaml", "--budget-s", fmt::format("{}", budget_s), "-o", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = run_process(argv, o);
  if (r.exit_code != 0 && r.exit_code != 1)
    throw Error(fmt::format("kbisect ab failed ({}): {}", r.status_text(), tail(r.out + r.err)));
  auto j = nlohmann::json::parse(read_file(out + "/ab.json"));
  const auto& cases = j.at("extra").at("comparison").at("cases");
  if (cases.empty() || !cases[0].value("compared", false))
    throw Error(fmt::format("kbisect ab compared nothing: {}", tail(r.out + r.err)));
  const auto& d = cases[0].at("decision");
  Estimate e;
  e.effect = d.at("effect_pct").get<double>();
  e.lo = d.at("ci_pct").at(0).get<double>();
  e.hi = d.at("ci_pct").at(1).get<double>();
  e.verdict = d.at("verdict").get<std::string>();
  return e;
}

// The CPU the figures were measured on: its model and widest vector ISA (harness/tuned_table.h reads them).
inline std::string cpu_model() {
  const CpuVectorInfo c = cpu_vector_info();
  return fmt::format("{}, {}", c.model.empty() ? "unknown CPU" : c.model, c.isa);
}


// Writes DIR/sweep.yaml (matmul_tiled on the CPU, MR=6 NR=16, fp32, 256^3) and DIR/A.yaml, DIR/B.yaml.
inline void write_pair(const std::string& dir, const Pair& p) {
  make_dirs(dir);
  write_file_atomic(dir + "/sweep.yaml",
                    "name: code-change\n"
                    "benchmarks:\n"
                    "  - kernel: matmul_tiled\n"
                    "    backend: cpu\n"
                    "    params: {MR: 6, NR: 16}\n"
                    "    dtypes: [f32]\n"
                    "    shapes: [[256, 256, 256]]\n");
  write_toolchain(dir + "/A.yaml", "A", p.a);
  write_toolchain(dir + "/B.yaml", "B", p.b);
}

}  // namespace kb::bench
