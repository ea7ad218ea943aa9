#include "core/rng.h"
#include "harness/ab.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/clock.h"
#include "backends/cache.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/reference.h"
#include "harness/runner.h"
#include "harness/sweep.h"

namespace kb {

using json = nlohmann::json;

PairOutcome measure_and_decide(Executable& a, Executable& b, const MeasureConfig& measure,
                               const stats::DecisionConfig& decision, double budget_s) {
  if (!(budget_s > 0)) throw InputError(fmt::format("budget {} s must be positive", budget_s));
  MeasureConfig cfg = measure;
  cfg.min_samples = decision.min_n;
  cfg.max_samples = decision.max_n;
  cfg.min_time_s = 0;
  cfg.max_time_s = budget_s;
  cfg.noise = -1;  // never stop on noise: the decision stops
  // Pairs must be like for like: one execution per sample for both (the warmup's batch sizing could
  // give A and B different batch sizes, and per-execution time depends on the batch through cache
  // warmth). Kernels here take >= ~100 us, so timer overhead is negligible.
  cfg.min_sample_s = 0;
  stats::SequentialPaired seq(decision);
  stats::Decision last;
  bool decided = false;
  int64_t looked_at = 0;
  StopRule rule = [&](const std::vector<Measurement>& ms) {
    const int64_t n = int64_t(std::min(ms[0].samples_s.size(), ms[1].samples_s.size()));
    if (n == looked_at || !seq.is_look(n)) return false;
    looked_at = n;
    last = seq.look(ms[0].samples_s, ms[1].samples_s, n >= decision.max_n);
    decided = last.verdict != stats::Verdict::unsure;
    return decided;
  };
  const double t0 = now_s();
  PairOutcome out;
  out.m = measure_interleaved({&a, &b}, cfg, rule);
  out.wall_s = now_s() - t0;
  const int64_t n = int64_t(std::min(out.m[0].samples_s.size(), out.m[1].samples_s.size()));
  if (!decided && n != looked_at) {
    // Budget ran out between planned looks: one final look at what there is (it replaces the next
    // planned look, so the number of looks stays within the Bonferroni plan).
    last = seq.look(out.m[0].samples_s, out.m[1].samples_s, true);
  } else if (!decided) {
    last.final_look = true;
  }
  last.n_base = last.n_new = std::min<int64_t>(last.n_base, n);
  out.decision = last;
  out.looks = seq.looks_taken();
  const std::string reason = decided ? "decided" : "budget";
  for (auto& m : out.m) m.conditions.stop_reason = reason;
  return out;
}

PairOutcome measure_and_decide_blocks(const PairFactory& make, const MeasureConfig& measure,
                                      const stats::DecisionConfig& decision, double budget_s, int pairs_per_block) {
  const std::vector<ExecutableFactory> sides = {[&] { return make(0); }, [&] { return make(1); }};
  return measure_and_decide_blocks(sides, measure, decision, budget_s, pairs_per_block);
}

PairOutcome measure_and_decide_blocks(const std::vector<ExecutableFactory>& sides, const MeasureConfig& measure,
                                      const stats::DecisionConfig& decision, double budget_s, int pairs_per_block) {
  if (sides.size() != 2) throw Error(fmt::format("internal: an A/B needs 2 sides, not {}", sides.size()));
  if (!(budget_s > 0)) throw InputError(fmt::format("budget {} s must be positive", budget_s));
  if (pairs_per_block < 2) throw InputError(fmt::format("pairs per block {} must be at least 2", pairs_per_block));
  stats::SequentialPaired seq(decision);
  Rng rng(measure.seed);
  PairOutcome out;
  out.m.resize(2);
  stats::Decision last;
  bool decided = false, looked_at_end = false;
  const double t0 = now_s();
  for (int block = 0; block < decision.max_n; ++block) {
    const double left = budget_s - (now_s() - t0);
    if (left <= 0) break;
    MeasureConfig cfg = measure;
    cfg.min_sample_s = 0;  // one execution per sample on both sides (see measure_and_decide)
    cfg.warmup_s = block_warmup_s(measure, block, 0.01);
    const auto ms = measure_fresh_block(sides, cfg, pairs_per_block, left, rng);
    if (ms.empty()) break;  // budget ran out inside the block: a partial block is dropped
    for (int i = 0; i < 2; ++i) {
      auto& dst = out.m[size_t(i)];
      dst.samples_s.insert(dst.samples_s.end(), ms[size_t(i)].samples_s.begin(), ms[size_t(i)].samples_s.end());
      dst.clocks_mhz.insert(dst.clocks_mhz.end(), ms[size_t(i)].clocks_mhz.begin(), ms[size_t(i)].clocks_mhz.end());
      dst.placements.insert(dst.placements.end(), ms[size_t(i)].placements.begin(), ms[size_t(i)].placements.end());
      if (block == 0) dst.conditions = ms[size_t(i)].conditions;
      dst.conditions.discarded_throttled += block == 0 ? 0 : ms[size_t(i)].conditions.discarded_throttled;
    }
    out.block_effects.push_back(stats::median(stats::log_ratios(ms[0].samples_s, ms[1].samples_s)));
    const int64_t nb = int64_t(out.block_effects.size());
    if (seq.is_look(nb)) {
      last = seq.look_log_ratios(out.block_effects, nb >= decision.max_n);
      looked_at_end = true;
      if (last.verdict != stats::Verdict::unsure) {
        decided = true;
        break;
      }
    } else {
      looked_at_end = false;
    }
  }
  out.wall_s = now_s() - t0;
  if (!decided && !looked_at_end && !out.block_effects.empty()) {
    // Budget ran out between planned looks: one final look at what there is (it takes the place of the
    // next planned look, so the number of looks stays within the Bonferroni plan).
    last = seq.look_log_ratios(out.block_effects, true);
  } else if (!decided) {
    last.final_look = true;
  }
  last.method = fmt::format("blocks of {} pairs, fresh loads per block: signed-rank HL on block medians",
                            pairs_per_block);
  last.n_base = last.n_new = int64_t(out.block_effects.size()) * pairs_per_block;  // pairs behind the decision
  out.decision = last;
  out.looks = seq.looks_taken();
  const std::string reason = decided ? "decided" : "budget";
  for (auto& m : out.m) {
    m.conditions.stop_reason = reason;
    m.conditions.interleaved = true;
  }
  return out;
}

namespace {

void check_ab_options(const AbOptions& o) {
  if (o.toolchain_a.empty() || o.toolchain_b.empty())
    throw InputError("ab needs two toolchains: --toolchain A --toolchain B");
  if (!(o.threshold > 0 && o.threshold < 1)) throw InputError(fmt::format("threshold {} must be in (0, 1)", o.threshold));
  if (!(o.alpha > 0 && o.alpha < 0.5)) throw InputError(fmt::format("alpha {} must be in (0, 0.5)", o.alpha));
  if (!(o.budget_s > 0)) throw InputError(fmt::format("budget_s {} must be positive", o.budget_s));
  if (o.min_pairs < 2 || o.max_pairs < o.min_pairs)
    throw InputError(fmt::format("pairs: need 2 <= min ({}) <= max ({})", o.min_pairs, o.max_pairs));
  if (o.pairs_per_block == 1 || o.pairs_per_block < 0)
    throw InputError(fmt::format("pairs_per_block {} must be 0 (one load) or at least 2", o.pairs_per_block));
  if (o.pairs_per_block > 0 && (o.min_blocks < 2 || o.max_blocks < o.min_blocks))
    throw InputError(fmt::format("blocks: need 2 <= min ({}) <= max ({})", o.min_blocks, o.max_blocks));
  check_placement(o.placement, "placement");
}

Sweep load_side(const AbOptions& o, const std::string& toolchain) {
  SweepOptions so;
  so.toolchains = {toolchain};
  so.filter = o.filter;
  return load_sweep(o.sweep_file, so);
}

void describe_ab_environment(RunResults& res, const Sweep& wa, const Sweep& wb) {
  res.kind = "ab";
  res.name = wa.name;
  res.sweep_file = wa.file;
  res.started = now_iso8601();
  res.environment = describe_environment();
  res.environment["toolchains"] = json::array();
  for (const Sweep* w : {&wa, &wb})
    for (const auto& t : w->toolchains)
      res.environment["toolchains"].push_back({{"name", t->name},
                                               {"kind", t->kind},
                                               {"compiler", t->compiler},
                                               {"flags", t->flags},
                                               {"target", t->target},
                                               {"identity", t->identity},
                                               {"version", t->version_text}});
}

// One ab run in progress: the decision plans, the results so far, and where they are saved.
struct AbSession {
  const AbOptions& o;
  Log& log;
  AbRun run;
  stats::DecisionConfig dcfg, bcfg;  // looks on pairs / looks on blocks
  json pairs_json = json::array();
  double t_start = now_s();
  CompileCache cache;
  ReferenceCache refs;

