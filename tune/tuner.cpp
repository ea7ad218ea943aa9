#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "core/error.h"
#include "core/text.h"
#include "harness/ab.h"
#include "harness/runner.h"
#include "tune/space.h"
#include "tune/static_stage.h"

namespace kb::tune {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kFirstLook = 8;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The kernel with the options' space replacing the declared values of the parameters they name.
KernelDecl kernel_with_space(const KernelDecl& k, const TuneOptions& o) {
  KernelDecl out = k;
  for (const auto& [name, values] : o.space) {
    auto it = std::find_if(k.params.begin(), k.params.end(), [&](const ParamSpec& p) { return p.name == name; });
    if (it == k.params.end())
      throw InputError(fmt::format("--space: unknown parameter '{}' of {}/{}", name, k.backend, k.name));
    if (values.empty()) throw InputError(fmt::format("--space: parameter '{}' is given an empty space", name));
    auto t = std::find_if(out.space.begin(), out.space.end(), [&](const TunableParam& p) { return p.name == name; });
    if (t == out.space.end()) out.space.push_back({name, values});
    else t->values = values;
  }
  if (out.space.empty())
    throw InputError(fmt::format("space: kernel {}/{} declares no tunable space (give --space NAME=V1,V2)", k.backend,
                                 k.name));
  return out;
}

void check_options(const TuneOptions& o) {
  if (o.shapes.empty()) throw InputError("--shape: at least one shape is needed");
  if (!(o.budget_s >= minimum_budget_s()))
    throw InputError(fmt::format("--budget-s {} is too small to measure anything (at least {} s: {} rounds of two "
                                 "candidates and a confirming A/B)",
                                 o.budget_s, minimum_budget_s(), kFirstLook));
  if (!(o.alpha > 0 && o.alpha < 0.5)) throw InputError(fmt::format("--alpha {} must be in (0, 0.5)", o.alpha));
}

PlannedCase plan(const KernelDecl& k, const Params& p, const Shape& sh, DType dt, const std::shared_ptr<const Toolchain>& tc) {
  PlannedCase pc;
  pc.c.kernel = &k;
  pc.c.params = p;
  pc.c.shape = sh;
  pc.c.dtype = dt;
  pc.c.toolchain = tc->name;
  pc.toolchain = tc;
  return pc;
}

// One timing sample of an executable: an untimed run, then a batch long enough to time (about 1 ms), time
// per execution. The race interleaves many candidates whose operands evict each other's from the caches;
// without the untimed run each sample would start cold, and the race would rank by cold time what sweeps
// and brute force measure hot (bench/tune_vs_bruteforce: BM=192 won cold races, BM=96 is 4% faster hot).
// The untimed run is counted in the measuring time.
Sample time_once(Executable& exe, int batch) {
  auto t0 = Clock::now();
  exe.run(1);
  TimedSample s = exe.run(batch);
  return {s.seconds, seconds_since(t0)};
}

// The screen before the race drops a survivor whose one timed run took more than this many times the
// fastest survivor's. Only an outlier of +50% on the fastest's single run could screen out the true best
// (this kind of VM shows outliers of up to 6-13%); what it saves is the race's first rung on the
// order-of-magnitude losers (matmul_tiled MR=8 at 1024^3 ran 50x slower than MR=6 on a Zen 5 VM).
constexpr double kScreenFactor = 1.5;
// A raced candidate is loaded afresh after this many samples (see race_survivors).
constexpr int kSamplesPerLoad = 4;

struct Lab {
  CompileCache cache;
  ReferenceCache refs;
  std::vector<PreparedCase> prepared;  // parallel to the candidates (empty unless raced)
};

// Correctness first: survivors are prepared (compiled with the real toolchain, loaded, checked), in the
// static model's order (a user kernel's first point prepared is the others' reference).
std::vector<size_t> prepare_survivors(ShapeTune& st, const KernelDecl& k, DType dt,
                                      const std::shared_ptr<const Toolchain>& tc, Lab& lab) {
  std::vector<size_t> ready, alive;
  lab.prepared.resize(st.candidates.size());
  for (size_t i = 0; i < st.candidates.size(); ++i)
    if (st.candidates[i].status.empty()) alive.push_back(i);
  for (size_t i : model_order(st.candidates, alive)) {
    Candidate& c = st.candidates[i];
    lab.prepared[i] = prepare_case(plan(k, c.params, st.shape, dt, tc), lab.cache, lab.refs);
    const CaseResult& r = lab.prepared[i].result;
    st.compiles += r.has_static && !r.cache_hit;
    if (lab.prepared[i].ready()) ready.push_back(i);
    else c.status = r.status == CaseStatus::incorrect ? "incorrect" : "failed", c.reason = r.reason;
  }
  return ready;
}

void race_survivors(ShapeTune& st, const std::vector<size_t>& all_ready, Lab& lab, const TuneOptions& o, Log& log) {
  // The screen: one timed sample each, which also sizes the batches of the race. A run of at least 1 ms
  // is timed well enough by itself, and the correctness check has just made one: its time is the sample,
  // at no measuring cost (brute force checks every candidate the same way). A shorter run gets a batch of
  // about 1 ms.
  const auto t0 = Clock::now();
  std::vector<double> once;
  for (size_t i : all_ready) {
    double t = lab.prepared[i].check_run_s;
    if (!(t >= 1e-3)) {
      Executable& exe = *lab.prepared[i].exe;
      t = std::max(1e-7, exe.run(1).seconds);
      if (t < 1e-3) t = std::max(1e-7, exe.run(int(std::ceil(1e-3 / t))).seconds);
    }
    once.push_back(t);
  }
  const double fastest = *std::min_element(once.begin(), once.end());
  std::vector<size_t> ready;
  std::vector<int> batch;
  for (size_t j = 0; j < all_ready.size(); ++j) {
    Candidate& c = st.candidates[all_ready[j]];
    if (once[j] > kScreenFactor * fastest) {
      c.status = "dropped";
      c.reason = fmt::format("screen: one sample took {:.3f} ms, {:.1f}x the fastest survivor's {:.3f} ms (limit {:g}x)",
                             1e3 * once[j], once[j] / fastest, 1e3 * fastest, kScreenFactor);
      c.race.samples_s = {once[j]};  // the table and the plot show it as measured once
      c.race.median_s = once[j];
      c.race.ci = {once[j], once[j]};
      continue;
    }
    ready.push_back(all_ready[j]);
    batch.push_back(std::max(1, int(std::ceil(0.001 / once[j]))));
  }
  st.calibrate_s = seconds_since(t0);  // measuring time too: counted with the race's
  log.line(fmt::format("screen {}: {} of {} survivors within {:g}x the fastest ({:.3f} ms)", st.shape.str(),
                       ready.size(), all_ready.size(), kScreenFactor, 1e3 * fastest));
  RaceConfig rc;
  rc.alpha = o.alpha;
  rc.first_look = kFirstLook;
  rc.budget_s = std::max(0.05 * o.budget_s, 0.75 * o.budget_s - st.calibrate_s);
  rc.seed = o.seed;
  // Every kSamplesPerLoad samples a candidate is loaded afresh (new code, operand and heap placement): one
  // load's samples all share where it landed, and that moves a candidate's time by several percent
  // (bench/tune_vs_bruteforce: BM=96 against BM=192 read -3%, -5% and +9% in three processes), which the
  // race would otherwise take for a difference between configs. The reload counts as measuring time.
  std::vector<int> taken(ready.size(), 0);
  auto sample = [&](size_t j) {
    PreparedCase& pc = lab.prepared[ready[j]];
    const auto t_load = Clock::now();
    if (taken[j]++ % kSamplesPerLoad == 0 && taken[j] > 1) pc.exe = pc.reload();
    const double load_s = seconds_since(t_load);
    Sample smp = time_once(*pc.exe, batch[j]);
    smp.wall_s += load_s;
    return smp;
  };
  auto progress = [&](int rounds, size_t alive, size_t lead, double lead_s) {
    log.line(fmt::format("racing {}: round {}, {} of {} left, leader [{}] {:.3f} ms", st.shape.str(), rounds, alive,
                         ready.size(), st.candidates[ready[lead]].params.str(), 1e3 * lead_s));
  };
  st.race = race(ready.size(), sample, rc, progress);
  for (size_t j = 0; j < ready.size(); ++j) {
    Candidate& c = st.candidates[ready[j]];
    c.race = st.race.entries[j];
    c.status = c.race.dropped_at ? "dropped" : "tied";
    if (c.race.dropped_at)
      c.reason = fmt::format("slower than the leader after {} rounds (p = {:.2g} < {:.2g})", c.race.dropped_at,
                             c.race.p_slower, st.race.alpha_per_test);
    else if (j != st.race.winner && c.race.within_band)
      c.reason = fmt::format("not faster than the winner by more than {:g}% (difference CI from {:+.2f}%)",
                             100 * rc.tie_band, 100 * std::expm1(c.race.shift_lo));
    else if (j != st.race.winner)
      c.reason = fmt::format("not shown slower than the winner (p = {:.2g}; {} samples)", c.race.p_slower,
                             c.race.samples_s.size());
  }
  st.winner = ready[st.race.winner];
  st.candidates[*st.winner].status = "winner";
}

// The winner raced on its remarks build; the table names the real toolchain's build: compile that one,
// check it is the same code (code hash), and confirm with it.
void use_real_build(ShapeTune& st, const KernelDecl& k, DType dt, const std::shared_ptr<const Toolchain>& tc, Lab& lab,
                    Log& log) {
  const size_t w = *st.winner;
  PreparedCase real = prepare_case(plan(k, st.candidates[w].params, st.shape, dt, tc), lab.cache, lab.refs);
  st.compiles += real.result.has_static && !real.result.cache_hit;
  const std::string& raced = lab.prepared[w].result.code_hash;
  if (!real.ready()) {
    st.build_check = fmt::format("the real build of the winner cannot run ({}); confirmed with the raced build",
                                 real.result.reason);
  } else {
    st.build_check = real.result.code_hash == raced
                         ? fmt::format("the winner's real build has the raced build's code (hash {})", raced.substr(0, 12))
                         : fmt::format("the winner's real build differs from the raced build (hash {} vs {})",
                                       real.result.code_hash.substr(0, 12), raced.substr(0, 12));
    lab.prepared[w] = std::move(real);
  }
  log.line(fmt::format("{}: {}", st.shape.str(), st.build_check));
}

// The winner against the built-in default, both loaded afresh per block (harness/ab.h says why).
void confirm_winner(ShapeTune& st, const KernelDecl& k, DType dt, const std::shared_ptr<const Toolchain>& tc, Lab& lab,
                    const TuneOptions& o, Log& log) {
  const Candidate& w = st.candidates[*st.winner];
  if (w.params == st.default_params) {
    log.line(fmt::format("{}: the built-in default is the winner; nothing to confirm", st.shape.str()));
    return;
  }
  PreparedCase def = prepare_case(plan(k, st.default_params, st.shape, dt, tc), lab.cache, lab.refs);
  if (!def.ready()) {
    log.line(fmt::format("{}: the built-in default cannot run ({}); no A/B", st.shape.str(), def.result.reason));
    return;
  }
  PreparedCase& win = lab.prepared[*st.winner];
  stats::DecisionConfig dc;
  dc.threshold = o.threshold;
  dc.alpha = o.alpha;
  dc.min_n = 6;
  dc.max_n = 96;
  MeasureConfig mc;
  mc.seed = o.seed;
  mc.warmup_s = 0.01;
  const double budget = o.budget_s - st.race.measured_s - st.calibrate_s;
  auto t0 = Clock::now();
  PairOutcome out = measure_and_decide_blocks({def.reload, win.reload}, mc, dc, std::max(0.25 * o.budget_s, budget),
                                             o.confirm_pairs_per_block);
  st.confirm_s = seconds_since(t0);
  st.confirm = out.decision;
  log.line(fmt::format("{}: winner [{}] vs default: {:+.2f}% speed ({})", st.shape.str(), w.params.str(), st.gain_pct(),
                       stats::to_string(out.decision.verdict)));
}

// The candidates of the kernel's space for one shape, compiled (through the cache), pruned and estimated.
void static_stage(ShapeTune& st, const KernelDecl& k, const Toolchain& pruning, const TuneOptions& o,
                  const std::string& target, Lab& lab, Log& log) {
  for (auto& p : enumerate_space(k, o.dtype, target, st.shape, cpu_vector_info()))
    st.candidates.push_back({p.params, p.invalid.empty() ? "" : "invalid", p.invalid, {}, p.prior, {}, {}});
  std::vector<std::string> logs;
  st.compiles += compile_all(st.candidates, k, o.dtype, st.shape, pruning, o.jobs, lab.cache, logs, log);
  const DeviceFacts* facts = k.backend == "cpu" ? nullptr : device_facts(target, o.device);
  prune_static(st.candidates, logs, k.backend, o.prune, facts);
  if (k.backend != "cpu") st.model = estimate_all(st.candidates, st.shape, o.dtype, facts);
  size_t left = 0;
  for (const auto& c : st.candidates) left += c.status.empty();
  log.line(fmt::format("{}: {} candidates, {} left after constraints and static pruning", st.shape.str(),
                       st.candidates.size(), left));
}

ShapeTune tune_shape(const KernelDecl& k, const Shape& sh, const std::shared_ptr<const Toolchain>& tc,
                     const TuneOptions& o, Log& log) {
  ShapeTune st;
  st.shape = sh;
  st.default_params = k.configs.empty() ? k.complete({}) : k.configs.front().second;
  Lab lab;
  const Toolchain pruning = remark_toolchain(*tc);
  static_stage(st, k, pruning, o, tc->target, lab, log);
  Availability av = backend_for(*tc).available();
  if (!av.ok || o.static_only) {
    st.static_only = true;
    st.static_only_reason = av.ok ? "--static-only" : "static metrics only: " + av.reason;
    rank_static(st);
    return st;
  }
  // The survivors run the builds pruning made (see remark_toolchain): no second compile each. They are
  // checked and raced in the static model's order (GPU; the CPU keeps the machine prior's).
  auto race_tc = pruning.identity == tc->identity ? tc : std::make_shared<const Toolchain>(pruning);
  std::vector<size_t> ready = prepare_survivors(st, k, o.dtype, race_tc, lab);
  if (ready.empty()) throw EnvError(fmt::format("{}: no candidate compiled, loaded and passed the correctness check", sh.str()));
  race_survivors(st, ready, lab, o, log);
  if (race_tc != tc) use_real_build(st, k, o.dtype, tc, lab, log);
  confirm_winner(st, k, o.dtype, tc, lab, o, log);
  return st;
}

std::string now_utc() { return utc_time(int64_t(std::time(nullptr)), "%Y-%m-%dT%H:%M:%SZ"); }

}  // namespace

