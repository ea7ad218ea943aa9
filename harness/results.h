// Results of a run: one JSON document per run (environment + cases with raw samples). Measurement
// emits these records; printers (harness/printers.h) only render them.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"

namespace kb {

enum class CaseStatus { ok, skipped, incorrect, failed };
std::string to_string(CaseStatus s);
CaseStatus parse_case_status(const std::string& s);

// How samples were taken (kept with the samples, DESIGN rule 4).
struct MeasureConditions {
  std::string mode = "hot";      // hot | cold (caches evicted before every sample)
  std::string clock;             // "steady_clock", "cuda-events", ...
  int batch = 1;                 // executions per sample (sample = time per execution)
  double warmup_s = 0;           // time spent warming up
  int warmup_runs = 0;
  double noise_target = 0.005;
  int min_samples = 0;
  double min_time_s = 0, max_time_s = 0;
  int max_samples = 0;
  std::string stop_reason;       // "noise" | "max_time" | "max_samples" | "decided" | "budget"
  int discarded_throttled = 0;
  bool interleaved = false;      // measured in randomized blocks with other executables
  std::string group;             // cases measured together share a group id
};

struct Summary {
  int64_t samples = 0;
  double median_s = 0, mean_s = 0, stddev_s = 0, min_s = 0, max_s = 0;
  double noise = 0;      // stddev / mean
  double ci_rel = 0;     // relative half-width of the ~95% CI of the median (robust; used to stop)
  double tflops = 0;     // flops / median
  double gbps = 0;       // bytes / median (a user kernel that declares its bytes; else 0)
};

// Summary of raw samples (pure; flops may be 0).
Summary summarize(const std::vector<double>& samples_s, double flops, double bytes = 0);

struct CaseResult {
  std::string kernel, backend;
  Params params;
  Shape shape;
  DType dtype = DType::f32;
  std::string toolchain, toolchain_identity, target;
  std::string tier = "l1";
  CaseStatus status = CaseStatus::failed;
  std::string reason;  // why skipped / failed / incorrect

  // Static metrics (present when the compile succeeded, also for skipped cases of unavailable backends).
  bool has_static = false;
  std::string code_hash;
  int64_t code_bytes = 0;
  double compile_s = 0;
  bool cache_hit = false;
  std::map<std::string, double> metrics;  // registers, spills, vgprs, ...

  // Correctness (checked before timing).
  bool checked = false;
  double max_error = 0;  // max |c - ref| / (|A||B|)_ij
  double tolerance = 0;
  std::string check_method;     // "full" or "fast" (harness/check.h)
  int64_t check_elements = 0;   // elements compared exactly
  double projection_ratio = 0;  // fast: worst projection error / its bound
  double check_s = 0;           // wall time of the check: the reference (when built for this case) + compare

  // Timing.
  std::vector<double> samples_s;
  std::vector<double> clocks_mhz;  // per sample, when the backend reports it
  MeasureConditions conditions;
  double measure_s = 0;  // wall time of the measurement: warm-up, samples and what the loop spent between them
  Summary summary;

  // Matching key across runs: kernel, backend, params, shape, dtype (no toolchain).
  std::string key() const;
  std::string id() const;  // key + "/" + toolchain
};

struct RunResults {
  std::string kind = "sweep";  // sweep | ab
  std::string name;            // sweep name
  std::string sweep_file;
  std::string started, finished;  // ISO 8601 UTC
  double wall_s = 0;
  nlohmann::json environment;     // host, cpu, kbisect_sha, toolchains [{name, identity, ...}]
  std::vector<CaseResult> cases;
  nlohmann::json extra;           // command-specific additions (ab pairs, verdicts ...)
};

nlohmann::json to_json(const MeasureConditions& m);
// `ctx` names where the object was read (the file, the case) in an InputError.
MeasureConditions conditions_from_json(const nlohmann::json& m, const std::string& ctx);
nlohmann::json to_json(const CaseResult& c);
CaseResult case_from_json(const nlohmann::json& j);  // throws InputError naming the field
nlohmann::json to_json(const RunResults& r);
RunResults results_from_json(const nlohmann::json& j, const std::string& origin);
RunResults load_results(const std::string& path);           // throws InputError naming the file
void save_results(const RunResults& r, const std::string& path);  // atomic

// Environment of this process: host, cpu model, kernel, kbisect sha, time.
nlohmann::json describe_environment();
std::string now_iso8601();

}  // namespace kb
