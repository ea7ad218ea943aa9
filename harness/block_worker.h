// A process per block: one block of the fresh-load design (measure_fresh_block) measured in a new worker
// process. Within one process a reload lands where the last one was, and what the loads' own gaps cannot move
// stays put for the whole process: kbisect's code and the shared libraries the kernels call (libc's memcpy,
// the allocator), where the heap and the thread stacks begin. A new exec draws all of them again (ASLR), so
// every block samples another placement of everything (docs/statistics.md, "A process per block").
//
// The worker (`kbisect-worker`, worker/main.cpp) talks on stdin and stdout:
//   1. request in: a JSON line (the loads' artifacts and shapes, the block's settings, the seed), then the
//      input arrays as raw float32. It loads every executable through its backend in a random order,
//      prepares them, runs each once (first touches: page faults, lazy binding) and answers `ready`.
//   2. go in: {"max_time_s": S, "hold": true|false}. It warms up; holding, its warmup goes on until the next
//      line arrives (at most 2 s), then it measures the block's rounds (measure_loaded_block).
//   3. answer out: one JSON line, the samples and placements. The end of input instead of a go: it leaves.
// The parent starts each block's worker while the block before is measured, in that block's warmup, which
// holds until the new one is ready (docs/statistics.md, "Workers started ahead"): a start never runs beside
// a measured round, and is not on the critical path. A kernel that crashes takes only the worker down; the
// parent reports the signal in the block that needed it.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "core/rng.h"
#include "harness/measure.h"

namespace kb {

// The worker program: $KBISECT_BLOCK_WORKER when set (its path), else kbisect-worker next to this program
// or one directory up (build/tests and build/bench find the build's). Throws InputError naming what is
// missing: the variable's program, or the worker next to this one.
std::string block_worker_path();

// Runs measure_fresh_block(make, cfg, rounds, max_time_s, rng) in a new process of `worker` (the one started
// ahead for the same request, when there is one), and starts the next block's; every factory must carry a
// recipe. Returns what measure_fresh_block returns (nothing when the time ran out inside the
// block). Throws Error naming the worker's failure (a crash, a bad answer, the kernel's own error).
std::vector<Measurement> measure_block_in_worker(const std::string& worker, const std::vector<ExecutableFactory>& make,
                                                 const MeasureConfig& cfg, int rounds, double max_time_s, Rng& rng);

// Counts of this process's block workers since it started: how many were started, how many blocks were
// measured by a worker started ahead (during the block before), and how many of those were ended unused when
// a block of another request came (a step's last; the one waiting at exit is not counted). Every block but a
// measurement's first should find one waiting: blocks of one measurement must ask the same (all but the
// seed), or each start ahead is wasted and the next start is on the critical path.
struct BlockWorkerCounts {
  long started = 0, used_ahead = 0, ended_unused = 0;
};
BlockWorkerCounts block_worker_counts();

// The worker's side of the exchange above: the request and the go from `in`, `ready` and the answer to
// `out`; errors go to `err` as one line. in_fd is `in`'s file descriptor, which a holding warmup polls
// for the next line; without one (-1) it does not hold. Returns the exit status (0 ok, or no go came; 1 the
// measurement failed; 2 a bad request or go).
int block_worker_main(std::istream& in, std::ostream& out, std::ostream& err, int in_fd = -1);

}  // namespace kb
