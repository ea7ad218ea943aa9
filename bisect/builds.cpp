#include "bisect/builds.h"

#include <algorithm>

#include "core/clock.h"

namespace kb::bisect {

using json = nlohmann::json;

BuildPool::BuildPool(Provider& provider, int builders)
    : provider_(provider), builders_(std::max(1, builders)), t0_(now_s()) {}

BuildPool::~BuildPool() { finish(); }

void BuildPool::finish() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank_.clear();
    for (auto& [sha, j] : jobs_)
      if (!j->done) j->cancel = true;
    threads.swap(threads_);
  }
  // With nothing ranked, an ending build starts no other: the threads taken here are all there are.
  for (auto& t : threads)
    if (t.joinable()) t.join();
}

int BuildPool::in_flight() const {
  int k = 0;
  for (const auto& [sha, j] : jobs_) k += !j->done && !j->cancel;
  return k;
}

void BuildPool::event(json ev) {
  ev["t"] = now_s() - t0_;
  events_.push_back(std::move(ev));
}

void BuildPool::start(const std::string& sha, bool needed, bool speculative) {
  auto j = std::make_shared<Job>();
  j->sha = sha;
  j->needed = needed;
  jobs_[sha] = j;
  event({{"ev", "build_submitted"}, {"sha", sha}, {"speculative", speculative}});
  threads_.emplace_back([this, j] {
    ToolchainAtCommit r;
    std::exception_ptr err;
    try {
      r = provider_.get(j->sha, &j->cancel);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (r.cancelled && !err) {
      event({{"ev", "build_cancelled"}, {"sha", j->sha}, {"reason", r.reason}});
      if (auto it = jobs_.find(j->sha); it != jobs_.end() && it->second == j) jobs_.erase(it);
    }
    j->result = std::move(r);  // a get() waiting for a cancelled build sees `cancelled` and starts it again
    j->error = err;
    j->done = true;
    // A builder is free: the next wanted commits start.
    std::vector<std::string> rank = rank_;
    for (const auto& s : rank) {
      if (in_flight() >= builders_) break;
      if (!jobs_.count(s) && !provider_.cached(s)) start(s, false, true);
    }
    cv_.notify_all();
  });
}

void BuildPool::cancel(Job& j) {
  if (!j.done && !j.needed) j.cancel = true;
}

void BuildPool::want(const std::vector<std::string>& needs, const std::vector<std::string>& ahead,
                     const std::vector<std::string>& useless) {
  std::lock_guard<std::mutex> lock(mu_);
  rank_ = needs;
  for (const auto& s : ahead)
    if (std::find(rank_.begin(), rank_.end(), s) == rank_.end()) rank_.push_back(s);
  for (const auto& s : useless)
    if (auto it = jobs_.find(s); it != jobs_.end()) cancel(*it->second);
  for (size_t i = 0; i < rank_.size() && in_flight() < builders_; ++i) {
    const std::string& s = rank_[i];
    if (jobs_.count(s) || provider_.cached(s)) continue;
    start(s, false, i >= needs.size());
  }
}

ToolchainAtCommit BuildPool::get(const std::string& sha) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = jobs_.find(sha);
    if (it == jobs_.end()) {
      if (provider_.cached(sha)) {
        lock.unlock();
        return provider_.get(sha);
      }
      // Needed now: never waits for a builder. With all of them busy, the speculative build ranked lowest
      // (or no longer ranked) makes room.
      if (in_flight() >= builders_) {
        Job* victim = nullptr;
        size_t worst = 0;
        for (auto& [s, j] : jobs_) {
          if (j->done || j->cancel || j->needed) continue;
          const size_t r = size_t(std::find(rank_.begin(), rank_.end(), s) - rank_.begin());
          if (!victim || r >= worst) victim = j.get(), worst = r;
        }
        if (victim) cancel(*victim);
      }
      start(sha, true, false);
      continue;
    }
    std::shared_ptr<Job> j = it->second;
    j->needed = j->needed || !j->cancel;
    cv_.wait(lock, [&] { return j->done; });
    if (j->result.cancelled && !j->error) continue;  // it was being cancelled: build it again
    if (j->error) std::rethrow_exception(j->error);
    return j->result;
  }
}

bool BuildPool::ready(const std::string& sha) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(sha);
  if (it != jobs_.end()) return it->second->done;
  return provider_.cached(sha);
}

std::vector<json> BuildPool::take_events() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.swap(events_);
  return out;
}

}  // namespace kb::bisect
