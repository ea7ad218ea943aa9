// Builds ahead of the bisection (builders: B, with scheduler: slurm): up to B toolchain builds in flight as
// Slurm jobs on the build partition. The loop says, before each round, which commits that round needs and
// which the rounds after it can need (bisect/strategy.h, speculation()), most urgent first, and which
// commits its decisions made useless (outside every range still searched); the pool keeps the first B
// wanted ones building and cancels (scancel) the useless builds in flight. A build the loop asks for and
// that is not in flight starts at once: with every builder busy, the speculative build ranked lowest (an
// unranked one first) is cancelled to make room. The pool never decides anything: the loop
// asks for each commit when it would without speculation, so only the moment a build is ready changes.
// A cancelled build leaves nothing cached (the provider builds it again if it is wanted later).
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/provider.h"

namespace kb::bisect {

class BuildPool {
 public:
  BuildPool(Provider& provider, int builders);
  // Cancels the builds still in flight and waits for them to end (finish()).
  ~BuildPool();
  BuildPool(const BuildPool&) = delete;
  BuildPool& operator=(const BuildPool&) = delete;

  // The commits the next round needs (`needs`) and those later rounds can need (`ahead`), each list most
  // urgent first, and those a decision made useless. Cancels the builds of `useless` in flight (unless
  // get() waits for one), then starts builds for the first wanted commits that are neither cached, building
  // nor built while fewer than `builders` are in flight. A build in flight that is neither wanted nor
  // useless (deeper speculation, still inside the range) goes on.
  void want(const std::vector<std::string>& needs, const std::vector<std::string>& ahead,
            const std::vector<std::string>& useless);
  // The toolchain at sha: the result of its build (waiting for it; starting it now if none is in flight).
  // Rethrows what the build threw (an environment error).
  ToolchainAtCommit get(const std::string& sha);
  // True when sha's toolchain is ready (cached, or built by the pool) without waiting.
  bool ready(const std::string& sha);
  // What happened since the last call, as journal events: build_submitted {sha, speculative} and
  // build_cancelled {sha, reason}, each with the seconds since the pool started ("t").
  std::vector<nlohmann::json> take_events();
  // Cancels every build in flight and waits until each has ended (its cancellation event then waits in
  // take_events()). The pool starts nothing more until the next want().
  void finish();

 private:
  struct Job {
    std::string sha;
    std::atomic<bool> cancel{false};
    bool done = false;
    bool needed = false;  // get() waits for it: never cancelled
    ToolchainAtCommit result;
    std::exception_ptr error;
  };
  // Under mu_.
  int in_flight() const;
  void start(const std::string& sha, bool needed, bool speculative);
  void cancel(Job& j);
  void event(nlohmann::json ev);

  Provider& provider_;
  const int builders_;
  const double t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;  // in flight, or done and not cancelled
  std::vector<std::string> rank_;                     // the latest want(): needs then ahead
  std::vector<std::thread> threads_;
  std::vector<nlohmann::json> events_;
};

}  // namespace kb::bisect
