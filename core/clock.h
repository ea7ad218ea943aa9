// The one monotonic clock kbisect times with (wall-clock budgets, measurement windows, compile times).
#pragma once
#include <chrono>

namespace kb {

// Seconds on std::chrono::steady_clock: only differences mean anything.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kb
