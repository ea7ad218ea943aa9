#include "presubmit/static_diff.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "bisect/decide.h"
#include "bisect/provider.h"
#include "core/error.h"
#include "git/git.h"
#include "harness/runner.h"

namespace kb::presubmit {

std::string to_string(Build::Status s) {
  switch (s) {
    case Build::Status::compiled: return "compiled";
    case Build::Status::skipped: return "skipped";
    case Build::Status::failed: return "failed";
    case Build::Status::absent: return "absent";
  }
  return "?";
}

std::string to_string(StaticCase::State s) {
  switch (s) {
    case StaticCase::State::unchanged: return "unchanged";
    case StaticCase::State::changed: return "changed";
    case StaticCase::State::broken: return "broken";
    case StaticCase::State::fixed: return "fixed";
    case StaticCase::State::not_compiled: return "not-compiled";
  }
  return "?";
}

ToolchainPair toolchains_at(const PresubmitConfig& cfg, const std::string& base_rev, const std::string& change_rev,
                            const std::string& workdir, Log& log) {
  const bisect::BisectConfig pc = provider_config(cfg);
  git::Repo repo(cfg.compiler->repo);
  bisect::Provider prov(pc, repo, workdir);
  ToolchainPair p;
  for (const auto& [rev, opt, file, label] :
       {std::tuple{&base_rev, "--base", &p.base, &p.base_label}, {&change_rev, "--change", &p.change, &p.change_label}}) {
    const std::string sha = repo.resolve(*rev, opt);
    const std::string subject = repo.commit_info(sha).subject;
    *label = fmt::format("{} {} {}", *rev, git::short_sha(sha), subject);
    log.line(fmt::format("{} {}: toolchain at {}", opt, *rev, git::short_sha(sha)));
    const bisect::ToolchainAtCommit t = prov.get(sha);
    if (!t.ok)
      throw InputError(fmt::format("{} {} ({}): no toolchain at this commit: {}{}", opt, *rev, git::short_sha(sha),
                                   t.reason, t.log_tail.empty() ? "" : "\n" + tail(t.log_tail, 1500)));
    if (t.built) log.line(fmt::format("{} {}: built in {:.1f} s", opt, *rev, t.build_s));
    *file = t.toolchain_file;
  }
  return p;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Build compile_side(const PlannedCase* pc, CompileCache& cache) {
  Build b;
  if (!pc) return b;
  if (pc->skip_reason) {
    b.status = Build::Status::skipped;
    b.reason = *pc->skip_reason;
    return b;
  }
  try {
    b.art = cache.compile(backend_for(*pc->toolchain), compile_request(*pc));
    b.status = Build::Status::compiled;
  } catch (const CompileSkipped& e) {
    b.status = Build::Status::skipped;
    b.reason = e.what();
  } catch (const CompileError& e) {
    b.status = Build::Status::failed;
    b.reason = fmt::format("compile failed: {}\n{}", e.what(), tail(e.log(), 1500));
  } catch (const Error& e) {
    b.status = Build::Status::failed;
    b.reason = fmt::format("compile failed: {}", e.what());
  }
  return b;
}

// Every static metric of the two builds that differs (code_bytes first, then the backend's by name).
std::vector<MetricMove> moves_of(const Artifact& a, const Artifact& b) {
  std::vector<MetricMove> out;
  if (a.code_bytes != b.code_bytes) out.push_back({"code_bytes", double(a.code_bytes), double(b.code_bytes)});
  std::set<std::string> names;
  for (const auto* m : {&a.metrics, &b.metrics})
    for (const auto& [k, v] : *m) names.insert(k);
  for (const auto& k : names) {
    const auto ia = a.metrics.find(k), ib = b.metrics.find(k);
    const double va = ia == a.metrics.end() ? 0 : ia->second, vb = ib == b.metrics.end() ? 0 : ib->second;
    if (va != vb) out.push_back({k, va, vb});
  }
  return out;
}

const std::vector<bisect::Metric>& static_metrics() {
  static const std::vector<bisect::Metric> m = {bisect::Metric::registers, bisect::Metric::spills,
                                                bisect::Metric::stack, bisect::Metric::smem,
                                                bisect::Metric::code_bytes};
  return m;
}

// A static metric's value of a build, or nullopt where its backend does not report it.
std::optional<double> metric_of(bisect::Metric m, const std::string& backend, const Artifact& a) {
  try {
    return bisect::static_metric_value(m, backend, a.metrics, a.code_bytes, 0);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

double static_size_of(const std::string& backend, const Artifact& a, const Artifact& b) {
  double s = 0;
  for (bisect::Metric m : static_metrics()) {
    const auto va = metric_of(m, backend, a), vb = metric_of(m, backend, b);
    if (va && vb) s += std::abs(std::log((*vb + 1) / (*va + 1)));
  }
  return s;
}

void classify(const PresubmitConfig& cfg, StaticCase& sc) {
  using S = Build::Status;
  const bool b = sc.b.status == S::compiled, c = sc.c.status == S::compiled;
  if (b && c) {
    sc.state = sc.b.art.code_hash == sc.c.art.code_hash ? StaticCase::State::unchanged : StaticCase::State::changed;
    sc.moves = moves_of(sc.b.art, sc.c.art);
    const std::string& backend = sc.change->c.kernel->backend;
    sc.static_size = static_size_of(backend, sc.b.art, sc.c.art);
    sc.gate_failures = gate_failures(cfg, backend, sc.b.art, sc.c.art);
  } else if (b) {
    sc.state = StaticCase::State::broken;
  } else if (c) {
    sc.state = StaticCase::State::fixed;
  } else {
    sc.state = StaticCase::State::not_compiled;
  }
}

}  // namespace

std::vector<std::string> gate_failures(const PresubmitConfig& cfg, const std::string& backend, const Artifact& base,
                                       const Artifact& change) {
  std::vector<std::string> out;
  for (const GateRule& r : cfg.gate) {
    const auto va = metric_of(r.metric, backend, base), vb = metric_of(r.metric, backend, change);
    if (!va || !vb) continue;  // not reported by this backend
    bool fails = false;
    switch (r.kind) {
      case GateRule::Kind::new_nonzero: fails = *va == 0 && *vb > 0; break;
      case GateRule::Kind::any_increase: fails = *vb > *va; break;
      case GateRule::Kind::relative: fails = *vb > *va * (1 + r.amount); break;
      case GateRule::Kind::absolute: fails = *vb - *va > r.amount; break;
    }
    if (fails)
      out.push_back(fmt::format("{}: {:g} -> {:g} (rule {})", bisect::to_string(r.metric), *va, *vb, r.text));
  }
  return out;
}

StaticDiff compile_and_diff(const PresubmitConfig& cfg, const std::vector<ToolchainPair>& pairs, CompileCache& cache,
                            int jobs, Log& log) {
  StaticDiff d;
  Sweep all;  // every side's planned cases, for one parallel precompile of both compilers
  for (size_t pi = 0; pi < pairs.size(); ++pi) {
    std::map<std::string, size_t> index;  // key -> case of this pair (the first case set that has it)
    for (const CaseSet& cs : cfg.cases) {
      for (int side = 0; side < 2; ++side) {
        SweepOptions so;
        so.toolchains = {side == 0 ? pairs[pi].base : pairs[pi].change};
        so.filter = cs.filter;
        so.tier = cs.tier;
        d.sweeps.push_back(std::make_unique<Sweep>(load_sweep(cs.sweep, so)));
        for (const PlannedCase& pc : d.sweeps.back()->cases) {
          const std::string key = case_key(pc);
          auto [it, fresh] = index.emplace(key, d.cases.size());
          if (fresh) {
            StaticCase sc;
            sc.key = key;
            sc.name = pairs.size() > 1 ? fmt::format("{}@{}", key, pc.toolchain->target.empty() ? pc.toolchain->name
                                                                                               : pc.toolchain->target)
                                       : key;
            sc.pair = pi;
            d.cases.push_back(std::move(sc));
          }
          StaticCase& sc = d.cases[it->second];
          const PlannedCase*& slot = side == 0 ? sc.base : sc.change;
          if (!slot) {
            slot = &pc;
            all.cases.push_back(pc);
          }
        }
      }
    }
  }
  std::set<std::string> keys;
  for (const auto& pc : all.cases)
    if (!pc.skip_reason) keys.insert(cache.key(compile_request(pc)));
  d.builds = int(keys.size());
  const auto t0 = std::chrono::steady_clock::now();
  d.compiled_afresh = int(precompile(all, cache, jobs, log).size());
  for (StaticCase& sc : d.cases) {
    sc.b = compile_side(sc.base, cache);
    sc.c = compile_side(sc.change, cache);
    // Builds precompile left (it compiles nothing on one thread) are compiled here, once per key.
    d.compiled_afresh += int(sc.b.status == Build::Status::compiled && !sc.b.art.cache_hit) +
                           int(sc.c.status == Build::Status::compiled && !sc.c.art.cache_hit);
    classify(cfg, sc);
  }
  d.compile_wall_s = seconds_since(t0);
  return d;
}

}  // namespace kb::presubmit
