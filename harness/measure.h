// Measurement the NVBench way: warmup by time, batches sized to a minimum sample time, samples until
// the noise target is met (with min samples / min time, capped by max time / max samples), hot or cold
// (caches evicted before every sample). Several executables are measured together, interleaved in
// randomized blocks (each round runs every executable once, in a shuffled order), so drift hits all alike
// and round i of each executable forms a pair/tuple.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/rng.h"
#include "backends/backend.h"
#include "harness/results.h"

namespace kb {

struct MeasureConfig {
  std::string mode = "hot";  // hot | cold
  double warmup_s = 0.05;
  double min_sample_s = 0.0005;  // hot mode: batch grows until one sample takes at least this long
  int min_samples = 10;
  int max_samples = 2000;
  double min_time_s = 0.05;   // measured time (sum of samples) at least this
  double max_time_s = 3.0;    // wall time cap for the whole measurement
  double noise = 0.005;       // stop when every executable's ci_rel <= noise
  uint64_t seed = 1;          // shuffling of interleaved blocks
  // Fresh-load blocks (measure_fresh_block): where each block is measured. "loads": in this process, every
  // load re-placed; "process": every block of CPU loads in a new kbisect-worker process (harness/block_worker.h),
  // which also re-draws what this process keeps fixed. Loads without a recipe (the GPU backends') stay here.
  std::string placement = "loads";
};

struct Measurement {
  std::vector<double> samples_s;
  std::vector<double> clocks_mhz;
  MeasureConditions conditions;
  // Fresh-load blocks: where each block's load landed (Executable::placement(): CPU code, operands and
  // heap; GPU device operands; "" when the backend cannot say), one per block in order.
  std::vector<std::string> placements;
};

// Optional extra stop rule, evaluated after each round with everything measured so far (ab/bisect
// decide statistically). Returns true to stop ("decided").
using StopRule = std::function<bool(const std::vector<Measurement>&)>;

// Measures all executables (each already prepare()d) interleaved. Throws Error if a run throws.
// hold: when given, the warmup goes on (every executable run, unmeasured, in turn) for as long as it answers
// true, then warms up again for the warmup's time, at least one pass (the hold ends when another process's
// start stops disturbing this one); the block worker holds until the next block's worker has started
// (harness/block_worker.h).
std::vector<Measurement> measure_interleaved(const std::vector<Executable*>& exes, const MeasureConfig& cfg,
                                             const StopRule& stop = nullptr,
                                             const std::function<bool()>& hold = nullptr);

// One block of the fresh-load design (harness/ab.h, bisect/oracle.h): creates every executable with make[i]()
// in a random order (what is allocated first can land differently), measures exactly `rounds` interleaved
// rounds within max_time_s (cfg's warmup and batch settings, never stopping on noise) and returns the
// measurements in make's order, or nothing when the time ran out inside the block (a partial block is
// dropped). The executables are gone on return, so the next block's loads are fresh; each measurement holds
// its load's placement (one entry).
//
// With cfg.placement "process" and a LoadRecipe on every factory, the block runs in a fresh worker process
// instead (harness/block_worker.h): exec re-draws, by ASLR, everything this process keeps fixed between
// blocks (its own code, the shared libraries, the heap's start, the stack's start), and inside the worker
// the loads draw their placement as they do here. Throws InputError for another placement value.
struct LoadRecipe {
  Artifact artifact;
  Shape shape;
  std::shared_ptr<const std::vector<float>> A, B;  // the inputs prepare() gets
};
struct ExecutableFactory {
  std::function<std::unique_ptr<Executable>()> make;
  std::shared_ptr<const LoadRecipe> recipe;  // null: this load can only be made in this process
  ExecutableFactory() = default;
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<std::unique_ptr<Executable>, F&>>>
  ExecutableFactory(F f, std::shared_ptr<const LoadRecipe> r = nullptr) : make(std::move(f)), recipe(std::move(r)) {}
  std::unique_ptr<Executable> operator()() const { return make(); }
  explicit operator bool() const { return bool(make); }
};
std::vector<Measurement> measure_fresh_block(const std::vector<ExecutableFactory>& make, MeasureConfig cfg, int rounds,
                                             double max_time_s, Rng& rng);
// The warmup of block `block` (0-based) of a run of fresh-load blocks: cfg.warmup_s for the first block in this
// process, at most warm_s after it (the process is warm; a short warmup touches the new loads). In workers
// (cfg.placement "process") every block gets at most warm_s: every block must ask the same, so that the worker
// started ahead is the one that measures it, and a worker warms itself up (harness/block_worker.h).
double block_warmup_s(const MeasureConfig& cfg, int block, double warm_s);
// measure_fresh_block's two halves, for a caller that loads well before it measures (the block worker):
// creates every executable with make[i]() in a random order; then measures exactly `rounds` rounds of them.
std::vector<std::unique_ptr<Executable>> load_fresh(const std::vector<ExecutableFactory>& make, Rng& rng);
std::vector<Measurement> measure_loaded_block(const std::vector<std::unique_ptr<Executable>>& fresh,
                                              MeasureConfig cfg, int rounds, double max_time_s, Rng& rng,
                                              const std::function<bool()>& hold = nullptr);
// Throws InputError naming `name` unless `value` is a placement ("loads" or "process").
void check_placement(const std::string& value, const std::string& name);

}  // namespace kb
