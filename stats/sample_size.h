// How many samples the sequential paired decision (stats.h: SequentialPaired, what `ab`, `bisect` and
// `presubmit` decide with) needs to settle a change at its threshold, from the spread of what it looks at
// (log-ratios of pairs, or block medians of them). Used to price a measurement before it is made
// (presubmit/cost.h); docs/presubmit.md derives it.
#pragma once
#include <cstdint>

#include "stats/stats.h"

namespace kb::stats {

// The expected half-width of the one-sample Hodges-Lehmann CI of n log-ratios of standard deviation `sd`
// at confidence 1 - alpha_per_look: z · sd / sqrt(n · 3/π), z = Φ⁻¹(1 - alpha_per_look / 2) (3/π: the HL
// estimate's efficiency relative to the mean on normal data).
double hl_half_width(double sd, int64_t n, double alpha_per_look);

// The first planned look of `cfg` (min_n · 2^k below max_n, then max_n) at which that half-width is at most
// half the equivalence band b = log(1 + threshold), each look at confidence 1 - alpha/looks. There a change of
// exactly the threshold has its CI above 0 (worse) and no change has its CI inside (-b, b) (same): either is
// decided. With an expected `effect` (a log-ratio) larger than b, half of |effect| instead: its CI then stays
// clear of 0. A look too small for a finite signed-rank CI at its error rate (2 / 2^n > alpha/looks) is never
// the answer. When even max_n is too few, returns max_n and sets *reached (when given) to false.
int64_t samples_to_decide(double sd, const DecisionConfig& cfg, bool* reached = nullptr, double effect = 0);

}  // namespace kb::stats
