#include "passes/passes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "core/clock.h"
#include "backends/backend.h"
#include "backends/cache.h"
#include "harness/ab.h"
#include "core/error.h"
#include "harness/measure.h"
#include "harness/reference.h"
#include "harness/runner.h"
#include "harness/sweep.h"

namespace kb {

namespace {

constexpr size_t kFullLog = size_t(1) << 26;

// One case, compiled at any opt-bisect limit through the compile cache.
class PassLab {
 public:
  PassLab(const PlannedCase& pc, std::string metric) : pc_(pc), metric_(std::move(metric)) {}

  std::shared_ptr<const Toolchain> toolchain_at(int limit) {
    auto it = tcs_.find(limit);
    if (it != tcs_.end()) return it->second;
    auto tc = std::make_shared<Toolchain>(*pc_.toolchain);
    tc->flags.push_back("-mllvm");
    tc->flags.push_back(fmt::format("-opt-bisect-limit={}", limit));
    tc->name = fmt::format("{}@{}", pc_.toolchain->name, limit);
    tc->identity.clear();
    resolve_identity(*tc);
    tcs_[limit] = tc;
    return tc;
  }

  Artifact compile(int limit, size_t log_limit = 8000) {
    auto tc = toolchain_at(limit);
    CompileRequest req = compile_request(pc_);
    req.toolchain = tc.get();
    req.log_limit = log_limit;
    Artifact a = cache_.compile(backend_for(*tc), req);
    if (!a.cache_hit) ++compiles;
    return a;
  }

  double static_value(const Artifact& a) const {
    if (metric_ == "code_bytes") return double(a.code_bytes);
    auto it = a.metrics.find(metric_);
    if (it == a.metrics.end()) {
      std::string names = "code_bytes";
      for (const auto& [k, v] : a.metrics) names += ", " + k;
      throw InputError(fmt::format("metric '{}' is not reported by the {} backend for this case (it has: time, {})", metric_,
                                   a.backend, names));
    }
    return it->second;
  }

  // The loaded kernel at `limit` and its code hash (machine code only).
  std::pair<std::unique_ptr<Executable>, std::string> load(int limit) {
    PlannedCase pc = pc_;
    pc.toolchain = toolchain_at(limit);
    PreparedCase p = prepare_case(pc, cache_, refs_);
    if (!p.ready())
      throw Error(fmt::format("opt-bisect-limit={}: {} ({})", limit, to_string(p.result.status), p.result.reason));
    if (!p.result.cache_hit) ++compiles;
    return {std::move(p.exe), p.result.code_hash};
  }

  int compiles = 0;

