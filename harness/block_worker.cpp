#include "harness/block_worker.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/cache.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json_read.h"
#include "core/process.h"

namespace kb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kWorkerName = "kbisect-worker";
// Measured on a Zen 5 VM (bisect blocks of 4 rounds of a 0.4 ms kernel, 512 blocks): with the 2 ms warmup
// a warm process gets, the first round of 511 of 512 worker blocks ran about 4x slow and the second of 465;
// with 10 ms, 2 of 512 and 4 of 512, as in one process (9 and 4).
constexpr double kWorkerWarmupS = 0.01;

bool executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

json measurement_to_json(const Measurement& m) {
  return {{"samples_s", m.samples_s},
          {"clocks_mhz", m.clocks_mhz},
          {"placements", m.placements},
          {"conditions", to_json(m.conditions)}};
}

Measurement measurement_from_json(const json& j, const std::string& ctx) {
  Measurement m;
  m.samples_s = j.at("samples_s").get<std::vector<double>>();
  m.clocks_mhz = j.at("clocks_mhz").get<std::vector<double>>();
  m.placements = j.at("placements").get<std::vector<std::string>>();
  m.conditions = conditions_from_json(j.at("conditions"), ctx);
  return m;
}

// The request: a JSON line, then each distinct input array as raw float32, in the order "arrays" lists them.
std::string make_request(const std::vector<ExecutableFactory>& make, const MeasureConfig& cfg, int rounds,
                         double max_time_s, uint64_t seed) {
  std::map<const std::vector<float>*, size_t> index;
  std::vector<const std::vector<float>*> arrays;
  auto array_of = [&](const std::shared_ptr<const std::vector<float>>& v) {
    auto [it, fresh] = index.emplace(v.get(), arrays.size());
    if (fresh) arrays.push_back(v.get());
    return it->second;
  };
  json loads = json::array();
  for (const auto& f : make) {
    const LoadRecipe& r = *f.recipe;
    loads.push_back({{"artifact", r.artifact},
                     {"shape", {r.shape.M, r.shape.N, r.shape.K}},
                     {"a", array_of(r.A)},
                     {"b", array_of(r.B)}});
  }
  json sizes = json::array();
  for (const auto* a : arrays) sizes.push_back(a->size());
  const json head = {{"rounds", rounds},
                     {"max_time_s", max_time_s},
                     {"seed", seed},
                     {"mode", cfg.mode},
                     {"warmup_s", cfg.warmup_s},
                     {"min_sample_s", cfg.min_sample_s},
                     {"loads", loads},
                     {"arrays", sizes}};
  std::string out = head.dump() + "\n";
  for (const auto* a : arrays) out.append(reinterpret_cast<const char*>(a->data()), a->size() * sizeof(float));
  return out;
}

}  // namespace

std::string block_worker_path() {
  if (const char* e = getenv("KBISECT_BLOCK_WORKER"); e && *e) {
    if (!executable_file(e)) throw InputError(fmt::format("KBISECT_BLOCK_WORKER={}: not an executable file", e));
    return e;
  }
  const std::string self = executable_path();
  const fs::path dir = fs::path(self).parent_path();
  if (!self.empty())
    for (const fs::path& p : {dir / kWorkerName, dir.parent_path() / kWorkerName})
      if (executable_file(p)) return p.string();
  throw InputError(fmt::format("placement 'process': no {} next to {} (build it, set KBISECT_BLOCK_WORKER to "
                               "its path, or measure with placement 'loads')",
                               kWorkerName, self.empty() ? "this program" : self));
}