  void init_comparison() {
    Comparison& cmp = run.comparison;
    cmp.base_origin = "A = " + o.toolchain_a;
    cmp.new_origin = "B = " + o.toolchain_b;
    cmp.method =
        o.pairs_per_block > 0
            ? fmt::format(
                  "interleaved in blocks of {} pairs, both sides loaded afresh per block{}; Hodges-Lehmann of the "
                  "block medians of log(B/A) with signed-rank CI, Wilcoxon p; looks at {}..{} blocks, alpha {}/{} per "
                  "look; budget {} s per case",
                  o.pairs_per_block, o.placement == "process" ? " (CPU: in a new process per block)" : "",
                  o.min_blocks, o.max_blocks, o.alpha, bcfg.looks(), o.budget_s)
            : fmt::format(
                  "paired, interleaved, one load per side: Hodges-Lehmann of log(B/A) with signed-rank CI, Wilcoxon p; "
                  "looks at {}..{} pairs, alpha {}/{} per look; budget {} s per case",
                  o.min_pairs, o.max_pairs, o.alpha, dcfg.looks(), o.budget_s);
    cmp.options.threshold = o.threshold;
    cmp.options.alpha = o.alpha;
    cmp.options.fail_on_slower = true;
  }

  void save() {
    RunResults& res = run.results;
    res.finished = now_iso8601();
    res.wall_s = now_s() - t_start;
    finish_comparison(run.comparison);
    res.extra = {{"toolchains", {o.toolchain_a, o.toolchain_b}},
                 {"threshold", o.threshold},
                 {"alpha", o.alpha},
                 {"budget_s", o.budget_s},
                 {"placement", o.placement},
                 {"pairs", pairs_json},
                 {"comparison", comparison_to_json(run.comparison)}};
    if (!run.results_path.empty()) save_results(res, run.results_path);
  }

