// The exit codes of every kbisect command, in one place (README, "Exit codes"). Library code never picks
// one: it throws kb::Error with a kind, or returns an outcome that the command maps here.
#pragma once
#include "bisect/bisector.h"
#include "core/error.h"
#include "harness/compare.h"
#include "nightly/nightly.h"
#include "presubmit/presubmit.h"

namespace kb {

enum ExitCode : int {
  kExitOk = 0,
  kExitFound = 1,            // regression found (compare, ab, sweep with failed/incorrect cases), "bad" (check), alerts (nightly)
  kExitBadInput = 2,         // bad input: file, field or value; nightly: incomplete (a shard missing or failed)
  kExitEnvMissing = 3,       // environment missing: no device, no toolchain
  kExitNothingToBisect = 4,  // bisect: not reproduced or inconclusive
  kExitSkip = 125,           // check mode: skip this commit (git bisect run)
};

inline int exit_code_for(const Error& e) {
  return e.kind() == ErrorKind::environment ? kExitEnvMissing : kExitBadInput;
}

// compare / ab: 1 when --fail-on-slower and some case is worse.
inline int exit_code_for(const Comparison& c) { return c.fails() ? kExitFound : kExitOk; }

// bisect, by verdict (docs/bisect.md): 0 culprit (named and verified), 1 a regression that reproduces but
// was not pinned to a verified commit (ambiguous, budget-exhausted, unverified), 4 nothing to bisect
// (not-reproduced, inconclusive).
inline int exit_code_for(const bisect::Outcome& o) {
  if (o.verdict == "culprit") return kExitOk;
  if (o.verdict == "not-reproduced" || o.verdict == "inconclusive") return kExitNothingToBisect;
  return kExitFound;
}

// nightly: 0 no new alert, 1 new alerts, 2 incomplete (a shard missing or failed).
inline int exit_code_for(nightly::Outcome o) {
  switch (o) {
    case nightly::Outcome::quiet: return kExitOk;
    case nightly::Outcome::alerts: return kExitFound;
    case nightly::Outcome::incomplete: return kExitBadInput;
  }
  return kExitBadInput;
}

// presubmit: 1 on a confirmed regression, a failed static gate, or a case the change broke (no longer
// compiles, or incorrect); 0 otherwise.
inline int exit_code_for(const presubmit::Outcome& o) { return o.failed() ? kExitFound : kExitOk; }

}  // namespace kb
