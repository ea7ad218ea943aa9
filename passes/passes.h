// `kbisect passes`: name the LLVM pass execution at which a kernel's metric moves from its unoptimized
// level to its fully optimized one, for clang-based toolchains (kinds clang, clang-cuda,
// clang-hip).
//
// Method. The case is compiled with `-mllvm -opt-bisect-limit=-1`, whose stderr lines
// `BISECT: running pass (N) <Pass> on <unit>` list every skippable pass execution (N = 1..total). Limit 0
// gives the "low" level, the full count the "high" one. A probe at N is placed between the two by its
// position p(N) = log(m(N)/m(0)) / log(m(total)/m(0)) (static metrics: linear, (m(N)-m(0))/(m(total)-m(0))).
// N is "high" when p(N) >= cut (default 0.5: the metric has covered half of the way, in log terms, to the
// optimized level; a crossing N-1 -> N is a single pass execution that takes the metric across that line).
// Runtime is not monotonic in N, so this is not a search for equality: bisection on N keeps lo "low" and
// hi "high" and ends at a crossing N-1 -> N. Timed probes are measured interleaved with both levels in one
// process; each look takes the paired log-ratio probe/low with its Hodges-Lehmann CI and decides the side
// when the CI lies entirely on one side of cut * gap (else more rounds, up to the probe budget; then the
// point estimate decides). The crossing is confirmed by a fresh interleaved measurement of N-1 against N
// (sequential paired decision: N must be faster/slower beyond the threshold, in the direction of the gap).
// Static metrics (code_bytes, registers, vgprs, ...) need no timing and no device. Every compile goes
// through the compile cache; the limit is a flag, so the key is (source, params, flags, N).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "stats/stats.h"

namespace kb {

struct PassExec {
  int n = 0;             // 1-based execution number (opt-bisect's counter)
  std::string pass;      // "LoopVectorizePass", "X86 LEA Fixup", ...
  std::string unit;      // "kb_gemm", "function (kb_gemm)", "loop %for.body in function ...", "[module]"
  bool ran = true;       // "running" vs "NOT running"
};

// Parses opt-bisect stderr lines (others are ignored). Numbers are returned as printed, in order.
std::vector<PassExec> parse_opt_bisect(const std::string& log);

// The toolchain kinds `passes` and `explain` accept.
bool is_clang_kind(const std::string& kind);

struct PassesOptions {
  std::string sweep_file;
  std::string toolchain;      // name or file; must be clang-based
  std::string filter;         // regex on case ids
  std::string metric = "time";  // time | code_bytes | any static metric a backend reports (registers, vgprs, ...)
  double threshold = 0.005;   // the two levels must differ by more than this (relative)
  double cut = 0.5;           // fraction of the (log) gap that counts as "reached the optimized level"
  double alpha = 0.05;
  double probe_budget_s = 20; // measurement time per probe / level check / confirmation
  int min_pairs = 8, max_pairs = 512;
  uint64_t seed = 1;
  Log* log = nullptr;  // progress lines (none when null)
};

struct PassProbe {
  int n = 0;
  double value = 0;        // static: the metric; time: median seconds at N
  double position = 0;     // 0 = low level, 1 = high level
  bool high = false;
  int64_t rounds = 0;      // timed: rounds measured
  std::string how;         // "static" | "decided" | "budget" | "same-code" (machine code of a placed probe)
};

struct PassCrossing {
  std::string case_id, toolchain, metric;
  // found | unconfirmed | no-difference | skipped | failed
  std::string verdict;
  std::string reason;
  int total = 0;                  // pass executions listed by opt-bisect-limit=-1
  double low = 0, high = 0;       // metric at N = 0 and N = total (time: median seconds)
  int n = -1;                     // the crossing: pass execution N (N-1 is below the cut, N at/above it)
  std::string pass, unit;
  double before = 0, after = 0;   // metric at N-1 and N (time: medians from the confirmation)
  stats::Decision confirm;        // time: N-1 (base) vs N (new)
  std::vector<PassProbe> probes;  // in the order they were taken
  int compiles = 0;
  double wall_s = 0;
};

std::vector<PassCrossing> run_passes(const PassesOptions& opts);

nlohmann::json passes_to_json(const std::vector<PassCrossing>& r);
std::string render_passes(const std::vector<PassCrossing>& r);

}  // namespace kb
