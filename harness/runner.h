// Runs planned cases: compile (cached) -> load -> prepare inputs -> correctness vs the Eigen reference
// -> ready to measure. Failures stay contained in the case's result (docs/design.md, rule 7: nothing measured is lost).
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cache.h"
#include "core/log.h"
#include "harness/measure.h"
#include "harness/reference.h"
#include "harness/results.h"
#include "harness/sweep.h"

namespace kb {

struct PreparedCase {
  CaseResult result;                 // static metrics, correctness, status so far
  std::unique_ptr<Executable> exe;   // null unless ready to measure (status ok so far)
  // When ready: a fresh executable of the same artifact with the same inputs (loaded again, new
  // buffers), for measurements that re-create executables between blocks; on the CPU backend it carries the
  // recipe a block worker makes the same load from (harness/block_worker.h). Valid while the caches
  // passed to prepare_case live.
  ExecutableFactory reload;
  // The correctness check's own run of the kernel, as the backend timed it (first run after prepare:
  // operands just written, nothing warmed). 0 when the case did not get that far.
  double check_run_s = 0;
  bool ready() const { return exe != nullptr; }
};

// The result skeleton of a planned case (kernel, params, shape, dtype, toolchain; nothing measured), and
// its key (CaseResult::key: the case without the toolchain, to pair one case across toolchains).
CaseResult blank_result(const PlannedCase& pc);
std::string case_key(const PlannedCase& pc);
// The compile request of a planned case with its own toolchain (out_dir and log_limit left at defaults).
CompileRequest compile_request(const PlannedCase& pc);

// Compiles the case (static metrics are recorded even when the backend cannot run), loads it, prepares
// inputs for its shape and checks correctness. Never throws for a case-level failure: the result says
// failed / skipped / incorrect with the reason.
PreparedCase prepare_case(const PlannedCase& pc, CompileCache& cache, ReferenceCache& refs);

// A factory of fresh loads of `art` prepared on `problem`'s inputs (what PreparedCase::reload is); on the CPU
// backend it carries the recipe, so blocks of these loads run in a worker process.
ExecutableFactory fresh_loads(Backend& be, const Artifact& art, std::shared_ptr<const GemmProblem> problem);

// Fills samples, conditions and summary of a prepared case from a measurement.
void record_measurement(CaseResult& r, const Measurement& m);

// Compiles every distinct build of the sweep's runnable cases into the cache, `jobs` at a time (0: one per
// core), before anything is measured, so a GPU machine's cores compile while no timing runs. Failures
// are left for the case to compile again and report. Returns the cache keys it compiled afresh: their cases
// still report cache_hit = false (the build was not in the cache before this run).
std::set<std::string> precompile(const Sweep& sweep, CompileCache& cache, int jobs, Log& log);

// Runs a whole sweep, one case after the other, and saves the results after every case (atomic
// write), so a crash loses at most the case in flight. `progress` prints "case i/N ... ETA" to stderr.
// The builds are compiled first by precompile() with `jobs` threads.
RunResults run_sweep(const Sweep& sweep, const std::string& results_path, Log& log = quiet_log(), int jobs = 0);

}  // namespace kb
