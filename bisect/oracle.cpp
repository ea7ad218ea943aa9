#include "core/rng.h"
#include "bisect/oracle.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/error.h"
#include "harness/external.h"
#include "core/fsutil.h"
#include "harness/measure.h"
#include "harness/runner.h"

namespace kb::bisect {

using json = nlohmann::json;

// ---- probe ---------------------------------------------------------------------------------------

std::string Probe::hash_key() const {
  if (!ok) return "";
  std::string k;
  for (size_t i = 0; i < code_hashes.size(); ++i) k += case_ids[i] + "=" + code_hashes[i] + ";";
  return k;
}

json to_json(const Probe& p) {
  json j = {{"ok", p.ok}, {"built", p.built}, {"build_s", p.build_s}};
  if (!p.ok) j["reason"] = p.reason;
  j["cases"] = p.case_ids;
  j["code_hashes"] = p.code_hashes;
  j["values"] = p.values;
  j["toolchain_identity"] = p.toolchain_identity;
  return j;
}

Probe probe_from_json(const json& j) {
  Probe p;
  p.ok = j.at("ok").get<bool>();
  p.built = j.value("built", false);
  p.build_s = j.value("build_s", 0.0);
  p.reason = j.value("reason", std::string());
  p.case_ids = j.value("cases", std::vector<std::string>{});
  p.code_hashes = j.value("code_hashes", std::vector<std::string>{});
  p.values = j.value("values", std::vector<double>{});
  p.toolchain_identity = j.value("toolchain_identity", std::string());
  return p;
}

// ---- decisions -----------------------------------------------------------------------------------

SequentialRule::SequentialRule(stats::DecisionConfig cfg, PairFn pair) : seq_(cfg), pair_(std::move(pair)) {}

bool SequentialRule::operator()(const Rounds& r) {
  if (decided_) return true;
  int64_t n = int64_t(r.empty() ? 0 : r[0].size());
  for (const auto& v : r) n = std::min<int64_t>(n, int64_t(v.size()));
  if (n == looked_at_ || !seq_.is_look(n)) return false;
  looked_at_ = n;
  auto [base, next] = pair_(r);
  last_ = seq_.look(base, next, n >= seq_.config().max_n);
  decided_ = last_.verdict != stats::Verdict::unsure;
  return decided_;
}

stats::Decision SequentialRule::finish(const Rounds& r) {
  int64_t n = int64_t(r.empty() ? 0 : r[0].size());
  for (const auto& v : r) n = std::min<int64_t>(n, int64_t(v.size()));
  if (!decided_ && n != looked_at_ && n >= 2) {
    // The budget ended between planned looks: one last look at what there is (it replaces the next
    // planned look, so the number of looks stays within the Bonferroni plan).
    auto [base, next] = pair_(r);
    last_ = seq_.look(base, next, true);
    looked_at_ = n;
    decided_ = last_.verdict != stats::Verdict::unsure;
  } else if (!decided_) {
    last_.final_look = true;
  }
  return last_;
}

SequentialRule side_rule(double alpha, int min_n, int max_n) {
  stats::DecisionConfig c;
  // Only the sign of d matters here (which level is nearer), so the equivalence band is vanishingly small.
  c.threshold = 1e-9;
  c.alpha = alpha;
  c.min_n = min_n;
  c.max_n = std::max(min_n, max_n);
  return SequentialRule(c, [](const Rounds& r) {
    const size_t n = std::min({r[0].size(), r[1].size(), r[2].size()});
    std::vector<double> mid(n), t(r[2].begin(), r[2].begin() + long(n));
    for (size_t i = 0; i < n; ++i) mid[i] = std::sqrt(r[0][i] * r[1][i]);
    return std::make_pair(mid, t);
  });
}

SequentialRule threshold_rule(double threshold, double alpha, int min_n, int max_n) {
  stats::DecisionConfig c;
  c.threshold = threshold;
  c.alpha = alpha;
  c.min_n = min_n;
  c.max_n = std::max(min_n, max_n);
  return SequentialRule(c, [](const Rounds& r) {
    const size_t n = std::min(r[0].size(), r[1].size());
    return std::make_pair(std::vector<double>(r[0].begin(), r[0].begin() + long(n)),
                          std::vector<double>(r[1].begin(), r[1].begin() + long(n)));
  });
}

std::string to_string(Level l) {
  switch (l) {
    case Level::a: return "first";
    case Level::b: return "last";
    case Level::between: return "intermediate";
    case Level::beyond_a: return "beyond-first";
    case Level::beyond_b: return "beyond-last";
  }
  return "?";
}

StepRule::StepRule(double threshold, double alpha, int min_n, int max_n, int commits, bool b_worse, bool levels,
                   bool extend)
    : b_worse_(b_worse),
      levels_(levels),
      extend_between_(levels),
      extend_beyond_(extend && levels),
      band_(std::log1p(threshold)) {
  side_cfg_.threshold = 1e-9;  // only the sign of d matters for the side
  side_cfg_.alpha = alpha;
  side_cfg_.min_n = min_n;
  side_cfg_.max_n = std::max(min_n, max_n);
  lvl_cfg_ = side_cfg_;
  lvl_cfg_.threshold = threshold;
  // A false "apart from a level" costs a whole extra search (a range with no step in it), a false side
  // only a wrong turn that the verify step catches: the apartness tests run at a tenth of the error rate.
  lvl_cfg_.alpha = alpha / 10;
  for (int j = 0; j < commits; ++j) {
    side_.emplace_back(side_cfg_);
    va_.emplace_back(lvl_cfg_);
    vb_.emplace_back(lvl_cfg_);
  }
  out_.assign(size_t(commits), StepDecision{});
  done_.assign(size_t(commits), false);
}

void StepRule::look(const Rounds& r, int64_t n, bool last) {
  looked_at_ = n;
  const size_t m = size_t(n);
  std::vector<double> A(r[0].begin(), r[0].begin() + long(m)), B(r[1].begin(), r[1].begin() + long(m)), mid(m);
  for (size_t i = 0; i < m; ++i) mid[i] = std::sqrt(A[i] * B[i]);
  using stats::Verdict;
  for (size_t j = 0; j < done_.size(); ++j) {
    if (done_[j]) continue;
    std::vector<double> t(r[2 + j].begin(), r[2 + j].begin() + long(m));
    StepDecision& d = out_[j];
    d.side = side_[j].look(mid, t, last);
    if (levels_) {
      d.vs_a = va_[j].look(A, t, last);
      d.vs_b = vb_[j].look(B, t, last);
    }
    // "toward B" from A is slower when B is the worse level.
    const Verdict toward_b = b_worse_ ? Verdict::worse : Verdict::better;
    const Verdict toward_a = b_worse_ ? Verdict::better : Verdict::worse;
    std::optional<Level> lv;
    if (levels_ && d.vs_a.verdict == toward_b && d.vs_b.verdict == toward_a) lv = Level::between;
    else if (levels_ && d.vs_b.verdict == toward_b) lv = Level::beyond_b;
    else if (levels_ && d.vs_a.verdict == toward_a) lv = Level::beyond_a;
    else if (d.side.verdict == toward_b) lv = Level::b;
    else if (d.side.verdict == toward_a) lv = Level::a;
    if (lv && (extend_between_ || extend_beyond_) && !last && (*lv == Level::a || *lv == Level::b)) {
      // The side is decided, but the commit may lie apart from its side's level (that test still open,
      // its estimate beyond the threshold): toward the other level (intermediate), or away from it (a step
      // back inside the range). More rounds settle it.
      const Verdict near = *lv == Level::b ? d.vs_b.verdict : d.vs_a.verdict;
      // Effect measured from the near level toward the far one.
      const double toward_far = *lv == Level::b ? (b_worse_ ? -d.vs_b.effect : d.vs_b.effect)
                                                : (b_worse_ ? d.vs_a.effect : -d.vs_a.effect);
      if (near == Verdict::unsure &&
          ((extend_between_ && toward_far > band_) || (extend_beyond_ && -toward_far > band_)))
        lv.reset();
    }
    if (lv) {
      d.level = lv;
      done_[j] = true;
    }
  }
}

bool StepRule::operator()(const Rounds& r) {
  int64_t n = int64_t(r.empty() ? 0 : r[0].size());
  for (const auto& v : r) n = std::min<int64_t>(n, int64_t(v.size()));
  if (std::all_of(done_.begin(), done_.end(), [](bool b) { return b; })) return true;
  if (n == looked_at_ || !stats::SequentialPaired(side_cfg_).is_look(n)) return false;
  look(r, n, n >= side_cfg_.max_n);
  return std::all_of(done_.begin(), done_.end(), [](bool b) { return b; });
}

std::vector<StepDecision> StepRule::finish(const Rounds& r) {
  int64_t n = int64_t(r.empty() ? 0 : r[0].size());
  for (const auto& v : r) n = std::min<int64_t>(n, int64_t(v.size()));
  const bool all = std::all_of(done_.begin(), done_.end(), [](bool b) { return b; });
  if (!all && n != looked_at_ && n >= 2) look(r, n, true);  // budget ended between planned looks
  for (auto& d : out_)
    if (!d.level) d.side.final_look = true;
  return out_;
}

std::vector<double> block_summary(const Rounds& block) {
  std::vector<double> out(block.size(), 0.0);
  if (block.empty() || block[0].empty()) return out;
  const double ref = stats::median(block[0]);
  out[0] = ref;
  for (size_t c = 1; c < block.size(); ++c)
    out[c] = ref * std::exp(stats::median(stats::log_ratios(block[0], block[c])));
  return out;
}

void add_block(Measured& m, const Rounds& block) {
  const std::vector<double> sum = block_summary(block);
  m.raw.resize(block.size());
  m.units.resize(block.size());
  for (size_t c = 0; c < block.size(); ++c) {
    m.raw[c].insert(m.raw[c].end(), block[c].begin(), block[c].end());
    m.units[c].push_back(sum[c]);
  }
}

std::optional<Side> side_of(const stats::Decision& d) {
  if (d.verdict == stats::Verdict::worse) return Side::bad;
  if (d.verdict == stats::Verdict::better) return Side::good;
  return std::nullopt;
}

namespace {
bool beyond(double from, double to, double threshold, bool absolute) {
  const double delta = std::abs(to - from);
  if (absolute) return delta >= threshold;
  if (from == 0) return delta > 0;
  return delta >= threshold * std::abs(from);
}
}  // namespace

std::vector<bool> static_regressed(const std::vector<double>& good, const std::vector<double>& bad, double threshold,
                                   bool absolute) {
  std::vector<bool> out(good.size(), false);
  for (size_t i = 0; i < good.size() && i < bad.size(); ++i) out[i] = beyond(good[i], bad[i], threshold, absolute);
  return out;
}

Side static_side(const std::vector<double>& good, const std::vector<double>& bad, const std::vector<double>& commit,
                 const std::vector<bool>& regressed, double threshold, bool absolute) {
  for (size_t i = 0; i < good.size() && i < commit.size(); ++i) {
    if (!regressed[i]) continue;
    const double dir = bad[i] > good[i] ? 1 : -1;
    if ((commit[i] - good[i]) * dir > 0 && beyond(good[i], commit[i], threshold, absolute)) return Side::bad;
  }
  return Side::good;
}

double static_metric_value(Metric m, const std::string& backend, const std::map<std::string, double>& metrics,
                           int64_t code_bytes, double max_error) {
  auto get = [&](std::initializer_list<const char*> names) -> double {
    double sum = 0;
    bool any = false;
    for (const char* n : names)
      if (auto it = metrics.find(n); it != metrics.end()) {
        sum += it->second;
        any = true;
      }
    if (!any) {
      std::string have;
      for (const auto& [k, v] : metrics) have += (have.empty() ? "" : ", ") + k;
      throw InputError(fmt::format("metric '{}' is not reported by the {} backend (it reports: {})", to_string(m),
                                   backend, have.empty() ? "code_bytes only" : have));
    }
    return sum;
  };
  switch (m) {
    case Metric::code_bytes: return double(code_bytes);
    case Metric::max_error: return max_error;
    case Metric::registers: return backend == "hip" ? get({"vgprs", "agprs"}) : get({"registers"});
    case Metric::spills:
      return backend == "hip" ? get({"vgpr_spills", "sgpr_spills"}) : get({"spill_stores", "spill_loads"});
    case Metric::stack: return backend == "hip" ? get({"scratch_bytes"}) : get({"stack_bytes"});
    case Metric::smem: return backend == "hip" ? get({"lds_bytes"}) : get({"smem_bytes"});
    default: throw InputError(fmt::format("metric '{}' is timed, not static", to_string(m)));
  }
}

// ---- the real lab --------------------------------------------------------------------------------

namespace {

bool needs_run(Metric m) { return m == Metric::time || m == Metric::tflops || m == Metric::max_error; }

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

RealLab::RealLab(const BisectConfig& cfg, Provider& provider) : cfg_(cfg), provider_(provider) {}
RealLab::~RealLab() = default;

RealLab::Loaded& RealLab::load(const std::string& sha, Probe* probe_out, const ToolchainAtCommit* fetched) {
  if (auto it = loaded_.find(sha); it != loaded_.end()) {
    // Most recently used last: the commits of one measurement are never the ones evicted.
    lru_.erase(std::find(lru_.begin(), lru_.end(), sha));
    lru_.push_back(sha);
    if (probe_out) *probe_out = it->second->probe;
    return *it->second;
  }
  auto L = std::make_unique<Loaded>();
  Probe& p = L->probe;
  auto finish = [&]() -> Loaded& {
    if (probe_out) *probe_out = p;
    Loaded& ref = *L;
    loaded_[sha] = std::move(L);
    lru_.push_back(sha);
    while (lru_.size() > keep_) {  // executables hold buffers: keep a few commits loaded
      loaded_.erase(lru_.front());
      lru_.erase(lru_.begin());
    }
    return ref;
  };
  ToolchainAtCommit tc = fetched ? *fetched : provider_.get(sha);
  p.built = tc.built;
  p.build_s = tc.build_s;
  if (!tc.ok) {
    p.reason = tc.reason;
    return finish();
  }
  try {
    SweepOptions so;
    so.toolchains = {tc.toolchain_file};
    so.filter = cfg_.filter;
    so.tier = cfg_.tier;
    L->sweep = parse_sweep(cfg_.sweep_text, cfg_.sweep_origin, so);
  } catch (const Error& e) {
    p.reason = fmt::format("cases with the toolchain at {}: {}", sha.substr(0, 12), e.what());
    return finish();
  }
  std::vector<std::pair<std::string, const PlannedCase*>> keyed;
  for (const auto& pc : L->sweep.cases) keyed.emplace_back(case_key(pc), &pc);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (keyed.empty()) {
    p.reason = "no cases (check cases.filter and the toolchain's backend)";
    return finish();
  }
  if (!L->sweep.toolchains.empty()) p.toolchain_identity = L->sweep.toolchains[0]->identity;
  for (const auto& [key, pc] : keyed) {
    p.case_ids.push_back(key);
    L->cases.push_back(pc);
    if (pc->skip_reason) {
      p.reason = fmt::format("case {} cannot run with this toolchain: {}", key, *pc->skip_reason);
      return finish();
    }
    if (needs_run(cfg_.metric)) {
      PreparedCase prep = prepare_case(*pc, cache_, refs_);
      const CaseResult& r = prep.result;
      if (!r.has_static) {
        p.reason = fmt::format("case {}: {}", key, r.reason);
        return finish();
      }
      if (!prep.ready()) {
        Backend& be = backend_for(*pc->toolchain);
        if (!be.available().ok)
          throw EnvError(fmt::format("metric '{}' needs to run case {}, but the {} backend cannot run here: {}",
                                     to_string(cfg_.metric), key, be.name(), be.available().reason));
        if (cfg_.metric != Metric::max_error || r.status != CaseStatus::incorrect) {
          p.reason = fmt::format("case {} {}: {}", key, to_string(r.status), tail(r.reason, 600));
          return finish();
        }
      }
      p.code_hashes.push_back(r.code_hash);
      if (cfg_.metric == Metric::max_error) p.values.push_back(r.max_error);
      // The executable that passed the check is dropped: measurements load their own (see oracle.h).
      L->reloads.push_back(prep.reload);
    } else {
      Backend& be = backend_for(*pc->toolchain);
      const CompileRequest req = compile_request(*pc);
      Artifact art;
      try {
        art = cache_.compile(be, req);
      } catch (const CompileError& e) {
        p.reason = fmt::format("case {}: compile failed: {}\n{}", key, e.what(), tail(e.log(), 600));
        return finish();
      } catch (const Error& e) {
        p.reason = fmt::format("case {}: compile failed: {}", key, e.what());
        return finish();
      }
      p.code_hashes.push_back(art.code_hash);
      if (!is_timed(cfg_.metric)) {
        try {
          p.values.push_back(static_metric_value(cfg_.metric, be.name(), art.metrics, art.code_bytes, 0));
        } catch (const InputError& e) {
          p.reason = e.what();
          return finish();
        }
      }
    }
  }
  p.ok = true;
  return finish();
}

Probe RealLab::probe(const std::string& sha) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(sha); it != loaded_.end()) return it->second->probe;
  }
  // Outside the lock: the slow part (a toolchain build) of several commits runs concurrently.
  ToolchainAtCommit tc = provider_.get(sha);
  std::lock_guard<std::mutex> lock(mu_);
  Probe p;
  load(sha, &p, &tc);
  return p;
}