double minimum_budget_s() { return 1.0; }

double ShapeTune::gain_pct() const { return confirm ? 100 * (std::exp(-confirm->effect) - 1) : 0; }

stats::Interval ShapeTune::gain_ci_pct() const {
  if (!confirm) return {};
  return {100 * (std::exp(-confirm->ci.hi) - 1), 100 * (std::exp(-confirm->ci.lo) - 1)};
}

std::vector<TunedEntry> TuneRun::entries() const {
  std::vector<TunedEntry> out;
  for (const auto& st : shapes) {
    if (!st.winner) continue;
    TunedEntry e{machine, backend, kernel, toolchain, toolchain_identity, dtype, st.shape,
                 st.candidates[*st.winner].params, st.static_only ? "static-only" : "measured",
                 st.gain_pct(), st.gain_ci_pct().lo, st.gain_ci_pct().hi,
                 st.confirm ? stats::to_string(st.confirm->verdict) : "", now_utc()};
    out.push_back(std::move(e));
  }
  return out;
}

// The device facts named by --device exist for the target (InputError listing those that do otherwise).
void check_device(const TuneOptions& o, const Toolchain& tc) {
  if (o.device.empty() || tc.backend == "cpu" || device_facts(tc.target, o.device)) return;
  std::string known;
  for (const auto& d : all_device_facts())
    if (std::find(d.targets.begin(), d.targets.end(), tc.target) != d.targets.end())
      known += (known.empty() ? "" : ", ") + d.device;
  throw InputError(fmt::format("--device '{}': no facts for it on target {} (known: {})", o.device, tc.target,
                               known.empty() ? "none for this target" : known));
}