  // A pair that was not measured: both results and the comparison row, with the reason.
  void record_unmeasured(PreparedCase& ca, PreparedCase& cb, CaseComparison& cc) {
    run.results.cases.push_back(ca.result);
    run.results.cases.push_back(cb.result);
    run.comparison.cases.push_back(cc);
    save();
  }

  PairOutcome measure_pair(PreparedCase& ca, PreparedCase& cb, const MeasureConfig& mc) {
    if (o.pairs_per_block == 0) return measure_and_decide(*ca.exe, *cb.exe, mc, dcfg, o.budget_s);
    // Block design: the loads made for the correctness check are not measured; every block loads again.
    ca.exe.reset();
    cb.exe.reset();
    return measure_and_decide_blocks({ca.reload, cb.reload}, mc, bcfg, o.budget_s, o.pairs_per_block);
  }

  void record_pair(const std::string& group, PreparedCase& ca, PreparedCase& cb, CaseComparison& cc,
                   const PairOutcome& po) {
    record_measurement(ca.result, po.m[0]);
    record_measurement(cb.result, po.m[1]);
    ca.result.conditions.group = cb.result.conditions.group = group;
    cc.compared = true;
    cc.decision = po.decision;
    cc.base_median_s = stats::median(po.m[0].samples_s);
    cc.new_median_s = stats::median(po.m[1].samples_s);
    const size_t n = std::min(po.m[0].samples_s.size(), po.m[1].samples_s.size());
    json pj = json::array();
    for (size_t i = 0; i < n; ++i) pj.push_back({po.m[0].samples_s[i], po.m[1].samples_s[i]});
    pairs_json.push_back({{"key", cc.key},
                          {"group", group},
                          {"a", ca.result.id()},
                          {"b", cb.result.id()},
                          {"wall_s", po.wall_s},
                          {"looks", po.looks},
                          {"pairs_per_block", o.pairs_per_block},
                          {"block_effects", po.block_effects},
                          {"placements", {{"a", po.m[0].placements}, {"b", po.m[1].placements}}},
                          {"decision", decision_to_json(po.decision)},
                          {"pairs_s", pj}});
    run.results.cases.push_back(std::move(ca.result));
    run.results.cases.push_back(std::move(cb.result));
    run.comparison.cases.push_back(cc);
    save();
  }