Measured RealLab::measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_ = std::max<size_t>(6, shas.size());  // every commit of this measurement stays loaded
  std::vector<Loaded*> ls;
  for (const auto& s : shas) {
    Loaded& L = load(s, nullptr);
    if (!L.probe.ok) throw Error(fmt::format("cannot measure {}: {}", s.substr(0, 12), L.probe.reason));
    ls.push_back(&L);
  }
  const size_t k = ls[0]->cases.size();
  Measured out;
  out.units.resize(shas.size());

  // Metrics taken one commit at a time (no loaded executables): each round visits the commits in a
  // shuffled order and asks value(i) of commit i. A unit is a round.
  auto one_at_a_time = [&](const std::function<double(size_t)>& value) {
    stats::Rng rng(ask.seed);
    const double t0 = now_s();
    std::vector<size_t> order(shas.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (int r = 0; r < ask.max_units; ++r) {
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(rng.below(i))]);
      std::vector<double> v(shas.size(), 0.0);
      for (size_t oi : order) v[oi] = value(oi);
      for (size_t i = 0; i < shas.size(); ++i) out.units[i].push_back(v[i]);
      if (stop && stop(out.units)) break;
      if (now_s() - t0 > ask.max_time_s) break;
    }
    out.raw = out.units;
    return out;
  };

  if (cfg_.metric == Metric::external) {
    // External (l3) metric: the user's command with the commit's toolchain in KBISECT_TOOLCHAIN_*; `repeat`
    // runs per commit and round, their median is the round's value. Values where higher is better are
    // inverted so that, as for time, larger means worse.
    const ExternalMetric& em = *cfg_.external;
    return one_at_a_time([&](size_t i) {
      const Toolchain* tc = ls[i]->sweep.toolchains.empty() ? nullptr : ls[i]->sweep.toolchains[0].get();
      const double v = stats::median(run_external(em, tc, {{"KBISECT_COMMIT", shas[i]}}));
      if (!(v > 0))
        throw Error(fmt::format("external metric at {}: value {} is not positive ({} parses '{}')",
                                shas[i].substr(0, 12), v, em.origin, em.parse));
      return em.higher_is_better ? 1.0 / v : v;
    });
  }

  if (cfg_.metric == Metric::compile_time) {
    // Compile time: recompile (no cache), all cases of the commit.
    return one_at_a_time([&](size_t i) {
      double total = 0;
      for (size_t c = 0; c < k; ++c) {
        const PlannedCase& pc = *ls[i]->cases[c];
        Backend& be = backend_for(*pc.toolchain);
        CompileRequest req = compile_request(pc);
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
    });
  }

  for (Loaded* L : ls)
    if (L->reloads.size() != k) throw Error("internal: executables missing for a timed metric");
  MeasureConfig mc = ls[0]->cases[0]->measure;
  if (cfg_.measure.mode) mc.mode = *cfg_.measure.mode;
  if (cfg_.measure.warmup_s) mc.warmup_s = *cfg_.measure.warmup_s;
  if (cfg_.measure.min_sample_s) mc.min_sample_s = *cfg_.measure.min_sample_s;
  mc.min_time_s = 0;
  mc.noise = -1;  // never stop on noise: the decision stops
  // Per-round values: the geometric mean over a commit's cases (ms is commit-major: commit s, case c at s*k+c).
  auto aggregate = [&](const std::vector<Measurement>& ms) {
    size_t n = ms[0].samples_s.size();
    for (const auto& m : ms) n = std::min(n, m.samples_s.size());
    Rounds r(shas.size(), std::vector<double>(n));
    for (size_t s = 0; s < shas.size(); ++s)
      for (size_t i = 0; i < n; ++i) {
        double lsum = 0;
        for (size_t c = 0; c < k; ++c) lsum += std::log(ms[s * k + c].samples_s[i]);
        r[s][i] = std::exp(lsum / double(k));
      }
    return r;
  };

  if (ask.block_rounds <= 0) {
    // One load per commit, kept across measurements; a unit is a round.
    std::vector<Executable*> exes;
    for (Loaded* L : ls) {
      if (L->exes.empty())
        for (auto& make : L->reloads) L->exes.push_back(make());
      for (auto& e : L->exes) exes.push_back(e.get());
    }
    mc.min_samples = 2;
    mc.max_samples = ask.max_units;
    mc.max_time_s = ask.max_time_s;
    mc.seed = ask.seed;
    StopRule rule = [&](const std::vector<Measurement>& ms) { return stop ? stop(aggregate(ms)) : false; };
    out.units = aggregate(measure_interleaved(exes, mc, rule));
    out.raw = out.units;
    return out;
  }

  // Blocks: every block loads all executables again (measure_fresh_block), times block_rounds
  // interleaved rounds and adds one unit per commit (block_summary).
  out.raw.resize(shas.size());
  Rng rng(ask.seed);
  std::vector<ExecutableFactory> make;  // commit-major, as aggregate reads them
  for (Loaded* L : ls) make.insert(make.end(), L->reloads.begin(), L->reloads.end());
  const double t0 = now_s();
  for (int u = 0; u < ask.max_units; ++u) {
    const double left = ask.max_time_s - (now_s() - t0);
    if (left <= 0) break;
    MeasureConfig bc = mc;
    // The process is warm after the first block: a short warmup touches the new loads (one run at least).
    if (u > 0) bc.warmup_s = std::min(bc.warmup_s, 0.002);
    const auto ms = measure_fresh_block(make, bc, ask.block_rounds, left, rng);
    if (ms.empty()) break;  // the time ran out inside the block: dropped
    add_block(out, aggregate(ms));
    if (stop && stop(out.units)) break;
  }
  return out;
}

}  // namespace kb::bisect
