// A wall-clock model of a bisection whose builds take most of the time (an LLVM or Triton build: tens of
// minutes; a measurement: minutes at most). It replays what the real loop asked for (run_bisection's
// Outcome on a simulated history: the rounds, the commits each round probed, whether it measured) and
// prices it:
//  - sequential (`parallel: 1` on one node) and today's `parallel: P` on one node: the builds of a round
//    share the node's cores, so a round that builds k commits takes k·B_t, then its measurement;
//  - B builders (a build partition): at every decision the builders take, in order, the round's own
//    commits, then the commits the next rounds can need (the picks of every sub-range the current picks
//    can leave, breadth first, as the strategy would pick them with the build failures seen so far; up to
//    max_depth levels when the round waits for a build, one level when its builds are ready); a build a
//    decision makes useless (outside the range still open) is cancelled at once, and a needed commit with
//    no free builder cancels the lowest-priority speculative build.
// The decisions are the loop's, replayed in order: speculation changes when a build is ready, never what
// is decided or which commit is named (the accuracy is the sequential run's by construction).
#pragma once
#include <vector>

#include "bisect/bisector.h"

namespace kb::bisect {

struct WallConfig {
  double build_min = 45;    // B_t: one toolchain build (a failing build takes as long)
  double measure_min = 2;   // one measurement (a round's, reproduce's, a verify's)
  int builders = 1;         // build slots
  bool cluster = false;     // false: one node (k builds of a round take k·B_t); true: `builders` slots with speculation
  // Speculation: levels of hypothetical rounds below a round that waits for a build; a round whose builds
  // are ready speculates one level (deeper builds started there are mostly cancelled minutes later).
  int max_depth = 3;
};

// One round the loop ran: the range searched, the commits it probed (picks), which of them were built
// there for the first time (needs), and whether it measured. Round 0 is the reproduction (good and bad);
// verifications come last, one round each (needs empty).
struct WallRound {
  int lo = 0, hi = 0;
  std::vector<int> picks, needs;
  bool measured = false;
};
std::vector<WallRound> wall_trace(const Outcome& o, int n);

struct WallResult {
  double wall_min = 0;      // to the verdict
  int builds_started = 0;   // every build started (speculative ones included)
  int builds_cancelled = 0;
  int builds_needed = 0;    // builds the loop used (== Outcome::builds); a finished build is never repeated
};

// Prices a trace. build_fails: per commit (the history's), what a finished speculative build reveals.
// workers: the loop's `parallel` (picks per round) for the hypothetical rounds.
WallResult wall_clock(const std::vector<WallRound>& trace, int workers, const std::vector<bool>& build_fails,
                      const WallConfig& w);

}  // namespace kb::bisect