std::vector<Measurement> measure_block_in_worker(const std::string& worker, const std::vector<ExecutableFactory>& make,
                                                 const MeasureConfig& cfg, int rounds, double max_time_s, Rng& rng) {
  for (const auto& f : make)
    if (!f.recipe) throw Error("internal: a block worker needs every load's recipe");
  RunOptions o;
  o.stdin_data = make_request(make, cfg, rounds, max_time_s, rng.next());
  o.timeout_s = max_time_s + 120;  // the block stops itself at max_time_s; this is for a hung kernel
  const RunResult r = run_process({worker}, o);
  if (!r.ok()) {
    std::string why = r.err;
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    if (const auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
    throw Error(fmt::format("block worker {} failed ({}){}", worker, r.status_text(), why.empty() ? "" : ": " + why));
  }
  try {
    const json j = json::parse(r.out);
    std::vector<Measurement> ms;
    for (const auto& m : j.at("measurements")) ms.push_back(measurement_from_json(m, "block worker answer"));
    if (!ms.empty() && ms.size() != make.size())
      throw Error(fmt::format("{} measurements for {} loads", ms.size(), make.size()));
    return ms;
  } catch (const json::exception& e) {
    throw Error(fmt::format("block worker {}: unreadable answer: {}", worker, e.what()));
  }
}

int block_worker_main(std::istream& in, std::ostream& out, std::ostream& err) {
  json head;
  std::vector<std::vector<float>> arrays;
  std::vector<LoadRecipe> loads;
  int rounds = 0;
  double max_time_s = 0;
  MeasureConfig cfg;
  uint64_t seed = 0;
  try {
    std::string line;
    if (!std::getline(in, line)) throw InputError("empty request");
    head = json::parse(line);
    rounds = json_int<int>(head.at("rounds"), "request.rounds");
    max_time_s = head.at("max_time_s").get<double>();
    seed = head.at("seed").get<uint64_t>();
    cfg.mode = head.at("mode").get<std::string>();
    // A new process is cold however warm its parent was: at least kWorkerWarmupS (docs/statistics.md).
    cfg.warmup_s = std::max(head.at("warmup_s").get<double>(), kWorkerWarmupS);
    cfg.min_sample_s = head.at("min_sample_s").get<double>();
    for (const auto& n : head.at("arrays")) {
      auto& a = arrays.emplace_back(n.get<size_t>());
      in.read(reinterpret_cast<char*>(a.data()), std::streamsize(a.size() * sizeof(float)));
      if (size_t(in.gcount()) != a.size() * sizeof(float))
        throw InputError(fmt::format("input array {} cut short", arrays.size() - 1));
    }
    for (const auto& l : head.at("loads")) {
      LoadRecipe r;
      r.artifact = l.at("artifact").get<Artifact>();
      const auto s = l.at("shape").get<std::vector<int64_t>>();
      if (s.size() != 3) throw InputError("shape must be [M, N, K]");
      r.shape = {s[0], s[1], s[2]};
      const size_t a = l.at("a").get<size_t>(), b = l.at("b").get<size_t>();
      if (a >= arrays.size() || b >= arrays.size()) throw InputError("input array index out of range");
      if (r.artifact.backend != "cpu")
        throw InputError(fmt::format("backend '{}' has no block worker", r.artifact.backend));
      r.A = std::shared_ptr<const std::vector<float>>(std::shared_ptr<void>(), &arrays[a]);
      r.B = std::shared_ptr<const std::vector<float>>(std::shared_ptr<void>(), &arrays[b]);
      loads.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    err << "kbisect-worker: bad request: " << e.what() << "\n";
    return 2;
  }
  try {
    cpu_skip_crash_probe(true);  // this process is the isolation
    // Allocations as in a long-running process, whose malloc has long raised its thresholds: a kernel's
    // scratch above 128 KiB would otherwise be mmap'd, or trimmed off the heap, and faulted in on every call.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    const auto backend = make_cpu_backend();
    std::vector<ExecutableFactory> make;
    for (const auto& r : loads)
      make.emplace_back([&backend, &r] {
        auto exe = backend->load(r.artifact);
        exe->prepare(r.shape, *r.A, *r.B);
        return exe;
      });
    Rng rng(seed);
    auto ms = measure_fresh_block(make, cfg, rounds, max_time_s, rng);
    json answer = {{"measurements", json::array()}};
    for (auto& m : ms) {
      for (auto& p : m.placements) p += fmt::format(" worker={}", getpid());  // which process measured it
      answer["measurements"].push_back(measurement_to_json(m));
    }
    out << answer.dump() << "\n";
    out.flush();
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return 1;
  }
}

}  // namespace kb