  void compare_case(const PlannedCase& pa, const PlannedCase& pb, CaseComparison& cc, int index, int total) {
    cc.new_toolchain = pb.toolchain->name;
    PreparedCase ca = prepare_case(pa, cache, refs);
    PreparedCase cb = prepare_case(pb, cache, refs);
    if (!ca.ready() || !cb.ready()) {
      std::string why;
      if (!ca.ready()) why += fmt::format("A {}: {}", to_string(ca.result.status), ca.result.reason);
      if (!cb.ready())
        why += fmt::format("{}B {}: {}", why.empty() ? "" : "; ", to_string(cb.result.status), cb.result.reason);
      cc.reason = why;
      return record_unmeasured(ca, cb, cc);
    }
    log.line(fmt::format("ab case {}/{} {}: measuring (budget {} s)", index, total, cc.key, o.budget_s));
    MeasureConfig mc = pa.measure;
    mc.seed = o.seed + uint64_t(index);
    mc.placement = o.placement;
    PairOutcome po;
    try {
      po = measure_pair(ca, cb, mc);
    } catch (const Error& e) {
      ca.result.status = cb.result.status = CaseStatus::failed;
      ca.result.reason = cb.result.reason = std::string("measurement failed: ") + e.what();
      cc.reason = ca.result.reason;
      return record_unmeasured(ca, cb, cc);
    }
    log.line(fmt::format("ab case {}/{} {}: {} {:+.2f}% [{:+.2f}%, {:+.2f}%] after {} pairs, {:.1f} s", index, total,
                         cc.key, stats::to_string(po.decision.verdict), 100 * po.decision.effect_pct(),
                         100 * po.decision.ci_lo_pct(), 100 * po.decision.ci_hi_pct(), po.decision.n_base, po.wall_s));
    record_pair(fmt::format("ab-{}", index), ca, cb, cc, po);
  }
};

}  // namespace

AbRun run_ab(const AbOptions& o) {
  check_ab_options(o);
  const Sweep wa = load_side(o, o.toolchain_a);
  const Sweep wb = load_side(o, o.toolchain_b);
  std::map<std::string, const PlannedCase*> bmap;
  for (const auto& pc : wb.cases) bmap.emplace(case_key(pc), &pc);

  AbSession s{o, o.log ? *o.log : quiet_log(), {}, {}, {}, json::array(), now_s(), CompileCache(), ReferenceCache()};
  s.dcfg.threshold = o.threshold;
  s.dcfg.alpha = o.alpha;
  s.dcfg.min_n = o.min_pairs;
  s.dcfg.max_n = o.max_pairs;
  s.bcfg = s.dcfg;  // block design: looks count blocks
  s.bcfg.min_n = o.min_blocks;
  s.bcfg.max_n = o.max_blocks;
  describe_ab_environment(s.run.results, wa, wb);
  s.init_comparison();
  if (!o.out_dir.empty()) {
    make_dirs(o.out_dir);
    s.run.results_path = o.out_dir + "/ab.json";
  }

  std::set<std::string> seen;
  int index = 0;
  for (const auto& pa : wa.cases) {
    ++index;
    CaseComparison cc;
    cc.key = case_key(pa);
    cc.base_toolchain = pa.toolchain->name;
    seen.insert(cc.key);
    auto it = bmap.find(cc.key);
    if (it != bmap.end()) {
      s.compare_case(pa, *it->second, cc, index, int(wa.cases.size()));
      continue;
    }
    cc.reason = "no case for toolchain B";
    s.run.comparison.cases.push_back(cc);
  }
  for (const auto& pb : wb.cases) {
    const std::string key = case_key(pb);
    if (seen.count(key)) continue;
    CaseComparison cc;
    cc.key = key;
    cc.new_toolchain = pb.toolchain->name;
    cc.reason = "no case for toolchain A";
    s.run.comparison.cases.push_back(cc);
  }
  s.save();
  return std::move(s.run);
}

}  // namespace kb
