// The static stage of `kbisect tune`: compile every valid candidate (in parallel, through the compile
// cache), prune on static metrics (tune/prune.h), estimate GPU candidates with the static model
// (tune/model.h) and, where nothing is measured, rank them by it.
#pragma once
#include <string>
#include <vector>

#include "backends/cache.h"
#include "core/log.h"
#include "tune/tuner.h"

namespace kb::tune {

// The toolchain the pruning compiles use: for clang on the CPU, the toolchain with its register-allocation
// remarks (-Rpass-missed=regalloc: diagnostics only, the same code); otherwise the toolchain itself.
Toolchain remark_toolchain(const Toolchain& tc);

// Compiles every candidate with no status yet, `jobs` at a time, for `shape` (a user's Triton kernel is
// specialized on its shape's arguments, as the JIT does; other kernels ignore it); a failure becomes "failed"
// with the compiler's message. Fills metrics, and `logs` (the compile logs, parallel to cands). Returns the
// compiles not served by the cache.
int compile_all(std::vector<Candidate>& cands, const KernelDecl& k, DType dt, const Shape& shape, const Toolchain& tc,
                int jobs, CompileCache& cache, std::vector<std::string>& logs, Log& log);

// Marks "pruned", with the one-line reason, what cannot win: on the CPU (clang) the spill rule, on a GPU
// what cannot launch on `device` (nullptr: limits unknown) and spills above the rule's bound.
void prune_static(std::vector<Candidate>& cands, const std::vector<std::string>& logs, const std::string& backend,
                  const PruneRule& rule, const DeviceFacts* device);

// Estimates every GPU candidate still in the running for `shape`: the GEMM model when every one of them
// reads as a tiled GEMM and the device has facts, else the generic order for all (so that the order is
// one kind). Returns what ordered them (for the report).
std::string estimate_all(std::vector<Candidate>& cands, const Shape& shape, DType dt, const DeviceFacts* device);

// The candidates in `which` in the model's order (those without an estimate keep their place, after).
std::vector<size_t> model_order(const std::vector<Candidate>& cands, std::vector<size_t> which);

// Nothing measured: the candidates still in the running become "ranked" in the model's order, the first
// is recorded as the shape's pick (a static estimate, not a measured winner).
void rank_static(ShapeTune& st);

}  // namespace kb::tune
