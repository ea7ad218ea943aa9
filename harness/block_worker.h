// A process per block: one block of the fresh-load design (measure_fresh_block) measured in a new worker
// process. Within one process a reload lands where the last one was, and what the loads' own gaps cannot move
// stays put for the whole process: kbisect's code and the shared libraries the kernels call (libc's memcpy,
// the allocator), where the heap and the thread stacks begin. A new exec draws all of them again (ASLR), so
// every block samples another placement of everything (docs/statistics.md, "A process per block").
//
// The worker (`kbisect-worker`, worker/main.cpp) reads one request on stdin: a JSON line (the loads'
// artifacts and shapes, the block's settings, the seed) followed by the input arrays as raw float32; it
// loads every executable through its backend, measures the block with measure_fresh_block and answers one
// JSON line on stdout. A kernel that crashes takes only the worker down; the parent reports the signal.
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

// Runs measure_fresh_block(make, cfg, rounds, max_time_s, rng) in a new process of `worker`; every factory
// must carry a recipe. Returns what measure_fresh_block returns (nothing when the time ran out inside the
// block). Throws Error naming the worker's failure (a crash, a bad answer, the kernel's own error).
std::vector<Measurement> measure_block_in_worker(const std::string& worker, const std::vector<ExecutableFactory>& make,
                                                 const MeasureConfig& cfg, int rounds, double max_time_s, Rng& rng);

// The worker's side: reads one request from `in`, measures, writes the answer to `out`; errors go to `err`
// as one line. Returns the exit status (0 ok, 1 the measurement failed, 2 a bad request).
int block_worker_main(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace kb
