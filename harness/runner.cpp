#include "harness/runner.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "backends/triton/user_kernel.h"
#include "core/error.h"

namespace kb {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

CaseResult blank_result(const PlannedCase& pc) {
  CaseResult r;
  r.kernel = pc.c.kernel->name;
  r.backend = pc.c.kernel->backend;
  r.params = pc.c.params;
  r.shape = pc.c.shape;
  r.dtype = pc.c.dtype;
  r.toolchain = pc.toolchain->name;
  r.toolchain_identity = pc.toolchain->identity;
  r.target = pc.toolchain->target;
  r.tier = pc.c.tier;
  return r;
}

std::string case_key(const PlannedCase& pc) { return blank_result(pc).key(); }

CompileRequest compile_request(const PlannedCase& pc) {
  CompileRequest req;
  req.kernel = pc.c.kernel;
  req.params = pc.c.params;
  req.dtype = pc.c.dtype;
  req.shape = pc.c.shape;
  req.toolchain = pc.toolchain.get();
  req.kernel_dir = kernel_dir();
  return req;
}

PreparedCase prepare_case(const PlannedCase& pc, CompileCache& cache, ReferenceCache& refs) {
  PreparedCase out;
  CaseResult& r = out.result;
  r = blank_result(pc);
  if (pc.skip_reason) {
    r.status = CaseStatus::skipped;
    r.reason = *pc.skip_reason;
    return out;
  }
  Backend& be = backend_for(*pc.toolchain);
  const CompileRequest req = compile_request(pc);
  Artifact art;
  try {
    art = cache.compile(be, req);
  } catch (const CompileSkipped& e) {
    r.status = CaseStatus::skipped;
    r.reason = e.what();
    return out;
  } catch (const CompileError& e) {
    r.status = CaseStatus::failed;
    r.reason = fmt::format("compile failed: {}\n{}", e.what(), tail(e.log(), 1500));
    return out;
  } catch (const Error& e) {
    r.status = CaseStatus::failed;
    r.reason = fmt::format("compile failed: {}", e.what());
    return out;
  }
  r.has_static = true;
  r.code_hash = art.code_hash;
  r.code_bytes = art.code_bytes;
  r.compile_s = art.compile_s;
  r.cache_hit = art.cache_hit;
  r.metrics = art.metrics;

  Availability av = be.available();
  if (!av.ok) {
    r.status = CaseStatus::skipped;
    r.reason = av.reason;
    return out;
  }
  try {
    auto exe = be.load(art);
    const triton::UserKernel* user = triton::find_user_kernel(pc.c.kernel->name);
    const auto t_ref = std::chrono::steady_clock::now();
    // A user's kernel has its own arguments (made by the executable from its file): no GEMM inputs.
    std::shared_ptr<const GemmProblem> problem;
    if (user) {
      auto p = std::make_shared<GemmProblem>();
      p->shape = pc.c.shape;
      p->dtype = pc.c.dtype;
      problem = p;
    } else {
      problem = refs.get(pc.c.shape, pc.c.dtype);
    }
    double check_s = seconds_since(t_ref);
    exe->prepare(pc.c.shape, problem->A, problem->B);
    out.check_run_s = exe->run(1).seconds;
    const auto t_cmp = std::chrono::steady_clock::now();
    Check chk = user ? check_user_outputs(user_reference_key(*pc.c.kernel, pc.c.params, pc.c.dtype, pc.c.shape),
                                          *pc.toolchain, pc.c.params, *user, *exe, refs.outputs())
                     : check_executable(*problem, *exe, pc.c.kernel->tolerance);
    check_s += seconds_since(t_cmp);
    r.checked = true;
    r.check_s = check_s;
    r.max_error = chk.max_error;
    r.tolerance = chk.tolerance;
    r.check_method = chk.method;
    r.check_elements = chk.checked;
    r.projection_ratio = chk.projection_ratio;
    if (!chk.ok) {
      r.status = CaseStatus::incorrect;
      r.reason = chk.detail;
      return out;
    }
    r.status = CaseStatus::ok;
    out.exe = std::move(exe);
    out.reload = fresh_loads(be, art, problem);
  } catch (const Error& e) {
    r.status = CaseStatus::failed;
    r.reason = e.what();
  } catch (const std::bad_alloc&) {
    // Shapes beyond physical memory are skipped when planned; this is one that fits on paper only.
    r.status = CaseStatus::failed;
    r.reason = fmt::format("out of memory preparing {} operands", pc.c.shape.str());
  }
  return out;
}

ExecutableFactory fresh_loads(Backend& be, const Artifact& art, std::shared_ptr<const GemmProblem> problem) {
  std::shared_ptr<const LoadRecipe> recipe;
  if (be.name() == "cpu")
    recipe = std::make_shared<const LoadRecipe>(
        LoadRecipe{art, problem->shape, {problem, &problem->A}, {problem, &problem->B}});
  return ExecutableFactory(
      [&be, art, problem] {
        auto fresh = be.load(art);
        fresh->prepare(problem->shape, problem->A, problem->B);
        return fresh;
      },
      recipe);
}

void record_measurement(CaseResult& r, const Measurement& m) {
  r.samples_s = m.samples_s;
  r.clocks_mhz = m.clocks_mhz;
  r.conditions = m.conditions;
  double flops = r.shape.flops(), bytes = 0;
  if (const triton::UserKernel* u = triton::find_user_kernel(r.kernel)) {  // the file's flops and bytes, if any
    flops = triton::user_kernel_work(*u, u->flops, r.shape, r.params);
    bytes = triton::user_kernel_work(*u, u->bytes, r.shape, r.params);
  }
  r.summary = summarize(r.samples_s, flops, bytes);
}

std::set<std::string> precompile(const Sweep& sweep, CompileCache& cache, int jobs, Log& log) {
  std::vector<std::pair<const PlannedCase*, std::string>> builds;  // case, cache key
  std::set<std::string> seen, fresh;
  for (const auto& pc : sweep.cases) {
    if (pc.skip_reason) continue;
    std::string key = cache.key(compile_request(pc));
    if (seen.insert(key).second) builds.emplace_back(&pc, std::move(key));
  }
  const int n = std::min<int>(jobs > 0 ? jobs : std::max(1, int(std::thread::hardware_concurrency())),
                              int(builds.size()));
  if (n <= 1) return fresh;  // one build at a time is what the case loop does anyway
  std::atomic<size_t> next{0};
  std::atomic<int> done{0};
  std::mutex mu;
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t i = next++; i < builds.size(); i = next++) {
      try {
        const auto& [pc, key] = builds[i];
        if (!cache.compile(backend_for(*pc->toolchain), compile_request(*pc)).cache_hit) {
          std::lock_guard<std::mutex> lock(mu);
          fresh.insert(key);
        }
      } catch (const Error&) {
        // reported by the case itself, which compiles again
      }
      ++done;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  log.line(fmt::format("compiled {} builds ({} new) on {} threads in {:.1f} s", done.load(), fresh.size(), n,
                       seconds_since(t0)));
  return fresh;
}

RunResults run_sweep(const Sweep& sweep, const std::string& results_path, Log& log, int jobs) {
  RunResults res;
  res.kind = "sweep";
  res.name = sweep.name;
  res.sweep_file = sweep.file;
  res.started = now_iso8601();
  res.environment = describe_environment();
  res.environment["toolchains"] = nlohmann::json::array();
  for (const auto& t : sweep.toolchains)
    res.environment["toolchains"].push_back({{"name", t->name},
                                             {"backend", t->backend},
                                             {"kind", t->kind},
                                             {"compiler", t->compiler},
                                             {"flags", t->flags},
                                             {"target", t->target},
                                             {"identity", t->identity},
                                             {"version", t->version_text},
                                             {"origin", t->origin}});
  nlohmann::json backends_json = nlohmann::json::object();
  for (auto* b : backends()) {
    auto av = b->available();
    backends_json[b->name()] = av.ok ? "available" : "unavailable: " + av.reason;
  }
  res.environment["backends"] = backends_json;

  CompileCache cache;
  ReferenceCache refs;
  const std::set<std::string> fresh = precompile(sweep, cache, jobs, log);
  auto t0 = std::chrono::steady_clock::now();
  const size_t n = sweep.cases.size();
  for (size_t i = 0; i < n; ++i) {
    const auto& pc = sweep.cases[i];
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string eta = i ? fmt::format(" ETA {:.0f}s", el / double(i) * double(n - i)) : "";
    log.status(fmt::format("[{}/{}]{} {}", i + 1, n, eta, pc.c.id()));
    PreparedCase prep = prepare_case(pc, cache, refs);
    if (prep.result.cache_hit && !fresh.empty() && fresh.count(cache.key(compile_request(pc))))
      prep.result.cache_hit = false;
    if (prep.ready()) {
      try {
        const auto t_m = std::chrono::steady_clock::now();
        auto m = measure_interleaved({prep.exe.get()}, pc.measure);
        prep.result.measure_s = seconds_since(t_m);
        record_measurement(prep.result, m[0]);
      } catch (const Error& e) {
        prep.result.status = CaseStatus::failed;
        prep.result.reason = fmt::format("measurement failed: {}", e.what());
      }
    }
    res.cases.push_back(std::move(prep.result));
    res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.finished = now_iso8601();
    if (!results_path.empty()) save_results(res, results_path);
  }
  log.status("");
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.finished = now_iso8601();
  if (!results_path.empty()) save_results(res, results_path);
  return res;
}

}  // namespace kb
