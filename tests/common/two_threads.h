// Runs job(0) .. job(n - 1) on two threads (this one and one more), the machine's two cores: the
// backend tests compile many kernels this way. Each job writes only its own result slot.
#pragma once
#include <cstddef>
#include <functional>
#include <future>
#include <mutex>

namespace kb::test {

inline void on_two_threads(size_t n, const std::function<void(size_t)>& job) {
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
  auto other = std::async(std::launch::async, worker);
  worker();
  other.get();
}

}  // namespace kb::test
