#include "bisect/simulate_wall.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "bisect/strategy.h"

namespace kb::bisect {

std::vector<WallRound> wall_trace(const Outcome& o, int n) {
  std::vector<WallRound> t;
  std::set<int> built;
  WallRound rep;
  rep.lo = 0;
  rep.hi = n - 1;
  rep.picks = rep.needs = {0, n - 1};
  rep.measured = o.reproduce && o.reproduce->measured;
  built = {0, n - 1};
  t.push_back(rep);
  for (size_t k = 0; k < o.steps.size();) {
    WallRound r;
    const int round = o.steps[k].round;
    r.lo = o.steps[k].seg_lo;
    r.hi = o.steps[k].seg_hi;
    for (; k < o.steps.size() && o.steps[k].round == round; ++k) {
      const Step& s = o.steps[k];
      r.picks.push_back(s.index);
      if (built.insert(s.index).second) r.needs.push_back(s.index);
      r.measured = r.measured || s.measured;
    }
    t.push_back(r);
  }
  for (const auto& c : o.culprits) {
    WallRound v;
    v.lo = std::max(0, c.index - 1);
    v.hi = c.index;
    v.measured = c.verify.measured;
    t.push_back(v);
  }
  return t;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The builders of the cluster model: a build per slot, B_t each, started and cancelled at decisions.
class Builders {
 public:
  Builders(const WallConfig& w, const std::vector<bool>& fails) : w_(w), fails_(fails) {}

  bool done(int c, double t) const {
    auto it = end_.find(c);
    return it != end_.end() && it->second <= t;
  }
  bool started(int c) const { return end_.count(c) > 0; }
  int running(double t) const {
    int k = 0;
    for (const auto& [c, e] : end_) k += e > t;
    return k;
  }
  void start(int c, double t) {
    end_[c] = t + w_.build_min;
    ++r_.builds_started;
  }
  void cancel(int c) {
    end_.erase(c);
    ++r_.builds_cancelled;
  }
  // Commits whose build finished by t and failed (what the speculation knows).
  std::set<int> failed_by(double t) const {
    std::set<int> f;
    for (const auto& [c, e] : end_)
      if (e <= t && fails_[size_t(c)]) f.insert(c);
    return f;
  }
  // Cancels the running builds outside [lo, hi] that `keep` does not hold.
  void cancel_useless(int lo, int hi, const std::vector<int>& keep, double t) {
    std::vector<int> drop;
    for (const auto& [c, e] : end_)
      if (e > t && (c < lo || c > hi) && std::find(keep.begin(), keep.end(), c) == keep.end()) drop.push_back(c);
    for (int c : drop) cancel(c);
  }
  // Starts the first not-yet-started commits of `desired` on free slots; a commit of `needs` with no free
  // slot cancels the running build that `desired` ranks lowest (or does not rank) among those not needed.
  void fill(const std::vector<int>& desired, const std::vector<int>& needs, double t) {
    for (int c : desired) {
      if (started(c)) continue;
      const bool need = std::find(needs.begin(), needs.end(), c) != needs.end();
      if (running(t) >= w_.builders && need) preempt(desired, needs, t);
      if (running(t) >= w_.builders) {
        if (need) continue;
        break;
      }
      start(c, t);
    }
  }
  // The next time a running build ends (inf when none runs).
  double next_end(double t) const {
    double n = kInf;
    for (const auto& [c, e] : end_)
      if (e > t) n = std::min(n, e);
    return n;
  }
  WallResult& result() { return r_; }

 private:
  void preempt(const std::vector<int>& desired, const std::vector<int>& needs, double t) {
    int victim = -1;
    size_t worst = 0;
    for (const auto& [c, e] : end_) {
      if (e <= t || std::find(needs.begin(), needs.end(), c) != needs.end()) continue;
      const size_t rank = size_t(std::find(desired.begin(), desired.end(), c) - desired.begin());
      if (victim < 0 || rank >= worst) victim = c, worst = rank;
    }
    if (victim >= 0) cancel(victim);
  }
  const WallConfig& w_;
  const std::vector<bool>& fails_;
  std::map<int, double> end_;  // commit -> when its (latest) build ends
  WallResult r_;
};

}  // namespace

WallResult wall_clock(const std::vector<WallRound>& trace, int workers, const std::vector<bool>& build_fails,
                      const WallConfig& w) {
  WallResult r;
  for (const auto& rd : trace) r.builds_needed += int(rd.needs.size());
  if (!w.cluster) {  // one node: the builds of a round share its cores
    double t = 0;
    for (const auto& rd : trace) t += double(rd.needs.size()) * w.build_min + (rd.measured ? w.measure_min : 0);
    r.wall_min = t;
    r.builds_started = r.builds_needed;
    return r;
  }
  Builders b(w, build_fails);
  double t = 0;
  for (const WallRound& rd : trace) {
    // The decision before this round: what lies outside its range is useless now.
    b.cancel_useless(rd.lo, rd.hi, rd.needs, t);
    std::vector<int> desired = rd.needs;
    // A round whose builds are all ready is decided within a measurement: speculating deep from it starts
    // builds the next decision, minutes later, mostly cancels. It speculates one level (its sub-ranges' picks).
    const bool ready_now = std::all_of(rd.needs.begin(), rd.needs.end(), [&](int c) { return b.done(c, t); });
    const int depth = ready_now ? std::min(1, w.max_depth) : w.max_depth;
    if (rd.hi - rd.lo >= 2)
      for (int c : speculation(rd.lo, rd.hi, rd.picks, workers, b.failed_by(t), w.builders * 2, depth))
        if (!b.done(c, t) && std::find(desired.begin(), desired.end(), c) == desired.end()) desired.push_back(c);
    b.fill(desired, rd.needs, t);
    // Wait for this round's own builds, starting more of the desired ones as slots free.
    auto ready = [&] {
      return std::all_of(rd.needs.begin(), rd.needs.end(), [&](int c) { return b.done(c, t); });
    };
    while (!ready()) {
      const double e = b.next_end(t);
      if (e == kInf) break;  // cannot happen: every need is started (preempting if it must)
      t = e;
      b.fill(desired, rd.needs, t);
    }
    if (rd.measured) t += w.measure_min;
  }
  r.wall_min = t;
  r.builds_started = b.result().builds_started;
  r.builds_cancelled = b.result().builds_cancelled;
  return r;
}

}  // namespace kb::bisect
