#include "bisect/lab.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "git/git.h"
#include "harness/external.h"
#include "harness/measure.h"
#include "harness/runner.h"

namespace kb::bisect {

using git::short_sha;

namespace {

bool needs_run(Metric m) { return m == Metric::time || m == Metric::tflops || m == Metric::max_error; }

// Metrics taken one commit at a time (no loaded executables): each round visits the commits in a
// shuffled order and asks value(i) of commit i. A unit is a round.
Measured one_at_a_time(size_t commits, const MeasureAsk& ask, const RoundsStop& stop,
                       const std::function<double(size_t)>& value) {
  Measured out;
  out.units.resize(commits);
  stats::Rng rng(ask.seed);
  const double t0 = now_s();
  std::vector<size_t> order(commits);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int r = 0; r < ask.max_units; ++r) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(rng.below(i))]);
    std::vector<double> v(commits, 0.0);
    for (size_t oi : order) v[oi] = value(oi);
    for (size_t i = 0; i < commits; ++i) out.units[i].push_back(v[i]);
    if (stop && stop(out.units)) break;
    if (now_s() - t0 > ask.max_time_s) break;
  }
  out.raw = out.units;
  return out;
}

// External (l3) metric: the user's command with the commit's toolchain in KBISECT_TOOLCHAIN_*; `repeat`
// runs per commit and round, their median is the round's value. Values where higher is better are
// inverted so that, as for time, larger means worse.
double external_value(const ExternalMetric& em, const Toolchain* tc, const std::string& sha) {
  const double v = stats::median(run_external(em, tc, {{"KBISECT_COMMIT", sha}}));
  if (!(v > 0))
    throw Error(fmt::format("external metric at {}: value {} is not positive ({} parses '{}')", short_sha(sha), v,
                            em.origin, em.parse));
  return em.higher_is_better ? 1.0 / v : v;
}

// Compile time: recompile (no cache), all cases of the commit.
double compile_seconds(const std::vector<const PlannedCase*>& cases) {
  double total = 0;
  for (const PlannedCase* pc : cases) {
    Backend& be = backend_for(*pc->toolchain);
    CompileRequest req = compile_request(*pc);
    req.out_dir = temp_dir("kb-compile-time");
    try {
      total += be.compile(req).compile_s;
    } catch (...) {
      remove_tree(req.out_dir);
      throw;
    }
    remove_tree(req.out_dir);
  }
  return total;
}

// Per-round values: the geometric mean over a commit's cases (ms is commit-major: commit s, case c at s*k+c).
Rounds aggregate(const std::vector<Measurement>& ms, size_t commits, size_t k) {
  size_t n = ms[0].samples_s.size();
  for (const auto& m : ms) n = std::min(n, m.samples_s.size());
  Rounds r(commits, std::vector<double>(n));
  for (size_t s = 0; s < commits; ++s)
    for (size_t i = 0; i < n; ++i) {
      double lsum = 0;
      for (size_t c = 0; c < k; ++c) lsum += std::log(ms[s * k + c].samples_s[i]);
      r[s][i] = std::exp(lsum / double(k));
    }
  return r;
}

// The measurement settings of the first case, with the config's overrides; never stops on noise (the
// decision stops).
MeasureConfig timed_config(const BisectConfig& cfg, MeasureConfig mc) {
  if (cfg.measure.mode) mc.mode = *cfg.measure.mode;
  if (cfg.measure.warmup_s) mc.warmup_s = *cfg.measure.warmup_s;
  if (cfg.measure.min_sample_s) mc.min_sample_s = *cfg.measure.min_sample_s;
  mc.placement = cfg.measure.placement;
  mc.min_time_s = 0;
  mc.noise = -1;
  return mc;
}

// One load per commit, kept across measurements; a unit is a round.
Measured measure_kept(const std::vector<Executable*>& exes, MeasureConfig mc, size_t commits, size_t k,
                      const MeasureAsk& ask, const RoundsStop& stop) {
  mc.min_samples = 2;
  mc.max_samples = ask.max_units;
  mc.max_time_s = ask.max_time_s;
  mc.seed = ask.seed;
  StopRule rule = [&](const std::vector<Measurement>& ms) { return stop ? stop(aggregate(ms, commits, k)) : false; };
  Measured out;
  out.units = aggregate(measure_interleaved(exes, mc, rule), commits, k);
  out.raw = out.units;
  return out;
}

