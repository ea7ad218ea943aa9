// Measuring the changed cases a presubmit times: correctness of both builds first (harness/runner.h
// prepare_case), then the interleaved A/B in blocks of fresh loads with the sequential decision of
// `kbisect ab` (harness/ab.h). A case without history is priced by a pilot: a few blocks of the same A/B.
// A `worse` is measured once more from fresh loads; it stays a regression unless that says `same` or `better`.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "backends/cache.h"
#include "harness/reference.h"
#include "presubmit/presubmit.h"

namespace kb::presubmit {

class Lab {
 public:
  explicit Lab(CompileCache& cache) : cache_(cache) {}
  // Compiles (cache hits), loads and checks both builds of a changed case; false when it cannot be measured
  // (c.check says why; c.incorrect when the change's build fails the check and the base's passes).
  bool prepare(CaseReport& c);
  // A first short measurement (cfg.measure.pilot_blocks blocks) and the cost it predicts; nullopt when the
  // budget did not allow the pilot.
  std::optional<Cost> pilot(CaseReport& c, const PresubmitConfig& cfg, double budget_s);
  // The A/B to a decision within budget_s, and a `worse` confirmed within what is left of it.
  void measure(CaseReport& c, const PresubmitConfig& cfg, double budget_s);

 private:
  PairOutcome ab(const CaseReport& c, const PresubmitConfig& cfg, int min_blocks, int max_blocks, double budget_s,
                 uint64_t seed);
  CompileCache& cache_;
  ReferenceCache refs_;
  std::map<std::string, std::pair<ExecutableFactory, ExecutableFactory>> loads_;  // by case name: base, change
};

}  // namespace kb::presubmit
