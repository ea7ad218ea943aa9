// `kbisect explain`: which LLVM pass first treats a kernel differently under two clang-based toolchains
// Both compile the case with `-mllvm -print-changed=quiet` (every pass that changed the IR
// dumps the changed function/module to stderr as "*** IR Dump After <Pass> on <unit> ***"). The dumps are
// split per pass execution, keyed by (pass, unit, occurrence), aligned by a longest common subsequence of
// the keys, and walked in order: the first aligned pair whose normalized text differs, or a pass that
// changed the unit under one toolchain only, is reported with a short unified diff. Normalization (only
// what differs trivially between compiler versions): metadata lines (`!0 = ...`), attribute group lines
// (`attributes #0 = ...`), metadata attachments (`, !tbaa !5`), attribute group references (`#0`),
// `; ModuleID`/`source_filename` lines and comments; value names are kept. The static metric diff comes
// from the same compiles (code bytes and the backend's metrics).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kb {

struct IrDump {
  std::string pass, unit;
  int occurrence = 0;  // how many earlier dumps had the same (pass, unit)
  std::string text;    // the dump body (without the header line)
};

// A text's lines, without their newlines.
std::vector<std::string> lines_of(const std::string& s);
// Splits -print-changed / -print-after-all stderr into per-pass dumps (other lines are dropped).
std::vector<IrDump> split_ir_dumps(const std::string& log);
// The normalization described above.
std::string normalize_ir(const std::string& text);
// A unified diff (---/+++ headers, @@ hunks, `context` lines around changes) of two texts, by a longest
// common subsequence of lines; at most `max_lines` lines of output (then "... N more lines").
std::string unified_diff(const std::string& a, const std::string& b, const std::string& name_a,
                         const std::string& name_b, int context = 3, int max_lines = 60);

struct ExplainOptions {
  std::string sweep_file;              // or the bisection's cases (bisect_dir)
  std::vector<std::string> toolchains; // A, B (names or files)
  std::string filter;
  std::string bisect_dir, culprit;     // --bisect-dir WORKDIR --culprit SHA: parent's and culprit's toolchains
  int max_diff_lines = 60;
};

struct MetricDiff {
  std::string name;
  double a = 0, b = 0;
};

struct Explanation {
  std::string case_id, toolchain_a, toolchain_b;
  // differs | same-ir (every aligned dump equal after normalization)
  std::string verdict;
  int dumps_a = 0, dumps_b = 0;
  // The first difference in pipeline order.
  std::string pass, unit;
  int occurrence = 0;
  std::string kind;         // changed-differently | only-in-a | only-in-b
  bool input_equal = false; // the unit's previous dumps were equal (the pass itself diverged)
  std::string diff;
  // The first pass that diverged from equal input, when different from the first difference.
  std::string first_divergent_pass, first_divergent_unit;
  std::string divergent_diff;       // its diff
  std::vector<MetricDiff> metrics;  // static metrics that differ (code_bytes first)
  std::string code_hash_a, code_hash_b;
};

Explanation run_explain(const ExplainOptions& opts);

nlohmann::json explanation_to_json(const Explanation& e);
std::string render_explanation(const Explanation& e);

}  // namespace kb