// Blocks: every block loads all executables again (measure_fresh_block), times block_rounds
// interleaved rounds and adds one unit per commit (block_summary).
Measured measure_blocks(const std::vector<ExecutableFactory>& make, const MeasureConfig& mc, size_t commits,
                        size_t k, const MeasureAsk& ask, const RoundsStop& stop) {
  Measured out;
  out.units.resize(commits);
  out.raw.resize(commits);
  Rng rng(ask.seed);
  const double t0 = now_s();
  for (int u = 0; u < ask.max_units; ++u) {
    const double left = ask.max_time_s - (now_s() - t0);
    if (left <= 0) break;
    MeasureConfig bc = mc;
    bc.warmup_s = block_warmup_s(mc, u, 0.002);
    const auto ms = measure_fresh_block(make, bc, ask.block_rounds, left, rng);
    if (ms.empty()) break;  // the time ran out inside the block: dropped
    add_block(out, aggregate(ms, commits, k));
    std::vector<std::string>& where = out.placements.emplace_back();
    for (const auto& m : ms) where.push_back(m.placements.empty() ? "" : m.placements.back());
    if (stop && stop(out.units)) break;
  }
  return out;
}

}  // namespace

struct RealLab::Loaded {
  Probe probe;
  Sweep sweep;
  std::vector<const PlannedCase*> cases;              // sorted by key
  // Per case when the metric runs them: a fresh load of the checked executable (a block's loads), and
  // the loads kept for whole measurements without blocks (made on first use).
  std::vector<ExecutableFactory> reloads;
  std::vector<std::unique_ptr<Executable>> exes;
};

RealLab::RealLab(const BisectConfig& cfg, Provider& provider, std::string workdir)
    : cfg_(cfg), provider_(provider), workdir_(std::move(workdir)) {
  if (cfg.builders > 1) pool_ = std::make_unique<BuildPool>(provider, cfg.builders);
  try {
    user_kernels_ = bool(YAML::Load(cfg.sweep_text)["user_kernels"]);
  } catch (const YAML::Exception&) {
    user_kernels_ = false;  // the sweep's own parse reports it
  }
}
RealLab::~RealLab() = default;

RealLab::Loaded& RealLab::load(const std::string& sha, Probe* probe_out, const ToolchainAtCommit* fetched) {
  if (auto it = loaded_.find(sha); it != loaded_.end()) {
    // Most recently used last: the commits of one measurement are never the ones evicted.
    lru_.erase(std::find(lru_.begin(), lru_.end(), sha));
    lru_.push_back(sha);
    if (probe_out) *probe_out = it->second->probe;
    return *it->second;
  }
  if (user_kernels_ && needs_run(cfg_.metric) && !reference_sha_.empty() && sha != reference_sha_ &&
      !loaded_.count(reference_sha_)) {
    const std::string ref = reference_sha_;
    reference_sha_.clear();  // once: a reference that cannot load leaves the first commit that does
    const ToolchainAtCommit tc = pool_ ? pool_->get(ref) : provider_.get(ref);
    load(ref, nullptr, &tc);
  }
  auto L = std::make_unique<Loaded>();
  prepare(*L, sha, fetched ? *fetched : provider_.get(sha));
  if (probe_out) *probe_out = L->probe;
  Loaded& ref = *L;
  loaded_[sha] = std::move(L);
  lru_.push_back(sha);
  while (lru_.size() > keep_) {  // executables hold buffers: keep a few commits loaded
    loaded_.erase(lru_.front());
    lru_.erase(lru_.begin());
  }
  return ref;
}

