#include "harness/measure.h"

#include <alloca.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "backends/cpu/placement.h"
#include "harness/block_worker.h"
#include "core/clock.h"
#include "core/error.h"

namespace kb {

namespace {

constexpr size_t kThreadHeapGapPages = 256, kScratchProbe = 64 << 10;

// Runs f() on a new thread whose stack starts a random 0..64 KiB (16-byte steps) lower, and whose malloc
// arena holds 0..kThreadHeapGapPages random pages before f() runs; returns where that stack begins and where
// a kernel's scratch would start. The kernels' stack frames (their spills and reloads) would otherwise sit at
// one address for the whole process: its ASLR draw, fixed across blocks. Measured with
// bench/layout_calibration on a Zen 5 VM, that one draw split clang-19 vs clang-16 into processes reading
// about +0.2% and others +2% to +4%, each with a confident CI. And the kernels allocate their scratch (packing
// buffers) per call on this thread, from this thread's arena, which the loads' heap gaps do not reach: without
// this gap it sat at one offset of its arena in every block (docs/statistics.md, "Placement per block", "Quiet
// worker blocks").

template <class F>
std::pair<uintptr_t, uintptr_t> on_moved_stack(F&& f) {
  std::exception_ptr error;
  uintptr_t stack = 0, scratch = 0;
  std::thread t([&] {
    const size_t pad = 16 * size_t(placement_draw(4097));
    volatile char* p = static_cast<char*>(alloca(pad + 64));
    p[0] = 0;
    p[pad] = 0;
    stack = reinterpret_cast<uintptr_t>(p);
    try {
      const HeapGap gap(kThreadHeapGapPages);
      void* next = std::malloc(kScratchProbe);  // where a kernel's packing buffer would start
      scratch = reinterpret_cast<uintptr_t>(next);
      std::free(next);
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
  return {stack, scratch};
}

}  // namespace

void check_placement(const std::string& value, const std::string& name) {
  if (value != "loads" && value != "process")
    throw InputError(fmt::format("{} '{}' must be loads or process", name, value));
}

std::vector<std::unique_ptr<Executable>> load_fresh(const std::vector<ExecutableFactory>& make, Rng& rng) {
  std::vector<size_t> order(make.size());
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  std::vector<std::unique_ptr<Executable>> fresh(make.size());
  for (size_t i : order) fresh[i] = make[i]();
  return fresh;
}

std::vector<Measurement> measure_loaded_block(const std::vector<std::unique_ptr<Executable>>& fresh,
                                              MeasureConfig cfg, int rounds, double max_time_s, Rng& rng,
                                              const std::function<bool()>& hold) {
  std::vector<Executable*> exes;
  for (auto& e : fresh) exes.push_back(e.get());
  cfg.seed = rng.next();
  cfg.min_samples = cfg.max_samples = rounds;
  cfg.min_time_s = 0;
  cfg.max_time_s = max_time_s;
  cfg.noise = -1;
  std::vector<Measurement> ms;
  const auto [stack, scratch] = on_moved_stack([&] { ms = measure_interleaved(exes, cfg, nullptr, hold); });
  for (const auto& m : ms)
    if (m.samples_s.size() < size_t(rounds)) return {};
  for (size_t i = 0; i < ms.size(); ++i) {
    std::string p = exes[i]->placement();
    ms[i].placements.push_back(p + (p.empty() ? "" : " ") + fmt::format("stack=0x{:x} scratch=0x{:x}", stack, scratch));
  }
  return ms;
}

double block_warmup_s(const MeasureConfig& cfg, int block, double warm_s) {
  return block > 0 || cfg.placement == "process" ? std::min(cfg.warmup_s, warm_s) : cfg.warmup_s;
}

std::vector<Measurement> measure_fresh_block(const std::vector<ExecutableFactory>& make, MeasureConfig cfg, int rounds,
                                             double max_time_s, Rng& rng) {
  check_placement(cfg.placement, "placement");
  const bool recipes =
      !make.empty() && std::all_of(make.begin(), make.end(), [](const auto& f) { return bool(f.recipe); });
  if (recipes && cfg.placement == "process")
    return measure_block_in_worker(block_worker_path(), make, cfg, rounds, max_time_s, rng);
  const auto fresh = load_fresh(make, rng);
  return measure_loaded_block(fresh, cfg, rounds, max_time_s, rng);
}

namespace {

// Warmup by time (each executable at least once), which also estimates one execution's duration and
// gives the batch. In a random order: the executable warmed last starts the rounds with its code and data
// in cache, and in a fixed order that would be the same one (B in ab, the last commit of a bisect step)
// in every block. Fills each measurement's conditions.
std::vector<int> warm_up(const std::vector<Executable*>& exes, const MeasureConfig& cfg, std::vector<size_t>& order,
                         Rng& rng, std::vector<Measurement>& out) {
  const bool cold = cfg.mode == "cold";
  rng.shuffle(order);
  std::vector<int> batch(exes.size(), 1);
  for (size_t i : order) {
    auto& c = out[i].conditions;
    double w0 = now_s(), per_run = 0;
    int runs = 0;
    do {
      if (cold) exes[i]->flush_caches();
      per_run = exes[i]->run(1).seconds;
      ++runs;
    } while (now_s() - w0 < cfg.warmup_s && runs < 100000);
    c.warmup_s = now_s() - w0;
    c.warmup_runs = runs;
    if (!cold && per_run > 0 && per_run < cfg.min_sample_s)
      batch[i] = int(std::min<double>(1 << 20, std::ceil(cfg.min_sample_s / per_run)));
    c.batch = batch[i];
    c.mode = cfg.mode;
    c.clock = exes[i]->clock_name();
    c.noise_target = cfg.noise;
    c.min_samples = cfg.min_samples;
    c.min_time_s = cfg.min_time_s;
    c.max_time_s = cfg.max_time_s;
    c.max_samples = cfg.max_samples;
    c.interleaved = exes.size() > 1;
  }
  return batch;
}

// One randomized round: every executable once, in a shuffled order. A throttled sample drops the whole
// round so tuples stay aligned across executables; returns whether it was kept.
bool run_round(const std::vector<Executable*>& exes, bool cold, const std::vector<int>& batch,
               std::vector<size_t>& order, Rng& rng, std::vector<Measurement>& out, std::vector<double>& measured) {
  std::vector<TimedSample> round(exes.size());
  rng.shuffle(order);
  bool throttled = false;
  for (size_t idx : order) {
    if (cold) exes[idx]->flush_caches();
    round[idx] = exes[idx]->run(batch[idx]);
    throttled = throttled || round[idx].throttled;
  }
  if (throttled) return false;
  for (size_t i = 0; i < exes.size(); ++i) {
    out[i].samples_s.push_back(round[i].seconds);
    if (round[i].clock_mhz > 0) out[i].clocks_mhz.push_back(round[i].clock_mhz);
    measured[i] += round[i].seconds * batch[i];
  }
  return true;
}

// Why measuring stops after this round ("" = go on): the stop rule decided, the noise target holds with
// enough samples and time, or a cap.
std::string stop_reason(const std::vector<Measurement>& out, const std::vector<double>& measured,
                        const MeasureConfig& cfg, const StopRule& stop, double elapsed) {
  const size_t count = out[0].samples_s.size();
  if (count >= size_t(std::max(1, cfg.min_samples))) {
    bool enough_time = true, quiet = true;
    for (size_t i = 0; i < out.size(); ++i) {
      enough_time = enough_time && measured[i] >= cfg.min_time_s;
      quiet = quiet && summarize(out[i].samples_s, 0).ci_rel <= cfg.noise;
    }
    if (stop && stop(out)) return "decided";
    if (enough_time && quiet && !stop) return "noise";
  }
  if (count >= size_t(cfg.max_samples)) return "max_samples";
  if (elapsed >= cfg.max_time_s) return "max_time";
  return "";
}

}  // namespace

std::vector<Measurement> measure_interleaved(const std::vector<Executable*>& exes, const MeasureConfig& cfg,
                                             const StopRule& stop, const std::function<bool()>& hold) {
  if (exes.empty()) return {};
  if (cfg.mode != "hot" && cfg.mode != "cold")
    throw InputError(fmt::format("measure mode '{}' is not hot or cold", cfg.mode));
  const size_t n = exes.size();
  std::vector<Measurement> out(n);
  const double t_start = now_s();
  Rng rng(cfg.seed);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const std::vector<int> batch = warm_up(exes, cfg, order, rng, out);
  if (hold) {
    const double h0 = now_s();
    auto pass = [&] {
      for (size_t i : order) {
        if (cfg.mode == "cold") exes[i]->flush_caches();
        exes[i]->run(batch[i]);
        out[i].conditions.warmup_runs += batch[i];
      }
    };
    while (hold()) pass();
    // The hold ends when whatever it waited for (another process's start, beside this one) is done; that
    // start evicted this one's data. The warmup starts again (its time, at least one pass), so that no measured
    // round pays for it: without it the first round of a worker block ran 5-6% slow on average
    // (docs/statistics.md, "Quiet worker blocks").
    const double s0 = now_s();
    do pass();
    while (now_s() - s0 < cfg.warmup_s);
    for (auto& m : out) m.conditions.warmup_s += now_s() - h0;  // the held warmup is warmup too
  }
  std::vector<double> measured(n, 0.0);
  int discarded = 0;
  std::string reason;
  while (reason.empty()) {
    if (!run_round(exes, cfg.mode == "cold", batch, order, rng, out, measured)) ++discarded;
    reason = stop_reason(out, measured, cfg, stop, now_s() - t_start);
  }
  for (auto& m : out) {
    m.conditions.stop_reason = reason;
    m.conditions.discarded_throttled = discarded;
  }
  return out;
}

}  // namespace kb
