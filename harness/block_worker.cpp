#include "harness/block_worker.h"

#include <malloc.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/cache.h"
#include "backends/cpu/cpu_backend.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json_read.h"
#include "core/process.h"

namespace kb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kWorkerName = "kbisect-worker";
// The same warmup as a warm process's blocks get (bisect/lab.cpp). A new process is cold, but its start now
// does the cold part: every kernel runs once before `ready`, the warmup holds until the next worker is ready
// and warms up again after (measure_interleaved). Before those, 2 ms left the first round of 511 of 512
// blocks about 4x slow and a 10 ms floor was needed; with them, 2 ms gives blocks as quiet as 10 ms did
// (docs/statistics.md, "Quiet worker blocks"), and the warmups were most of a worker block's cost.
constexpr double kWorkerWarmupS = 0.002;
// How long a worker may take to load and prepare before it is left to say why when finished.
constexpr double kStartTimeoutS = 120;
// How long a worker's warmup holds for the next block's worker to start, at most: past it, it measures.
constexpr double kMaxHoldS = 2;

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
struct Request {
  json head;  // the JSON line, without the seed
  std::string arrays;
  uint64_t key = 0;  // of everything but the seed: which parked worker can measure it
  std::string with_seed(uint64_t seed) const {
    json h = head;
    h["seed"] = seed;
    return h.dump() + "\n" + arrays;
  }
};

Request make_request(const std::vector<ExecutableFactory>& make, const MeasureConfig& cfg, int rounds) {
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
                     {"mode", cfg.mode},
                     {"warmup_s", cfg.warmup_s},
                     {"min_sample_s", cfg.min_sample_s},
                     {"loads", loads},
                     {"arrays", sizes}};
  Request r;
  r.head = head;
  for (const auto* a : arrays) r.arrays.append(reinterpret_cast<const char*>(a->data()), a->size() * sizeof(float));
  r.key = std::hash<std::string>()(head.dump()) ^ (std::hash<std::string>()(r.arrays) * 0x9e3779b97f4a7c15ull);
  return r;
}

// A worker started ahead of its block: it reads its request, loads and prepares, runs every kernel once and
// waits for its go. Only its measuring is on the critical path.
struct Parked {
  uint64_t key = 0;
  std::unique_ptr<StartedProcess> proc;
};

std::mutex parked_mu;
Parked& parked_slot() {
  static Parked p;  // ended (its stdin closed) when this program exits
  return p;
}
BlockWorkerCounts counts;  // under parked_mu

// Starts a worker on `req` and waits until it is ready (loaded, prepared, every kernel run once). One that
// fails on the way is returned all the same: it says why when it is finished.
std::unique_ptr<StartedProcess> start_worker(const std::string& worker, const Request& req, uint64_t seed,
                                             double timeout_s) {
  RunOptions o;
  o.timeout_s = timeout_s;
  auto p = std::make_unique<StartedProcess>(std::vector<std::string>{worker}, o);
  {
    std::lock_guard<std::mutex> lock(parked_mu);
    ++counts.started;
  }
  if (p->write(req.with_seed(seed), kStartTimeoutS)) p->read_line(kStartTimeoutS);
  return p;
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
  const Request req = make_request(make, cfg, rounds);
  const double timeout_s = max_time_s + 120;  // the block stops itself at max_time_s; this is for a hung kernel
  std::unique_ptr<StartedProcess> w, other;
  {
    std::lock_guard<std::mutex> lock(parked_mu);
    Parked& slot = parked_slot();
    (slot.key == req.key ? w : other) = std::move(slot.proc);
    if (w) ++counts.used_ahead;
    if (other) ++counts.ended_unused;
  }
  other.reset();  // parked for another request (an earlier step's): ended
  if (!w) w = start_worker(worker, req, rng.next(), timeout_s);
  w->write(json{{"max_time_s", max_time_s}, {"hold", true}}.dump() + "\n", 10);
  // The next block's worker starts now, while this one warms up; this one's warmup holds until that one is
  // ready, so that no start runs beside a measured round and none is on the critical path. Unused (the step
  // ended), it is ended when a block of another request comes.
  auto next = start_worker(worker, req, rng.next(), timeout_s);
  w->write("measure\n", 10);
  {
    std::lock_guard<std::mutex> lock(parked_mu);
    parked_slot() = {req.key, std::move(next)};
  }
  const RunResult r = w->finish();
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

BlockWorkerCounts block_worker_counts() {
  std::lock_guard<std::mutex> lock(parked_mu);
  return counts;
}

int block_worker_main(std::istream& in, std::ostream& out, std::ostream& err, int in_fd) {
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
      r.shape = {s[0], s[1], s[2], {}, {}};
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
    const auto fresh = load_fresh(make, rng);
    // One run of each before the go: their first touches of code, operands and scratch (page faults, lazy
    // binding) happen here, while this worker waits, and not in its measured block.
    for (const auto& e : fresh) e->run(1);
    out << "ready\n";
    out.flush();
    std::string go;
    if (!std::getline(in, go)) return 0;  // no go: this block was not needed
    bool hold = false;
    try {
      const json g = json::parse(go);
      max_time_s = g.at("max_time_s").get<double>();
      hold = g.value("hold", false);
    } catch (const json::exception& e) {
      err << "kbisect-worker: bad go line: " << e.what() << "\n";
      return 2;
    }
    // Holding: the warmup goes on until the parent's next line (the next block's worker is ready), at most
    // kMaxHoldS; then that line is read.
    const double hold_until = now_s() + kMaxHoldS;
    auto released = [&] {
      if (in.rdbuf()->in_avail() > 0) return true;
      if (in_fd < 0) return true;
      pollfd p{in_fd, POLLIN, 0};
      return poll(&p, 1, 0) != 0;
    };
    const std::function<bool()> holding = [&] { return !released() && now_s() < hold_until; };
    auto ms = measure_loaded_block(fresh, cfg, rounds, max_time_s, rng, hold ? holding : nullptr);
    if (hold && released()) std::getline(in, go);  // the release line; past it, only the end of input
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