void RealLab::prepare(Loaded& L, const std::string& sha, const ToolchainAtCommit& tc) {
  Probe& p = L.probe;
  p.built = tc.built;
  p.build_s = tc.build_s;
  if (!tc.ok) {
    p.reason = tc.reason;
    return;
  }
  try {
    SweepOptions so;
    so.toolchains = {tc.toolchain_file};
    so.filter = cfg_.filter;
    so.tier = cfg_.tier;
    L.sweep = parse_sweep(cfg_.sweep_text, cfg_.sweep_origin, so);
  } catch (const Error& e) {
    p.reason = fmt::format("cases with the toolchain at {}: {}", short_sha(sha), e.what());
    return;
  }
  std::vector<std::pair<std::string, const PlannedCase*>> keyed;
  for (const auto& pc : L.sweep.cases) keyed.emplace_back(case_key(pc), &pc);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (keyed.empty()) {
    p.reason = "no cases (check cases.filter and the toolchain's backend)";
    return;
  }
  if (!L.sweep.toolchains.empty()) p.toolchain_identity = L.sweep.toolchains[0]->identity;
  for (const auto& [key, pc] : keyed) {
    p.case_ids.push_back(key);
    L.cases.push_back(pc);
    if (pc->skip_reason) {
      p.reason = fmt::format("case {} cannot run with this toolchain: {}", key, *pc->skip_reason);
      return;
    }
    p.reason = needs_run(cfg_.metric) ? add_run_case(L, key, *pc) : add_compiled_case(L, key, *pc);
    if (!p.reason.empty()) return;
  }
  p.ok = true;
}

std::string RealLab::add_run_case(Loaded& L, const std::string& key, const PlannedCase& pc) {
  PreparedCase prep = prepare_case(pc, cache_, refs_);
  const CaseResult& r = prep.result;
  if (!r.has_static) return fmt::format("case {}: {}", key, r.reason);
  if (!prep.ready()) {
    Backend& be = backend_for(*pc.toolchain);
    if (!be.available().ok)
      throw EnvError(fmt::format("metric '{}' needs to run case {}, but the {} backend cannot run here: {}",
                                 metric_label(cfg_.metric, cfg_.metric_column), key, be.name(), be.available().reason));
    if (cfg_.metric != Metric::max_error || r.status != CaseStatus::incorrect)
      return fmt::format("case {} {}: {}", key, to_string(r.status), tail(r.reason, 600));
  }
  L.probe.code_hashes.push_back(r.code_hash);
  if (cfg_.metric == Metric::max_error) L.probe.values.push_back(r.max_error);
  // The executable that passed the check is dropped: measurements load their own (see oracle.h).
  L.reloads.push_back(prep.reload);
  return "";
}

std::string RealLab::add_compiled_case(Loaded& L, const std::string& key, const PlannedCase& pc) {
  Backend& be = backend_for(*pc.toolchain);
  const CompileRequest req = compile_request(pc);
  Artifact art;
  try {
    art = cache_.compile(be, req);
  } catch (const CompileError& e) {
    return fmt::format("case {}: compile failed: {}\n{}", key, e.what(), tail(e.log(), 600));
  } catch (const Error& e) {
    return fmt::format("case {}: compile failed: {}", key, e.what());
  }
  L.probe.code_hashes.push_back(art.code_hash);
  if (!is_timed(cfg_.metric)) {
    try {
      L.probe.values.push_back(
          static_metric_value(cfg_.metric, be.name(), art.metrics, art.code_bytes, 0, cfg_.metric_column));
    } catch (const InputError& e) {
      return e.what();
    }
  }
  return "";
}

Probe RealLab::probe(const std::string& sha) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(sha); it != loaded_.end()) return it->second->probe;
  }
  // Outside the lock: the slow part (a toolchain build) of several commits runs concurrently.
  ToolchainAtCommit tc = pool_ ? pool_->get(sha) : provider_.get(sha);
  std::lock_guard<std::mutex> lock(mu_);
  Probe p;
  load(sha, &p, &tc);
  return p;
}

void RealLab::want(const std::vector<std::string>& needs, const std::vector<std::string>& ahead,
                   const std::vector<std::string>& useless) {
  if (pool_) pool_->want(needs, ahead, useless);
}

bool RealLab::ready(const std::string& sha) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_.count(sha)) return true;
  }
  return pool_ ? pool_->ready(sha) : provider_.cached(sha);
}