 private:
  PlannedCase pc_;
  std::string metric_;
  CompileCache cache_;
  ReferenceCache refs_;
  std::map<int, std::shared_ptr<const Toolchain>> tcs_;
};

double median_of(std::vector<double> v) { return v.empty() ? 0 : stats::median(std::move(v)); }

// Timed placement of a probe between the two levels, all three measured interleaved.
PassProbe place_timed(int n, Executable& low, Executable& high, Executable& probe, const PassesOptions& o,
                      const MeasureConfig& base) {
  MeasureConfig cfg = base;
  cfg.min_samples = o.min_pairs;
  cfg.max_samples = o.max_pairs;
  cfg.min_time_s = 0;
  cfg.max_time_s = o.probe_budget_s;
  cfg.noise = -1;
  cfg.min_sample_s = 0;
  cfg.seed = o.seed + uint64_t(n);
  stats::DecisionConfig dc;
  dc.alpha = o.alpha;
  dc.min_n = o.min_pairs;
  dc.max_n = o.max_pairs;
  const int looks = dc.looks();
  bool decided = false, high_side = false;
  int64_t looked = 0;
  auto sides = [&](const std::vector<Measurement>& ms, bool last) {
    const auto& l = ms[0].samples_s;
    const auto& h = ms[1].samples_s;
    const auto& p = ms[2].samples_s;
    const double gap = median_of(stats::log_ratios(l, h));
    const auto d = stats::log_ratios(l, p);
    const double cutv = o.cut * gap;
    const auto est = stats::hodges_lehmann_one_sample(d, 1 - o.alpha / looks);
    const double s = gap < 0 ? -1 : 1;  // orient so that "towards high" is positive
    if (s * est.ci.lo >= s * cutv && s * est.ci.hi >= s * cutv) return std::make_pair(true, true);
    if (s * est.ci.lo < s * cutv && s * est.ci.hi < s * cutv) return std::make_pair(true, false);
    if (last) return std::make_pair(false, s * est.estimate >= s * cutv);
    return std::make_pair(false, false);
  };
  stats::SequentialPaired seq(dc);
  StopRule rule = [&](const std::vector<Measurement>& ms) {
    const int64_t k = int64_t(ms[2].samples_s.size());
    if (k == looked || !seq.is_look(k)) return false;
    looked = k;
    auto [dec, hi] = sides(ms, false);
    decided = dec;
    high_side = hi;
    return decided;
  };
  auto ms = measure_interleaved({&low, &high, &probe}, cfg, rule);
  PassProbe pr;
  pr.n = n;
  pr.rounds = int64_t(ms[2].samples_s.size());
  if (!decided) high_side = sides(ms, true).second;
  pr.high = high_side;
  pr.how = decided ? "decided" : "budget";
  pr.value = median_of(ms[2].samples_s);
  const double gap = median_of(stats::log_ratios(ms[0].samples_s, ms[1].samples_s));
  pr.position = gap != 0 ? median_of(stats::log_ratios(ms[0].samples_s, ms[2].samples_s)) / gap : 0;
  return pr;
}

using Say = std::function<void(const std::string&)>;

// The pass executions that -opt-bisect-limit counts (numbered 1..N), from a full compile's log.
std::vector<PassExec> pass_list(PassLab& lab, const PlannedCase& pc) {
  Artifact all = lab.compile(-1, kFullLog);
  std::vector<PassExec> execs;
  for (const auto& e : parse_opt_bisect(all.log))
    if (e.ran) execs.push_back(e);
  for (size_t i = 0; i < execs.size(); ++i)
    if (execs[i].n != int(i) + 1)
      throw Error(fmt::format("opt-bisect output of {} is not numbered 1..N (entry {} is {}); was the log cut?",
                              pc.toolchain->name, i + 1, execs[i].n));
  if (execs.empty())
    throw InputError(fmt::format("toolchain '{}' printed no 'BISECT: running pass' lines with -mllvm -opt-bisect-limit=-1 "
                                 "(is it clang-based with optimization enabled?)",
                                 pc.toolchain->name));
  return execs;
}

void set_crossing(PassCrossing& r, const std::vector<PassExec>& execs, int n) {
  r.n = n;
  r.pass = execs[size_t(n - 1)].pass;
  r.unit = execs[size_t(n - 1)].unit;
}

// A static metric: every probe is one compile, placed exactly between the two levels.
void search_static(PassLab& lab, const std::vector<PassExec>& execs, const PassesOptions& o, PassCrossing& r,
                   const Say& say) {
  std::map<int, double> values;
  auto value = [&](int n) {
    auto it = values.find(n);
    if (it != values.end()) return it->second;
    double v = lab.static_value(lab.compile(n));
    values[n] = v;
    return v;
  };
  r.low = value(0);
  r.high = value(r.total);
  if (r.low == r.high || std::abs(r.high - r.low) <= o.threshold * std::max(std::abs(r.low), std::abs(r.high))) {
    r.verdict = "no-difference";
    r.reason = fmt::format("{} is {:g} with no pass and {:g} with all {} passes (within the threshold)", o.metric, r.low,
                           r.high, r.total);
    return;
  }
  auto place = [&](int n) {
    PassProbe p;
    p.n = n;
    p.value = value(n);
    p.position = (p.value - r.low) / (r.high - r.low);
    p.high = p.position >= o.cut;
    p.how = "static";
    r.probes.push_back(p);
    say(fmt::format("N={} {}={:g} position {:.2f} -> {}", n, o.metric, p.value, p.position, p.high ? "high" : "low"));
    return p.high;
  };
  int lo = 0, hi = r.total;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    (place(mid) ? hi : lo) = mid;
  }
  set_crossing(r, execs, hi);
  r.before = value(hi - 1);
  r.after = value(hi);
  r.verdict = "found";
  r.reason = fmt::format("{} {:g} -> {:g} at pass execution {}", o.metric, r.before, r.after, hi);
}

// Confirmation of a timed crossing: N-1 against N, fresh loads, interleaved.
void confirm_timed(PassLab& lab, const PassesOptions& o, const MeasureConfig& mc, const stats::DecisionConfig& dc,
                   PassCrossing& r, const Say& say) {
  auto [before, before_hash] = lab.load(r.n - 1);
  auto [after, after_hash] = lab.load(r.n);
  if (before_hash == after_hash)  // cannot happen with the same-code rule of the search; kept as a guard
    throw Error(fmt::format("pass executions {} and {} compile to identical code", r.n - 1, r.n));
  MeasureConfig cc = mc;
  cc.seed = o.seed + 7919;
  PairOutcome cf = measure_and_decide(*before, *after, cc, dc, o.probe_budget_s);
  r.confirm = cf.decision;
  r.before = median_of(cf.m[0].samples_s);
  r.after = median_of(cf.m[1].samples_s);
  const bool faster = r.high < r.low;
  const bool ok = faster ? cf.decision.verdict == stats::Verdict::better : cf.decision.verdict == stats::Verdict::worse;
  r.verdict = ok ? "found" : "unconfirmed";
  r.reason = fmt::format("N-1 -> N: {:.4g} ms -> {:.4g} ms, {:+.1f}% [{:+.1f}, {:+.1f}] ({}, {} pairs)", 1e3 * r.before,
                         1e3 * r.after, 100 * cf.decision.effect_pct(), 100 * cf.decision.ci_lo_pct(), 100 * cf.decision.ci_hi_pct(),
                         stats::to_string(cf.decision.verdict), cf.decision.n_new);
  say(r.reason);
}

// Time: both levels stay loaded for the whole search; each probe is placed against them statistically.
void search_timed(PassLab& lab, const PlannedCase& pc, const std::vector<PassExec>& execs, const PassesOptions& o,
                  PassCrossing& r, const Say& say) {
  auto [low, low_hash] = lab.load(0);
  auto [high, high_hash] = lab.load(r.total);
  // Probes that compile to machine code already placed take that side without measuring, so identical
  // code is never placed on both sides by noise (and the crossing pass always changes the code).
  std::map<std::string, PassProbe> side_of_code;
  side_of_code[low_hash] = PassProbe{0, r.low, 0, false, 0, "level"};
  side_of_code[high_hash] = PassProbe{r.total, r.high, 1, true, 0, "level"};
  stats::DecisionConfig dc;
  dc.threshold = o.threshold;
  dc.alpha = o.alpha;
  dc.min_n = o.min_pairs;
  dc.max_n = o.max_pairs;
  MeasureConfig mc = pc.measure;
  mc.seed = o.seed;
  PairOutcome lv = measure_and_decide(*low, *high, mc, dc, o.probe_budget_s);
  r.low = median_of(lv.m[0].samples_s);
  r.high = median_of(lv.m[1].samples_s);
  say(fmt::format("levels: {:.4g} ms with no pass, {:.4g} ms with all {} ({}, {:+.1f}%)", 1e3 * r.low, 1e3 * r.high, r.total,
                  stats::to_string(lv.decision.verdict), 100 * lv.decision.effect_pct()));
  if (lv.decision.verdict == stats::Verdict::same ||
      (lv.decision.verdict == stats::Verdict::unsure && std::abs(lv.decision.effect) < std::log1p(o.threshold))) {
    r.verdict = "no-difference";
    r.reason = fmt::format("no pass vs all passes: {:+.2f}% [{:+.2f}, {:+.2f}] ({}), within the threshold",
                           100 * lv.decision.effect_pct(), 100 * lv.decision.ci_lo_pct(), 100 * lv.decision.ci_hi_pct(),
                           stats::to_string(lv.decision.verdict));
    return;
  }
  int lo = 0, hi = r.total;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    auto [exe, hash] = lab.load(mid);
    PassProbe p;
    if (auto it = side_of_code.find(hash); it != side_of_code.end()) {
      p = it->second;
      p.n = mid;
      p.rounds = 0;
      p.how = "same-code";
    } else {
      p = place_timed(mid, *low, *high, *exe, o, mc);
      side_of_code[hash] = p;
    }
    r.probes.push_back(p);
    say(fmt::format("N={} ({} on {}): {:.4g} ms, position {:.2f} -> {} ({} rounds, {})", mid, execs[size_t(mid - 1)].pass,
                    execs[size_t(mid - 1)].unit, 1e3 * p.value, p.position, p.high ? "high" : "low", p.rounds, p.how));
    (p.high ? hi : lo) = mid;
  }
  set_crossing(r, execs, hi);
  confirm_timed(lab, o, mc, dc, r, say);
}

