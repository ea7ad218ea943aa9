#include "harness/tuned_table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"

namespace kb {

using nlohmann::json;

namespace {

constexpr const char* kFormat = "kbisect-tuned-table/1";

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "";
}

auto key_of(const TunedEntry& e) {
  return std::make_tuple(e.machine, e.backend, e.kernel, e.toolchain_identity, to_string(e.dtype), e.shape.M, e.shape.N,
                         e.shape.K);
}

json entry_to_json(const TunedEntry& e) {
  return json{{"machine", e.machine},   {"backend", e.backend},
              {"kernel", e.kernel},     {"toolchain", e.toolchain},
              {"toolchain_identity", e.toolchain_identity},
              {"dtype", to_string(e.dtype)}, {"shape", e.shape.str()},
              {"params", params_to_json(e.params)}, {"method", e.method},
              {"gain_pct", e.gain_pct}, {"gain_ci_pct", {e.gain_lo_pct, e.gain_hi_pct}},
              {"verdict", e.verdict},   {"tuned_at", e.tuned_at}};
}

TunedEntry entry_from_json(const json& j, const std::string& where) {
  auto str = [&](const char* f) {
    if (!j.contains(f) || !j[f].is_string()) throw InputError(fmt::format("{}: field '{}' must be a string", where, f));
    return j[f].get<std::string>();
  };
  TunedEntry e;
  e.machine = str("machine"), e.backend = str("backend"), e.kernel = str("kernel");
  e.toolchain = str("toolchain"), e.toolchain_identity = str("toolchain_identity");
  e.dtype = parse_dtype(str("dtype"));
  e.shape = parse_shape_text(str("shape"), where);
  if (!j.contains("params") || !j["params"].is_object())
    throw InputError(fmt::format("{}: field 'params' must be an object", where));
  e.params = params_from_json(j["params"]);
  e.method = j.value("method", "measured");
  e.gain_pct = j.value("gain_pct", 0.0);
  if (j.contains("gain_ci_pct") && j["gain_ci_pct"].is_array() && j["gain_ci_pct"].size() == 2)
    e.gain_lo_pct = j["gain_ci_pct"][0].get<double>(), e.gain_hi_pct = j["gain_ci_pct"][1].get<double>();
  e.verdict = j.value("verdict", "");
  e.tuned_at = j.value("tuned_at", "");
  return e;
}

double shape_distance(const Shape& a, const Shape& b) {
  auto d = [](int64_t x, int64_t y) { return std::abs(std::log(double(x) / double(y))); };
  return d(a.M, b.M) + d(a.N, b.N) + d(a.K, b.K);
}

}  // namespace

Shape parse_shape_text(const std::string& s, const std::string& where) {
  Shape sh;
  char x1 = 0, x2 = 0;
  long long m = 0, n = 0, k = 0;
  if (std::sscanf(s.c_str(), "%lld%c%lld%c%lld", &m, &x1, &n, &x2, &k) != 5 || x1 != 'x' || x2 != 'x' || m <= 0 ||
      n <= 0 || k <= 0)
    throw InputError(fmt::format("{}: shape '{}' must be MxNxK", where, s));
  sh.M = m, sh.N = n, sh.K = k;
  return sh;
}

CpuVectorInfo cpu_vector_info() {
  CpuVectorInfo c;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) c.f32_lanes = 16, c.vector_registers = 32, c.isa = "avx512f";
  else if (__builtin_cpu_supports("avx2")) c.f32_lanes = 8, c.isa = "avx2";
  else if (__builtin_cpu_supports("avx")) c.f32_lanes = 8, c.isa = "avx";
  else c.isa = "sse2";
#elif defined(__aarch64__)
  c.vector_registers = 32, c.isa = "neon";
#endif
  c.model = cpu_model();
  return c;
}

std::string machine_key(const Toolchain& tc) {
  if (tc.backend != "cpu") return fmt::format("{} {}", tc.backend, tc.target.empty() ? "default-target" : tc.target);
  CpuVectorInfo c = cpu_vector_info();
  return fmt::format("cpu {} {}", c.model.empty() ? "unknown-model" : c.model, c.isa);
}

TunedTable TunedTable::parse(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not JSON: {}", origin, e.what()));
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw InputError(fmt::format("{}: field 'format' must be \"{}\"", origin, kFormat));
  if (!j.contains("entries") || !j["entries"].is_array())
    throw InputError(fmt::format("{}: field 'entries' must be a list", origin));
  TunedTable t;
  for (size_t i = 0; i < j["entries"].size(); ++i)
    t.put(entry_from_json(j["entries"][i], fmt::format("{}: entries[{}]", origin, i)));
  return t;
}

TunedTable TunedTable::load(const std::string& path) {
  if (!file_exists(path)) return {};
  return parse(read_file(path), path);
}

std::string TunedTable::dump() const {
  json j{{"format", kFormat}, {"entries", json::array()}};
  for (const auto& e : entries_) j["entries"].push_back(entry_to_json(e));
  return j.dump(2) + "\n";
}

void TunedTable::save(const std::string& path) const { write_file_atomic(path, dump()); }

void TunedTable::put(const TunedEntry& e) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), e,
                             [](const TunedEntry& a, const TunedEntry& b) { return key_of(a) < key_of(b); });
  if (it != entries_.end() && key_of(*it) == key_of(e)) *it = e;
  else entries_.insert(it, e);
}

std::vector<TunedEntry> TunedTable::for_kernel(const std::string& machine, const std::string& backend,
                                               const std::string& kernel) const {
  std::vector<TunedEntry> out;
  for (const auto& e : entries_)
    if (e.machine == machine && e.backend == backend && e.kernel == kernel) out.push_back(e);
  return out;
}

TunedResolution TunedTable::resolve(const TunedQuery& q) const {
  TunedResolution r{"fallback", {}, std::nullopt, ""};
  const TunedEntry* best = nullptr;
  bool machine_seen = false, toolchain_seen = false;
  for (const auto& e : entries_) {
    if (e.machine != q.machine || e.backend != q.backend || e.kernel != q.kernel) continue;
    machine_seen = true;
    if (e.toolchain_identity != q.toolchain_identity) continue;
    toolchain_seen = true;
    if (e.dtype != q.dtype) continue;
    if (!best || shape_distance(e.shape, q.shape) < shape_distance(best->shape, q.shape)) best = &e;
  }
  if (!best) {
    r.reason = !machine_seen     ? fmt::format("no tuned entry for {}/{} on '{}'", q.backend, q.kernel, q.machine)
               : !toolchain_seen ? fmt::format("tuned entries for {}/{} are for other toolchain builds (identity {})",
                                               q.backend, q.kernel, q.toolchain_identity.substr(0, 12))
                                 : fmt::format("no tuned entry for {}/{} in {}", q.backend, q.kernel, to_string(q.dtype));
    return r;
  }
  r.entry = *best;
  r.params = best->params;
  const bool exact = best->shape.M == q.shape.M && best->shape.N == q.shape.N && best->shape.K == q.shape.K;
  r.how = exact ? "exact" : "nearest";
  if (!exact) r.reason = fmt::format("nearest tuned shape {} for {}", best->shape.str(), q.shape.str());
  return r;
}

std::string default_tuned_table_path() {
  const char* p = getenv("KBISECT_TUNED_TABLE");
  return p ? p : "";
}

}  // namespace kb