void RealLab::stop_builds() {
  if (pool_) pool_->finish();
}

std::vector<nlohmann::json> RealLab::build_events() { return pool_ ? pool_->take_events() : std::vector<nlohmann::json>{}; }

Measured RealLab::measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_ = std::max<size_t>(6, shas.size());  // every commit of this measurement stays loaded
  std::vector<Loaded*> ls;
  for (const auto& s : shas) {
    Loaded& L = load(s, nullptr);
    if (!L.probe.ok) throw Error(fmt::format("cannot measure {}: {}", short_sha(s), L.probe.reason));
    ls.push_back(&L);
  }
  if (cfg_.metric == Metric::external)
    return one_at_a_time(shas.size(), ask, stop, [&](size_t i) {
      const Toolchain* tc = ls[i]->sweep.toolchains.empty() ? nullptr : ls[i]->sweep.toolchains[0].get();
      return external_value(*cfg_.external, tc, shas[i]);
    });
  if (cfg_.metric == Metric::compile_time)
    return one_at_a_time(shas.size(), ask, stop, [&](size_t i) { return compile_seconds(ls[i]->cases); });
  return measure_loaded(ls, ask, stop);
}

int RealLab::start_run(const std::string& sha, int ordinal) {
  if (cfg_.metric != Metric::external || !cfg_.external)
    throw Error(fmt::format("internal: single runs need an external metric (metric is {})", to_string(cfg_.metric)));
  std::optional<Toolchain> tc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Loaded& L = load(sha, nullptr);
    if (!L.probe.ok) throw Error(fmt::format("cannot run at {}: {}", short_sha(sha), L.probe.reason));
    if (!L.sweep.toolchains.empty()) tc = *L.sweep.toolchains[0];  // a copy: the commit may be unloaded meanwhile
  }
  const ExternalMetric em = *cfg_.external;
  const std::optional<slurm::SubmitOptions> job = cfg_.measure.slurm;
  const double poll = cfg_.measure.slurm_poll_s;
  const std::string wd = workdir_;
  return runs_.start(sha, [em, tc, job, poll, wd, sha, ordinal](const std::atomic<bool>& cancel) {
    const Toolchain* t = tc ? &*tc : nullptr;
    const std::map<std::string, std::string> env = {{"KBISECT_COMMIT", sha}};
    RunDone d;
    if (job) {
      d = run_external_job(em, external_command(em, t, ordinal, env), *job, poll, sha, ordinal, wd, wd + "/slurm/runs",
                           &cancel);
    } else {
      const ExternalRun r = run_external_once(em, t, ordinal, env);
      d.value = r.value;
      d.wall_s = r.wall_s;
    }
    if (!d.cancelled) {
      if (!(d.value > 0))
        throw Error(fmt::format("external metric at {}: value {} is not positive ({} parses '{}')", short_sha(sha), d.value,
                                em.origin, em.parse));
      if (em.higher_is_better) d.value = 1.0 / d.value;  // larger is worse, as for time
    }
    return d;
  });
}

Measured RealLab::measure_loaded(const std::vector<Loaded*>& ls, const MeasureAsk& ask, const RoundsStop& stop) {
  const size_t k = ls[0]->cases.size();
  for (Loaded* L : ls)
    if (L->reloads.size() != k) throw Error("internal: executables missing for a timed metric");
  const MeasureConfig mc = timed_config(cfg_, ls[0]->cases[0]->measure);
  if (ask.block_rounds <= 0) {
    std::vector<Executable*> exes;
    for (Loaded* L : ls) {
      if (L->exes.empty())
        for (auto& make : L->reloads) L->exes.push_back(make());
      for (auto& e : L->exes) exes.push_back(e.get());
    }
    return measure_kept(exes, mc, ls.size(), k, ask, stop);
  }
  std::vector<ExecutableFactory> make;  // commit-major, as aggregate reads them
  for (Loaded* L : ls) make.insert(make.end(), L->reloads.begin(), L->reloads.end());
  return measure_blocks(make, mc, ls.size(), k, ask, stop);
}

}  // namespace kb::bisect
