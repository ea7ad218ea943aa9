// `kbisect presubmit CONFIG --base REV --change REV` (or --base-toolchain / --change-toolchain): what a compiler
// diff does to the kernels, spending device time only where code changed and value per device-second is highest.
//
//   1. toolchains   the provider's toolchain at each rev (presubmit/static_diff.h), or two at hand
//   2. compile      every case of the covered sweeps with both, in parallel, through the compile cache; the
//                   same code hash under both: unchanged, 0 measurements
//   3. static gate  every static metric that moved (before -> after), and the config's rules on them
//   4. choose       value per expected device-second, a 0/1 knapsack within the budget (presubmit/choice.h);
//                   what does not fit is deferred to trunk, with its value and cost
//   5. measure      the chosen cases: correctness first, then the interleaved A/B of `kbisect ab` with its
//                   sequential decision; a `worse` is measured once more, afresh, to confirm it
//   6. report       summary.md (a pull-request comment), junit.xml, presubmit.json, written atomically
// docs/presubmit.md is the user's guide.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "harness/ab.h"
#include "presubmit/choice.h"
#include "presubmit/config.h"
#include "presubmit/static_diff.h"

namespace kb::presubmit {

struct Options {
  std::string config_file;
  std::string base_rev, change_rev;                            // with the config's compiler section, or
  std::vector<std::string> base_toolchains, change_toolchains;  // pairs of toolchains, in order
  std::string out_dir = "kbisect-out/presubmit";                // reports; the provider's toolchains go under it
  int jobs = 0;                                                 // compile threads (0: one per core)
  Log* log = nullptr;
};

// What the presubmit found for one case.
struct CaseReport {
  StaticCase s;
  std::string device;          // "cpu" or "gpu": whose budget times it
  std::string not_timable;     // why it cannot be timed here (a GPU case on a machine without one); "" if it can
  // The choice (changed, timable cases).
  Candidate candidate;
  double value = 0;
  std::optional<Cost> cost;
  int history_points = 0;      // ok nightly points the history had for it
  enum class Choice { none, timed, deferred } choice = Choice::none;
  int round = 0;               // timed: the knapsack round that chose it (2, 3, ...: with what earlier rounds left)
  std::string deferred_why;
  // Correctness and timing.
  std::string check;           // "" (not prepared), "ok", or the status and reason of the side that is not
  bool incorrect = false;      // the change's build fails the correctness check where the base's passes
  std::optional<PairOutcome> ab, confirm;
  bool regression = false;     // a confirmed `worse` (or one the budget left no time to confirm: `unconfirmed`)
  bool unconfirmed = false;
  double spent_s = 0;          // device seconds spent on it: checks, pilot, A/B, confirmation
};
std::string to_string(CaseReport::Choice c);

struct Outcome {
  PresubmitConfig cfg;
  std::vector<ToolchainPair> pairs;
  StaticDiff diff;             // the sweeps the cases point into (CaseReport::s is moved out of diff.cases)
  std::vector<CaseReport> cases;
  double cpu_budget_s = 0, gpu_budget_s = 0, cpu_spent_s = 0, gpu_spent_s = 0;
  int measurements = 0;        // A/B measurements made (pilots, decisions, confirmations)
  std::vector<std::string> notes;
  std::string started, finished;
  double wall_s = 0;
  std::string summary_md, junit_xml, json_file;  // the reports' paths

  int count(StaticCase::State s) const;
  int regressions() const;
  int gate_failures() const;   // cases with a failed gate rule
  int broken() const;          // cases the change no longer compiles, or whose results it made incorrect
  bool failed() const { return regressions() + gate_failures() + broken() > 0; }
  std::string verdict_line() const;  // "presubmit: FAIL (...)" / "presubmit: pass (...)"
};

// Runs the whole presubmit. Throws InputError / EnvError for bad input or a missing environment; a failing
// diff is an Outcome with failed() true.
Outcome run_presubmit(const Options& opts);

// presubmit/report.cpp.
std::string render_markdown(const Outcome& o);
std::string render_junit(const Outcome& o);
nlohmann::json to_json(const Outcome& o);
// Writes summary.md, junit.xml and presubmit.json into dir (atomically) and sets their paths.
void write_reports(Outcome& o, const std::string& dir);

}  // namespace kb::presubmit
