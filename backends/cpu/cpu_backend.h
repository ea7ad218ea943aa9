// The CPU backend as an object of its own, for a program that needs no other backend (the block worker,
// harness/block_worker.h): the registry (backends()) would link the GPU backends and their libraries too.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace kb {

std::unique_ptr<Backend> make_cpu_backend();

// Loads skip the forked crash probe (a kernel's first run in a child process). For a process that is itself
// the isolation: the block worker, whose crash the parent reports. The probe's fork would also make every
// writable page of a short-lived worker copy-on-write just before its timed rounds.
void cpu_skip_crash_probe(bool skip);

}  // namespace kb
