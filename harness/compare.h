// Comparing two sets of timing samples case by case: our result files or Google Benchmark JSON with
// repetitions, matched by case key; per case a three-outcome verdict (stats/) with the effect
// and its CI; a geometric-mean row; console table, Markdown and JSON renderings (printers only render).
// `kbisect ab` builds the same Comparison from interleaved, paired measurements.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"
#include "stats/stats.h"

namespace kb {

// One side of a comparison: timing samples per case.
struct SampleEntry {
  std::string key;        // CaseResult::key() or Google Benchmark run_name
  std::string toolchain;  // empty for Google Benchmark files
  bool ok = true;
  std::string reason;     // why not ok (status + reason, or the benchmark's error message)
  std::vector<double> samples_s;
};

struct SampleSet {
  std::string origin;   // file path (for messages)
  std::string format;   // "kbisect" | "google-benchmark"
  std::vector<SampleEntry> entries;
};

// Reads a result file, detecting the format: ours (has "cases") or Google Benchmark (has
// "benchmarks"; entries with run_type "iteration" grouped by run_name, aggregates ignored, times
// converted from time_unit to seconds). `time_field` is "real_time" or "cpu_time" (GB files only).
// Throws InputError naming the file and field.
SampleSet load_sample_set(const std::string& path, const std::string& time_field = "real_time");
SampleSet sample_set_from_results(const RunResults& r, const std::string& origin);
SampleSet sample_set_from_google_benchmark(const nlohmann::json& j, const std::string& origin,
                                           const std::string& time_field = "real_time");

struct CompareOptions {
  double threshold = 0.005;   // relative (0.005 = 0.5%)
  double alpha = 0.05;
  bool fail_on_slower = true; // exit code 1 when any case is worse
};

struct CaseComparison {
  std::string key;             // the matching key (key, or key + "/" + toolchain)
  std::string base_toolchain, new_toolchain;
  bool compared = false;
  std::string reason;          // why not compared
  stats::Decision decision;    // when compared
  double base_median_s = 0, new_median_s = 0;
};

struct Comparison {
  std::string base_origin, new_origin;
  std::string method;            // "unpaired (Mann-Whitney U, Hodges-Lehmann + Moses CI)" / "paired ..."
  CompareOptions options;
  std::vector<CaseComparison> cases;
  bool has_geomean = false;
  stats::GeoMean geomean;
  stats::Verdict geomean_verdict = stats::Verdict::unsure;
  std::vector<std::string> notes;  // matching decisions worth telling ("matched on key+toolchain ...")

  int count(stats::Verdict v) const;
  bool fails() const;  // fail_on_slower and some case is worse (the command then exits 1)
};

// Matches entries by key (or key + toolchain when a side has several toolchains per key) and decides
// each matched pair with stats::decide_unpaired at the full alpha.
Comparison compare_sets(const SampleSet& base, const SampleSet& next, const CompareOptions& opts);

// Fills the geometric-mean row from the compared cases.
void finish_comparison(Comparison& c);

// Printers.
std::string render_table(const Comparison& c);     // console
std::string render_markdown(const Comparison& c);
nlohmann::json comparison_to_json(const Comparison& c);
nlohmann::json decision_to_json(const stats::Decision& d);

// "12.3 ms" style.
std::string format_seconds(double s);

}  // namespace kb