PassCrossing search_case(const PlannedCase& pc, const PassesOptions& o) {
  const double t0 = now_s();
  PassCrossing r;
  r.case_id = pc.c.id();
  r.toolchain = pc.toolchain->name;
  r.metric = o.metric;
  Say say = [&](const std::string& s) {
    if (o.log) o.log->line(fmt::format("{}: {}", r.case_id, s));
  };
  PassLab lab(pc, o.metric);
  const auto execs = pass_list(lab, pc);
  r.total = int(execs.size());
  say(fmt::format("{} pass executions", r.total));
  if (o.metric == "time")
    search_timed(lab, pc, execs, o, r, say);
  else
    search_static(lab, execs, o, r, say);
  r.compiles = lab.compiles;
  r.wall_s = now_s() - t0;
  return r;
}

}  // namespace

std::vector<PassExec> parse_opt_bisect(const std::string& log) {
  std::vector<PassExec> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string p = "BISECT: ";
    size_t at = line.find(p);
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at + p.size());
    PassExec e;
    if (rest.rfind("NOT running pass (", 0) == 0) {
      e.ran = false;
      rest = rest.substr(18);
    } else if (rest.rfind("running pass (", 0) == 0) {
      rest = rest.substr(14);
    } else {
      continue;
    }
    size_t close = rest.find(") ");
    if (close == std::string::npos) continue;
    try {
      e.n = std::stoi(rest.substr(0, close));
    } catch (...) {
      continue;
    }
    rest = rest.substr(close + 2);
    size_t on = rest.rfind(" on ");
    if (on == std::string::npos) {
      e.pass = rest;
    } else {
      e.pass = rest.substr(0, on);
      e.unit = rest.substr(on + 4);
    }
    out.push_back(std::move(e));
  }
  return out;
}

