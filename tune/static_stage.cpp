#include "tune/static_stage.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "backends/backend.h"
#include "core/error.h"

namespace kb::tune {

// Remarks are diagnostics only (LLVM's remark emitters never change a transformation), so the survivors
// are raced on these builds and only the winner is compiled again with the real toolchain, whose identity
// the table records; the two code hashes are compared (ShapeTune::build_check).
Toolchain remark_toolchain(const Toolchain& tc) {
  Toolchain r = tc;
  if (tc.backend != "cpu" || tc.kind != "clang") return r;
  r.name += "+regalloc-remarks";
  r.flags.push_back("-Rpass-missed=regalloc");
  r.identity.clear();
  resolve_identity(r);
  return r;
}

int compile_all(std::vector<Candidate>& cands, const KernelDecl& k, DType dt, const Shape& shape, const Toolchain& tc,
                int jobs, CompileCache& cache, std::vector<std::string>& logs, Log& log) {
  Backend& be = backend_for(tc);
  std::atomic<size_t> next{0};
  std::atomic<int> fresh{0}, done{0};
  logs.assign(cands.size(), "");
  auto work = [&] {
    for (size_t i = next++; i < cands.size(); i = next++) {
      if (!cands[i].status.empty()) continue;
      CompileRequest req{&k, cands[i].params, dt, &tc, shape, kernel_dir(), "", 300, size_t(1) << 20};
      try {
        Artifact a = cache.compile(be, req);
        cands[i].metrics = a.metrics;
        logs[i] = a.log;
        fresh += !a.cache_hit;
      } catch (const Error& e) {
        cands[i].status = "failed";
        cands[i].reason = fmt::format("compile failed: {}", e.what());
      }
      ++done;
    }
  };
  const int n = jobs > 0 ? jobs : std::max(1, int(std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  log.line(fmt::format("compiled {} candidates ({} new compiles)", done.load(), fresh.load()));
  return fresh;
}

void prune_static(std::vector<Candidate>& cands, const std::vector<std::string>& logs, const std::string& backend,
                  const PruneRule& rule, const DeviceFacts* device) {
  if (backend == "cpu") {
    std::vector<std::optional<LoopSpills>> spills(cands.size());
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].status.empty()) spills[i] = parse_regalloc_remarks(logs[i]);
    auto why = cpu_spill_reasons(spills, rule);
    for (size_t i = 0; i < cands.size(); ++i) {
      if (spills[i]) {
        cands[i].metrics["loop_spills"] = spills[i]->spills;
        cands[i].metrics["loop_reloads"] = spills[i]->reloads;
      }
      if (!why[i].empty()) cands[i].status = "pruned", cands[i].reason = why[i];
    }
    return;
  }
  for (auto& c : cands)
    if (c.status.empty())
      if (auto why = gpu_static_reason(c.metrics, rule, device); !why.empty()) c.status = "pruned", c.reason = why;
}

std::string estimate_all(std::vector<Candidate>& cands, const Shape& shape, DType dt, const DeviceFacts* device) {
  std::vector<size_t> alive;
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].estimate.reset();
    if (cands[i].status.empty()) alive.push_back(i);
  }
  std::string why;
  std::vector<GemmView> views;
  if (!device) why = "kbisect has no facts for this target";
  for (size_t i : alive) {
    if (!why.empty()) break;
    auto g = gemm_view(cands[i].params, shape, dt, cands[i].metrics, device->warp_size, &why);
    if (g) views.push_back(*g);
  }
  if (why.empty()) {
    for (size_t j = 0; j < alive.size(); ++j) cands[alive[j]].estimate = estimate_gemm(*device, views[j], dt, cands[alive[j]].metrics);
    return fmt::format("the static model with the {}'s facts ({} {}, {:.0f} TFLOP/s, {:.2f} TB/s)", device->device,
                       device->sms, device->amd ? "CUs" : "SMs", device->flops(dt) * 1e-12,
                       device->hbm_bytes_per_s * 1e-12);
  }
  for (size_t i : alive) {
    Estimate e;
    e.note = why;
    e.score = generic_gpu_score(cands[i].metrics);
    cands[i].estimate = e;
  }
  return "a generic order (occupancy, registers, spills): " + why;
}

std::vector<size_t> model_order(const std::vector<Candidate>& cands, std::vector<size_t> which) {
  std::stable_sort(which.begin(), which.end(), [&](size_t a, size_t b) {
    const auto &ea = cands[a].estimate, &eb = cands[b].estimate;
    if (bool(ea) != bool(eb)) return bool(ea);
    return ea && ranks_before(*ea, *eb);
  });
  return which;
}

void rank_static(ShapeTune& st) {
  std::vector<size_t> alive;
  for (size_t i = 0; i < st.candidates.size(); ++i)
    if (st.candidates[i].status.empty()) alive.push_back(i);
  alive = model_order(st.candidates, alive);
  for (size_t r = 0; r < alive.size(); ++r) {
    st.candidates[alive[r]].status = "ranked";
    st.candidates[alive[r]].reason = fmt::format("static rank {} of {} (not measured: {})", r + 1, alive.size(),
                                                 st.static_only_reason);
  }
  if (!alive.empty()) st.winner = alive.front();
}

}  // namespace kb::tune
