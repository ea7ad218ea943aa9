// Runs job(0) .. job(n - 1) on several threads: the backend tests compile many kernels this way. Each
// job writes only its own result slot.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace kb::test {

// On `threads` threads: this one and threads - 1 more.
inline void on_threads(size_t n, unsigned threads, const std::function<void(size_t)>& job) {
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> l(mu);
        if (next == n) return;
        i = next++;
      }
      job(i);
    }
  };
  std::vector<std::future<void>> others;
  for (unsigned t = 1; t < threads; ++t) others.push_back(std::async(std::launch::async, worker));
  worker();
  for (auto& o : others) o.get();
}

// On two threads, the development machine's two cores.
inline void on_two_threads(size_t n, const std::function<void(size_t)>& job) { on_threads(n, 2, job); }

// On one thread per core, at least two: a GPU machine has many cores and a short lease.
inline void on_every_core(size_t n, const std::function<void(size_t)>& job) {
  on_threads(n, std::max(2u, std::thread::hardware_concurrency()), job);
}

}  // namespace kb::test
