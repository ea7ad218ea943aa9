// The part of a presubmit that needs no device: the two toolchains (base and change), every case of the
// covered sweeps compiled with both (in parallel, through the compile cache), each case classified by its
// code hashes (same hash under both: unchanged, never measured), every static metric that moved, and the
// config's static gate.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cache.h"
#include "core/log.h"
#include "harness/sweep.h"
#include "presubmit/config.h"

namespace kb::presubmit {

// One pair of toolchains to compare: names or toolchain files, as `kbisect sweep --toolchain` takes them.
struct ToolchainPair {
  std::string base, change;
  std::string base_label, change_label;  // for reports: "main~6 3f2a9c1d0e4b Subject" or the toolchain's name
};

// --base REV / --change REV: the config's provider gives the toolchain at each commit (built, fetched or read
// at the commit as a bisection would, cached under WORKDIR/toolchains/<sha>/). Throws InputError for a ref
// that does not resolve or a commit without a toolchain (its reason and build log tail).
ToolchainPair toolchains_at(const PresubmitConfig& cfg, const std::string& base_rev, const std::string& change_rev,
                            const std::string& workdir, Log& log);

// One side's compile of a case.
struct Build {
  enum class Status { compiled, skipped, failed, absent };  // absent: the sweep has no such case on this side
  Status status = Status::absent;
  std::string reason;
  Artifact art;  // when compiled
};
std::string to_string(Build::Status s);

struct MetricMove {
  std::string metric;  // code_bytes or a backend metric (registers, spill_stores, vgprs, lds_bytes, ...)
  double before = 0, after = 0;
};

struct StaticCase {
  enum class State {
    unchanged,    // the same code hash under both: nothing to measure
    changed,      // both compiled, the code differs
    broken,       // compiled with base, not with the change (failed, skipped or gone)
    fixed,        // compiled with the change only (new, or base failed)
    not_compiled  // compiled with neither
  };
  std::string name;  // the case key, with "@target" when several toolchain pairs are covered
  std::string key;   // CaseResult::key()
  size_t pair = 0;
  const PlannedCase* base = nullptr;    // null when absent on that side
  const PlannedCase* change = nullptr;
  Build b, c;
  State state = State::not_compiled;
  std::vector<MetricMove> moves;            // every static metric that differs, before -> after
  double static_size = 0;                   // sum of |log((after+1)/(before+1))| over registers, spills,
                                            // stack, smem and code_bytes where the backend reports them
  std::vector<std::string> gate_failures;   // "spills: 0 -> 24 (rule new)"
};
std::string to_string(StaticCase::State s);

struct StaticDiff {
  // The expanded sweeps (the cases point into them): per pair, the base and the change sides.
  std::vector<std::unique_ptr<Sweep>> sweeps;
  std::vector<StaticCase> cases;
  int builds = 0, compiled_afresh = 0;  // distinct builds, and how many were not in the compile cache
  double compile_wall_s = 0;
};

// Expands the config's case sets for every pair, compiles every distinct build of both sides in parallel
// (`jobs` threads, 0: one per core) into `cache`, and classifies each case. Throws InputError for a bad sweep.
StaticDiff compile_and_diff(const PresubmitConfig& cfg, const std::vector<ToolchainPair>& pairs, CompileCache& cache,
                            int jobs, Log& log);

// The gate of `cfg` on one case compiled by both sides: the rules it breaks, as text.
std::vector<std::string> gate_failures(const PresubmitConfig& cfg, const std::string& backend, const Artifact& base,
                                       const Artifact& change);

}  // namespace kb::presubmit
