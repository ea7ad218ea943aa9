// The question asked of each commit: "is this commit's toolchain on the good or the bad side?"
//
// A Lab answers the two things the bisection needs from the world: probe(sha) builds the toolchain at a
// commit and compiles the cases with it (code hashes and static metrics, no timing), and measure() times
// several commits' executables interleaved in one process, unit by unit, until a stop rule says the
// question is decided. RealLab does this with the provider, the compile cache, the backends and
// harness/measure; the simulation (bisect/simulate) implements the same interface with synthetic commits.
//
// Units are BLOCKS for loaded executables (the time and tflops metrics, block_rounds > 0): every block
// loads all the commits' executables again (fresh code mapping and buffers, in a random order), times
// block_rounds interleaved rounds and is summarized per commit (block_summary). Two loads of identical code
// run at different speeds for as long as they stay loaded (placement: pages, cache sets, aliasing between
// operands; measured at a few tenths of a percent), so with one load per commit for the whole
// bisection the good and bad endpoints would carry one fixed placement offset into every step and bias
// each ±0.25% midpoint question the same way. Reloaded per block, placement varies between blocks and
// widens the CI instead of biasing it (the same design as `kbisect ab`, harness/ab.h). block_rounds = 0
// keeps one load per commit and decides on rounds.
//
// The decisions are pure (no I/O) and shared by both: bisect/decide.h. Equal code hashes need no
// decision at all: a commit with the same machine code as an already-classified commit is on that
// commit's side without measuring.
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/decide.h"

namespace kb::bisect {

// What a commit's toolchain produced for the cases (no timing). Journaled per commit.
struct Probe {
  bool ok = false;
  std::string reason;                     // build / compile / correctness failure (a skip)
  std::vector<std::string> case_ids;      // case keys, sorted (the same list for every commit)
  std::vector<std::string> code_hashes;   // per case
  std::vector<double> values;             // per case, the static metric (empty for timed metrics)
  bool built = false;                     // a toolchain build ran for this probe
  double build_s = 0;
  std::string toolchain_identity;
  std::string hash_key() const;           // all code hashes together ("" when not ok)
};
nlohmann::json to_json(const Probe& p);
Probe probe_from_json(const nlohmann::json& j);

using RoundsStop = std::function<bool(const Rounds&)>;  // called with the units so far

// One measurement's request: at most max_units units (blocks of block_rounds rounds, or single rounds when
// block_rounds is 0) within max_time_s.
struct MeasureAsk {
  int max_units = 0;
  int block_rounds = 0;
  double max_time_s = 0;
  uint64_t seed = 1;
};

struct Measured {
  Rounds units;  // [commit][unit]: what the decisions see
  Rounds raw;    // [commit][round]: every timed round of the complete units, in order (== units without blocks)
  // Blocks of loaded executables: [block][executable, commit-major as the cases] where each load landed
  // (Placement::str, backends/cpu/placement.h); empty without blocks.
  std::vector<std::vector<std::string>> placements;
};

// A block's summary per commit, paired to the first commit within the block: commit 0 gets the median of
// its rounds, commit c that times exp(median_i log(x_c,i / x_0,i)). Ratios between two commits' summaries
// are then medians of paired log-ratios (drift inside the block cancels), as in `kbisect ab`.
std::vector<double> block_summary(const Rounds& block);
// Appends a complete block to m: its rounds to m.raw, its block_summary to m.units (sized per commit).
void add_block(Measured& m, const Rounds& block);

// One run of the metric at one commit (expensive samples, measure.sample_cost: expensive), as it ended.
struct RunDone {
  int ticket = -1;
  std::string sha;
  double value = 0;      // larger = worse (an external metric where higher is better comes inverted)
  double wall_s = 0;     // start to end, queueing included
  std::string job;       // the Slurm job that ran it ("" for a local run)
  bool cancelled = false;  // cancel_runs() stopped it: no value
};

class Lab {
 public:
  virtual ~Lab() = default;
  virtual Probe probe(const std::string& sha) = 0;
  // Measures the commits interleaved (all already probed ok), calling stop after each unit; ends when stop
  // returns true, after ask.max_units, or after ask.max_time_s (a partial block is dropped).
  virtual Measured measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) = 0;
  // Builds ahead (builders > 1, bisect/builds.h): the commits the next round needs and those later rounds
  // can need, most urgent first, and those a decision made useless (their builds in flight are cancelled).
  // A lab that builds nothing ahead ignores it.
  virtual void want(const std::vector<std::string>& needs, const std::vector<std::string>& ahead,
                    const std::vector<std::string>& useless) {
    (void)needs;
    (void)ahead;
    (void)useless;
  }
  // True when probe(sha) will not wait for a build.
  virtual bool ready(const std::string& sha) {
    (void)sha;
    return false;
  }
  // What the builds ahead did since the last call, as journal events (build_submitted, build_cancelled).
  virtual std::vector<nlohmann::json> build_events() { return {}; }
  // Cancels the builds ahead still in flight and waits for them to end (the search is over).
  virtual void stop_builds() {}
  // Expensive samples (bisect/loop.h, "L3"): starts one run of the metric at a commit already probed ok and
  // returns its ticket; `ordinal` numbers that commit's runs from 0 (journaled ones included), the command's
  // KBISECT_RUN_INDEX. wait_run() blocks until a started run ends and returns it (rethrowing what a failed run
  // threw; throws std::logic_error when none is in flight). cancel_runs() stops the runs in flight that can be
  // stopped (Slurm jobs); wait_run() then returns them with `cancelled`. A lab without runs throws.
  virtual int start_run(const std::string& sha, int ordinal) {
    (void)sha;
    (void)ordinal;
    throw std::logic_error("this lab has no single runs");
  }
  virtual RunDone wait_run() { throw std::logic_error("this lab has no single runs"); }
  virtual void cancel_runs() {}
  // The commit whose outputs are the reference of users' Triton kernels (harness/user_check.h): the good
  // one, told before anything is probed, so that it is loaded first even when a resumed run takes its probe
  // from the journal.
  virtual void reference(const std::string& sha) { (void)sha; }
};

}  // namespace kb::bisect