bool is_clang_kind(const std::string& kind) { return kind == "clang" || kind == "clang-cuda" || kind == "clang-hip"; }

std::vector<PassCrossing> run_passes(const PassesOptions& o) {
  if (!(o.cut > 0 && o.cut <= 1)) throw InputError(fmt::format("passes: cut {} must be in (0, 1]", o.cut));
  if (!(o.threshold >= 0)) throw InputError(fmt::format("passes: threshold {} must not be negative", o.threshold));
  if (o.metric.empty()) throw InputError("passes: the metric is empty");
  SweepOptions so;
  so.toolchains = {o.toolchain};
  so.filter = o.filter;
  Sweep sw = load_sweep(o.sweep_file, so);
  if (sw.toolchains.size() != 1) throw InputError("passes needs exactly one toolchain");
  const Toolchain& tc = *sw.toolchains[0];
  if (!is_clang_kind(tc.kind))
    throw InputError(fmt::format("toolchain '{}' is of kind '{}': passes needs a clang-based toolchain (kind clang, "
                                 "clang-cuda or clang-hip) for -mllvm -opt-bisect-limit",
                                 tc.name, tc.kind));
  if (sw.cases.empty())
    throw InputError(fmt::format("{}: no case matches{}", o.sweep_file, o.filter.empty() ? "" : " --filter '" + o.filter + "'"));
  std::vector<PassCrossing> out;
  for (const auto& pc : sw.cases) {
    if (pc.skip_reason) {
      PassCrossing r;
      r.case_id = pc.c.id();
      r.toolchain = pc.toolchain->name;
      r.metric = o.metric;
      r.verdict = "skipped";
      r.reason = *pc.skip_reason;
      out.push_back(r);
      continue;
    }
    if (o.metric == "time") {
      Availability av = backend_for(*pc.toolchain).available();
      if (!av.ok) {
        PassCrossing r;
        r.case_id = pc.c.id();
        r.toolchain = pc.toolchain->name;
        r.metric = o.metric;
        r.verdict = "skipped";
        r.reason = "cannot time here: " + av.reason + " (static metrics work without a device)";
        out.push_back(r);
        continue;
      }
    }
    try {
      out.push_back(search_case(pc, o));
    } catch (const InputError&) {
      throw;
    } catch (const EnvError&) {
      throw;
    } catch (const Error& e) {
      PassCrossing r;
      r.case_id = pc.c.id();
      r.toolchain = pc.toolchain->name;
      r.metric = o.metric;
      r.verdict = "failed";
      r.reason = e.what();
      out.push_back(r);
    }
  }
  return out;
}