TuneRun run_tune(const TuneOptions& o, Log& log) {
  check_options(o);
  Toolchain t = find_toolchain(o.toolchain);
  resolve_identity(t);
  check_device(o, t);
  auto tc = std::make_shared<const Toolchain>(t);
  const KernelDecl k = kernel_with_space(find_kernel(tc->backend, o.kernel), o);
  if (!k.supports(o.dtype))
    throw InputError(fmt::format("--dtype: kernel {}/{} does not support {}", k.backend, k.name, to_string(o.dtype)));
  TuneRun run{k.name, k.backend, tc->name, tc->identity, machine_key(*tc), o.dtype, {}};
  for (const auto& sh : o.shapes) run.shapes.push_back(tune_shape(k, sh, tc, o, log));
  return run;
}

TuneRun rank_points(const TuneOptions& o, const std::vector<Params>& points, Log& log) {
  if (o.shapes.empty()) throw InputError("--shape: at least one shape is needed");
  Toolchain t = find_toolchain(o.toolchain);
  resolve_identity(t);
  check_device(o, t);
  const KernelDecl& k = find_kernel(t.backend, o.kernel);
  TuneRun run{k.name, k.backend, t.name, t.identity, machine_key(t), o.dtype, {}};
  std::vector<Candidate> compiled;
  for (const auto& p : points) {
    Candidate c{k.complete(p), "", "", {}, 0, {}, {}};
    if (k.check_params)
      if (auto why = k.check_params(c.params, o.dtype, t.target)) c.status = "invalid", c.reason = *why;
    compiled.push_back(std::move(c));
  }
  CompileCache cache;
  std::vector<std::string> logs;
  // One compile per point for every shape: kbisect's GEMMs do not depend on the shape (a user kernel is
  // compiled for the first shape's specialization).
  const Shape first = o.shapes.empty() ? Shape{} : o.shapes.front();
  const int compiles = compile_all(compiled, k, o.dtype, first, remark_toolchain(t), o.jobs, cache, logs, log);
  const DeviceFacts* facts = k.backend == "cpu" ? nullptr : device_facts(t.target, o.device);
  prune_static(compiled, logs, k.backend, o.prune, facts);
  for (const auto& sh : o.shapes) {
    ShapeTune st;
    st.shape = sh;
    st.default_params = k.configs.empty() ? k.complete({}) : k.configs.front().second;
    st.candidates = compiled;
    st.compiles = run.shapes.empty() ? compiles : 0;
    for (auto& c : st.candidates)
      if (c.status.empty() && k.check_shape)
        if (auto why = k.check_shape(c.params, o.dtype, sh)) c.status = "invalid", c.reason = *why;
    if (k.backend != "cpu") st.model = estimate_all(st.candidates, sh, o.dtype, facts);
    st.static_only = true;
    st.static_only_reason = "the static stage only";
    rank_static(st);
    run.shapes.push_back(std::move(st));
  }
  return run;
}

}  // namespace kb::tune
