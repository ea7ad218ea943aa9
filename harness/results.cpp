#include "harness/results.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json_read.h"
#include "core/process.h"
#include "core/text.h"
#include "stats/stats.h"

namespace kb {

using json = nlohmann::json;

std::string to_string(CaseStatus s) {
  switch (s) {
    case CaseStatus::ok: return "ok";
    case CaseStatus::skipped: return "skipped";
    case CaseStatus::incorrect: return "incorrect";
    case CaseStatus::failed: return "failed";
  }
  return "?";
}

CaseStatus parse_case_status(const std::string& s) {
  if (s == "ok") return CaseStatus::ok;
  if (s == "skipped") return CaseStatus::skipped;
  if (s == "incorrect") return CaseStatus::incorrect;
  if (s == "failed") return CaseStatus::failed;
  throw InputError(fmt::format("unknown case status '{}'", s));
}

Summary summarize(const std::vector<double>& xs, double flops, double bytes) {
  Summary s;
  s.samples = int64_t(xs.size());
  if (xs.empty()) return s;
  const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  s.min_s = *lo;
  s.max_s = *hi;
  s.median_s = stats::median(xs);
  s.mean_s = stats::mean(xs);
  s.stddev_s = stats::stddev(xs);
  s.noise = s.mean_s > 0 ? s.stddev_s / s.mean_s : 0;
  // Robust CI of the median: kMadToSigma * MAD estimates sigma without letting outliers dominate; the
  // median's standard error is about kMedianSe * sigma / sqrt(n) for near-normal data.
  const double n = double(xs.size());
  const double sigma = stats::kMadToSigma * stats::mad(xs);
  s.ci_rel = (n > 1 && s.median_s > 0) ? 1.96 * stats::kMedianSe * sigma / std::sqrt(n) / s.median_s : 1.0;
  s.tflops = (flops > 0 && s.median_s > 0) ? flops / s.median_s / 1e12 : 0;
  s.gbps = (bytes > 0 && s.median_s > 0) ? bytes / s.median_s / 1e9 : 0;
  return s;
}

std::string CaseResult::key() const {
  return fmt::format("{}/{}[{}]/{}/{}", backend, kernel, params.str(), to_string(dtype), shape.str());
}

std::string CaseResult::id() const { return key() + "/" + toolchain; }

namespace {

// Reads a field with a clear error naming it.
template <class T>
T field(const json& j, const char* name, const std::string& ctx) {
  if (!j.contains(name)) throw InputError(fmt::format("{}: missing field '{}'", ctx, name));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return json_int<T>(j.at(name), fmt::format("{}: field '{}'", ctx, name));
  try {
    return j.at(name).get<T>();
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: field '{}' has the wrong type ({})", ctx, name, j.at(name).dump()));
  }
}

}  // namespace

json to_json(const MeasureConditions& m) {
  return {{"mode", m.mode},
          {"clock", m.clock},
          {"batch", m.batch},
          {"warmup_s", m.warmup_s},
          {"warmup_runs", m.warmup_runs},
          {"noise_target", m.noise_target},
          {"min_samples", m.min_samples},
          {"min_time_s", m.min_time_s},
          {"max_time_s", m.max_time_s},
          {"max_samples", m.max_samples},
          {"stop_reason", m.stop_reason},
          {"discarded_throttled", m.discarded_throttled},
          {"interleaved", m.interleaved},
          {"group", m.group}};
}

MeasureConditions conditions_from_json(const json& m, const std::string& ctx) {
  MeasureConditions d;
  d.mode = m.value("mode", "hot");
  d.clock = m.value("clock", "");
  d.batch = json_int_or<int>(m, "batch", 1, ctx);
  d.warmup_s = m.value("warmup_s", 0.0);
  d.warmup_runs = json_int_or<int>(m, "warmup_runs", 0, ctx);
  d.noise_target = m.value("noise_target", 0.005);
  d.min_samples = json_int_or<int>(m, "min_samples", 0, ctx);
  d.min_time_s = m.value("min_time_s", 0.0);
  d.max_time_s = m.value("max_time_s", 0.0);
  d.max_samples = json_int_or<int>(m, "max_samples", 0, ctx);
  d.stop_reason = m.value("stop_reason", "");
  d.discarded_throttled = json_int_or<int>(m, "discarded_throttled", 0, ctx);
  d.interleaved = m.value("interleaved", false);
  d.group = m.value("group", "");
  return d;
}

json to_json(const CaseResult& c) {
  json j;
  j["kernel"] = c.kernel;
  j["backend"] = c.backend;
  j["params"] = params_to_json(c.params);
  j["shape"] = {{"M", c.shape.M}, {"N", c.shape.N}, {"K", c.shape.K}};
  if (!c.shape.label.empty()) {  // a user kernel's named shape
    j["shape"]["label"] = c.shape.label;
    j["shape"]["values"] = c.shape.values;
  }
  j["dtype"] = to_string(c.dtype);
  j["toolchain"] = {{"name", c.toolchain}, {"identity", c.toolchain_identity}, {"target", c.target}};
  j["tier"] = c.tier;
  j["status"] = to_string(c.status);
  j["reason"] = c.reason;
  if (c.has_static) {
    json s = {{"code_bytes", c.code_bytes}, {"code_hash", c.code_hash}, {"compile_s", c.compile_s},
              {"cache_hit", c.cache_hit}};
    for (const auto& [k, v] : c.metrics) s[k] = v;
    j["static"] = s;
  } else {
    j["static"] = nullptr;
  }
  if (c.checked) {
    j["correctness"] = {{"max_error", c.max_error}, {"tolerance", c.tolerance}};
    if (c.check_s > 0) j["correctness"]["seconds"] = c.check_s;
    if (!c.check_method.empty()) {
      j["correctness"]["method"] = c.check_method;
      j["correctness"]["elements_checked"] = c.check_elements;
      if (c.check_method == "fast") j["correctness"]["projection_ratio"] = c.projection_ratio;
    }
  }
  j["samples_s"] = c.samples_s;
  if (c.measure_s > 0) j["measure_s"] = c.measure_s;
  if (!c.clocks_mhz.empty()) j["clocks_mhz"] = c.clocks_mhz;
  j["conditions"] = to_json(c.conditions);
  const auto& s = c.summary;
  j["summary"] = {{"samples", s.samples}, {"median_s", s.median_s}, {"mean_s", s.mean_s},
                  {"stddev_s", s.stddev_s}, {"min_s", s.min_s},       {"max_s", s.max_s},
                  {"noise", s.noise},       {"ci_rel", s.ci_rel},     {"tflops", s.tflops}};
  if (s.gbps > 0) j["summary"]["gbps"] = s.gbps;
  return j;
}

namespace {

CaseResult read_case(const json& j) {
  CaseResult c;
  std::string ctx = "case";
  c.kernel = field<std::string>(j, "kernel", ctx);
  ctx = "case " + c.kernel;
  c.backend = field<std::string>(j, "backend", ctx);
  if (j.contains("params") && j["params"].is_object()) {
    try {
      c.params = params_from_json(j["params"]);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", ctx, e.what()));
    }
  }
  json shape = field<json>(j, "shape", ctx);
  c.shape = {field<int64_t>(shape, "M", ctx + " shape"), field<int64_t>(shape, "N", ctx + " shape"),
             field<int64_t>(shape, "K", ctx + " shape"), {}, {}};
  if (shape.contains("label")) {
    c.shape.label = field<std::string>(shape, "label", ctx + " shape");
    if (shape.contains("values") && shape["values"].is_object())
      for (const auto& [k, v] : shape["values"].items())
        if (v.is_number_integer()) c.shape.values[k] = v.get<int64_t>();
  }
  c.dtype = parse_dtype(field<std::string>(j, "dtype", ctx));
  json tc = field<json>(j, "toolchain", ctx);
  c.toolchain = field<std::string>(tc, "name", ctx + " toolchain");
  c.toolchain_identity = tc.value("identity", "");
  c.target = tc.value("target", "");
  c.tier = j.value("tier", "l1");
  c.status = parse_case_status(field<std::string>(j, "status", ctx));
  c.reason = j.value("reason", "");
  if (j.contains("static") && j["static"].is_object()) {
    c.has_static = true;
    for (auto it = j["static"].begin(); it != j["static"].end(); ++it) {
      const std::string& k = it.key();
      if (k == "code_bytes") c.code_bytes = json_int<int64_t>(*it, ctx + " static.code_bytes");
      else if (k == "code_hash") c.code_hash = it->get<std::string>();
      else if (k == "compile_s") c.compile_s = it->get<double>();
      else if (k == "cache_hit") c.cache_hit = it->get<bool>();
      else if (it->is_number()) c.metrics[k] = it->get<double>();
    }
  }
  if (j.contains("correctness") && j["correctness"].is_object()) {
    c.checked = true;
    c.max_error = j["correctness"].value("max_error", 0.0);
    c.tolerance = j["correctness"].value("tolerance", 0.0);
    c.check_method = j["correctness"].value("method", "");
    c.check_elements = json_int_or<int64_t>(j["correctness"], "elements_checked", 0, ctx + " correctness");
    c.projection_ratio = j["correctness"].value("projection_ratio", 0.0);
    c.check_s = j["correctness"].value("seconds", 0.0);
  }
  if (j.contains("samples_s")) c.samples_s = field<std::vector<double>>(j, "samples_s", ctx);
  if (j.contains("measure_s")) c.measure_s = field<double>(j, "measure_s", ctx);
  if (j.contains("clocks_mhz")) c.clocks_mhz = field<std::vector<double>>(j, "clocks_mhz", ctx);
  if (j.contains("conditions") && j["conditions"].is_object())
    c.conditions = conditions_from_json(j["conditions"], ctx + " conditions");
  c.summary = summarize(c.samples_s, c.shape.flops());
  if (!c.shape.label.empty() && j.contains("summary") && j["summary"].is_object()) {
    // A labelled shape's work comes from its kernel's file (flops, bytes): kept as written.
    c.summary.tflops = j["summary"].value("tflops", 0.0);
    c.summary.gbps = j["summary"].value("gbps", 0.0);
  }
  return c;
}

// nlohmann's own errors (a field of the wrong type read with value(), get<>()) as bad input naming where.
template <class F>
auto json_input(const std::string& where, F&& read) {
  try {
    return read();
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace

CaseResult case_from_json(const json& j) {
  const bool named = j.is_object() && j.contains("kernel") && j["kernel"].is_string();
  return json_input(named ? "case " + j["kernel"].get<std::string>() : "case", [&] { return read_case(j); });
}

json to_json(const RunResults& r) {
  json j;
  j["schema"] = "kbisect-results-v1";
  j["kind"] = r.kind;
  j["name"] = r.name;
  j["sweep_file"] = r.sweep_file;
  j["started"] = r.started;
  j["finished"] = r.finished;
  j["wall_s"] = r.wall_s;
  j["environment"] = r.environment;
  j["cases"] = json::array();
  for (const auto& c : r.cases) j["cases"].push_back(to_json(c));
  if (!r.extra.is_null()) j["extra"] = r.extra;
  return j;
}

RunResults results_from_json(const json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    throw InputError(fmt::format("{}: not a kbisect results file (no 'cases' list)", origin));
  RunResults r;
  json_input(origin, [&] {
    r.kind = j.value("kind", "sweep");
    r.name = j.value("name", "");
    r.sweep_file = j.value("sweep_file", "");
    r.started = j.value("started", "");
    r.finished = j.value("finished", "");
    r.wall_s = j.value("wall_s", 0.0);
    r.environment = j.value("environment", json::object());
  });
  if (j.contains("extra")) r.extra = j["extra"];
  size_t i = 0;
  for (const auto& cj : j["cases"]) {
    try {
      r.cases.push_back(case_from_json(cj));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: cases[{}]: {}", origin, i, e.what()));
    }
    ++i;
  }
  return r;
}

RunResults load_results(const std::string& path) {
  std::string text = read_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: invalid JSON at byte {}: {}", path, e.byte, e.what()));
  }
  return results_from_json(j, path);
}

void save_results(const RunResults& r, const std::string& path) { write_file_atomic(path, to_json(r).dump(1) + "\n"); }

std::string now_iso8601() {
  return utc_time(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()), "%Y-%m-%dT%H:%M:%SZ");
}

json describe_environment() {
  json e;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  e["host"] = host;
  utsname u{};
  if (uname(&u) == 0) e["os"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      e["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  e["cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  std::string sha = KBISECT_CONFIGURE_SHA;
  try {
    RunOptions o;
    o.timeout_s = 10;
    auto r = run_process({"git", "-C", KBISECT_SOURCE_DIR, "rev-parse", "HEAD"}, o);
    if (r.ok()) sha = r.out.substr(0, r.out.find('\n'));
    auto d = run_process({"git", "-C", KBISECT_SOURCE_DIR, "status", "--porcelain", "--untracked-files=no"}, o);
    if (d.ok() && !d.out.empty()) sha += "-dirty";
  } catch (const Error&) {
  }
  e["kbisect_sha"] = sha;
  e["date"] = now_iso8601();
  return e;
}

}  // namespace kb