nlohmann::json passes_to_json(const std::vector<PassCrossing>& rs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rs) {
    nlohmann::json j = {{"case", r.case_id},   {"toolchain", r.toolchain}, {"metric", r.metric},
                        {"verdict", r.verdict}, {"reason", r.reason},       {"pass_executions", r.total},
                        {"low", r.low},         {"high", r.high},           {"compiles", r.compiles},
                        {"wall_s", r.wall_s}};
    if (r.n > 0) {
      j["crossing"] = {{"n", r.n}, {"pass", r.pass}, {"unit", r.unit}, {"before", r.before}, {"after", r.after}};
      if (r.metric == "time")
        j["crossing"]["confirm"] = {{"verdict", stats::to_string(r.confirm.verdict)},
                                    {"effect_pct", 100 * r.confirm.effect_pct()},
                                    {"ci_pct", {100 * r.confirm.ci_lo_pct(), 100 * r.confirm.ci_hi_pct()}},
                                    {"pairs", r.confirm.n_new}};
    }
    nlohmann::json ps = nlohmann::json::array();
    for (const auto& p : r.probes)
      ps.push_back({{"n", p.n}, {"value", p.value}, {"position", p.position}, {"side", p.high ? "high" : "low"},
                    {"rounds", p.rounds}, {"how", p.how}});
    j["probes"] = ps;
    a.push_back(j);
  }
  return a;
}

std::string render_passes(const std::vector<PassCrossing>& rs) {
  std::string s;
  for (const auto& r : rs) {
    const bool t = r.metric == "time";
    auto v = [&](double x) { return t ? fmt::format("{:.4g} ms", 1e3 * x) : fmt::format("{:g}", x); };
    s += fmt::format("{}\n", r.case_id);
    if (r.verdict == "skipped" || r.verdict == "failed") {
      s += fmt::format("  {}: {}\n", r.verdict, r.reason);
      continue;
    }
    s += fmt::format("  {} pass executions; {}: {} with none, {} with all\n", r.total, r.metric, v(r.low), v(r.high));
    if (r.verdict == "no-difference") {
      s += fmt::format("  no difference: {}\n", r.reason);
      continue;
    }
    s += fmt::format("  {:>6} {:>12} {:>9} {}\n", "N", r.metric, "position", "side");
    for (const auto& p : r.probes)
      s += fmt::format("  {:>6} {:>12} {:>9.2f} {}\n", p.n, v(p.value), p.position, p.high ? "high" : "low");
    s += fmt::format("  crossing{}: pass {} {} on {}: {} -> {}\n", r.verdict == "found" ? "" : " (UNCONFIRMED)", r.n,
                     r.pass, r.unit, v(r.before), v(r.after));
    if (t) s += fmt::format("  confirmation: {}\n", r.reason);
    s += fmt::format("  {} compiles, {:.1f} s\n", r.compiles, r.wall_s);
  }
  return s;
}

}  // namespace kb
