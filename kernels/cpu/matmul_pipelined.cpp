// Producer/consumer GEMM: the CPU analogue of a warp-specialized GPU kernel.
//
// Roles. The calling thread is the producer: it packs the A/B panels of the next work item into a
// ring of STAGES slots. CONSUMERS consumer threads run the MRxNR micro-kernel on filled slots.
//
// Work items. Item t = (column panel j0, row group, depth slice k0), enumerated with k0 innermost so
// a consumer keeps accumulating into the same C block. A row group is CONSUMERS row blocks of BM rows;
// consumer c owns row block c of every group, so no two consumers ever write the same C element and
// each consumer applies the k slices of its block in order. A slot holds one packed B panel
// (BK x BN, shared by all consumers) and CONSUMERS packed A blocks (BM x BK, one per consumer).
//
// Hand-off (single producer, several consumers, one monotonic counter per writer):
//   producer: wait until every consumer has finished item t - STAGES (acquire on done[c]),
//             pack item t into slot t % STAGES, then filled.store(t + 1, release);
//   consumer: wait until filled > t (acquire), compute, then done[c].store(t + 1, release).
// Waiting spins briefly, then sleeps on a condition variable; a notifier takes the mutex after its
// store, so a waiter that checked the counter under the mutex cannot miss the wake-up.
// Threads are created and joined inside each call: nothing outlives kb_gemm, so the .so can be
// dlclose'd at any time.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "gemm_common.h"

#ifndef KB_STAGES
#define KB_STAGES 3
#endif
#ifndef KB_CONSUMERS
#define KB_CONSUMERS 1
#endif

namespace kbk {
namespace {

constexpr int64_t STAGES = KB_STAGES, CONSUMERS = KB_CONSUMERS;
static_assert(STAGES >= 2, "the ring needs at least two slots to overlap packing and compute");
static_assert(CONSUMERS >= 1, "at least one consumer");

// The iteration space, shared by producer and consumers so both enumerate the same items.
struct Plan {
  int64_t M, N, K;
  int64_t n_j, n_g, n_k;  // column panels, row groups, depth slices
  int64_t items() const { return n_j * n_g * n_k; }

  struct Item {
    int64_t j0, nc, g0, k0, kc;
  };
  Item item(int64_t t) const {
    const int64_t kk = t % n_k, g = (t / n_k) % n_g, j = t / (n_k * n_g);
    Item it;
    it.j0 = j * BN;
    it.nc = std::min(BN, N - it.j0);
    it.g0 = g * BM * CONSUMERS;
    it.k0 = kk * BK;
    it.kc = std::min(BK, K - it.k0);
    return it;
  }
  // Rows of consumer c's block in the group starting at g0 (0 when the group is short).
  int64_t rows(int64_t g0, int64_t c) const {
    const int64_t i0 = g0 + c * BM;
    return i0 < M ? std::min(BM, M - i0) : 0;
  }
};

// One slot of the ring: packed panels, 64-byte aligned inside one allocation for the whole ring.
constexpr int64_t kSlotB = BK * BN;              // floats
constexpr int64_t kSlotA = BM * BK;              // floats per consumer
constexpr int64_t kSlotFloats = kSlotB + CONSUMERS * kSlotA;

struct alignas(64) Counter {
  std::atomic<int64_t> v{0};
};

class Pipeline {
 public:
  Pipeline(const Plan& plan, const elem_t* A, const elem_t* B, float* C)
      : plan_(plan), A_(A), B_(B), C_(C), ring_(STAGES * round_up(kSlotFloats, 16)) {}

  // Runs the whole GEMM. Returns 0, or 3 if a consumer thread could not be started.
  int run() {
    std::vector<std::thread> consumers;
    consumers.reserve(size_t(CONSUMERS));
    try {
      for (int64_t c = 0; c < CONSUMERS; ++c) consumers.emplace_back([this, c] { consume(c); });
    } catch (const std::system_error&) {
      abort_.store(true, std::memory_order_release);
      notify();
      for (auto& t : consumers) t.join();
      return 3;
    }
    produce();
    for (auto& t : consumers) t.join();
    return 0;
  }

 private:
  float* slot(int64_t t) const { return ring_.data() + (t % STAGES) * round_up(kSlotFloats, 16); }

  void produce() {
    const int64_t n = plan_.items();
    for (int64_t t = 0; t < n; ++t) {
      // Slot t % STAGES last held item t - STAGES: every consumer must be done with it.
      if (t >= STAGES)
        for (int64_t c = 0; c < CONSUMERS; ++c) wait_until(done_[c].v, t - STAGES + 1);
      const Plan::Item it = plan_.item(t);
      float* s = slot(t);
      pack_b(B_, plan_.N, it.k0, it.j0, it.kc, it.nc, s);
      for (int64_t c = 0; c < CONSUMERS; ++c) {
        const int64_t mc = plan_.rows(it.g0, c);
        if (mc > 0) pack_a(A_, plan_.K, it.g0 + c * BM, it.k0, mc, it.kc, s + kSlotB + c * kSlotA);
      }
      filled_.v.store(t + 1, std::memory_order_release);
      notify();
    }
  }

  void consume(int64_t c) {
    const int64_t n = plan_.items();
    for (int64_t t = 0; t < n; ++t) {
      if (!wait_until(filled_.v, t + 1)) return;  // aborted
      const Plan::Item it = plan_.item(t);
      const int64_t mc = plan_.rows(it.g0, c);
      if (mc > 0) {
        const float* s = slot(t);
        block_multiply(s + kSlotB + c * kSlotA, s, C_, plan_.N, it.g0 + c * BM, it.j0, mc, it.nc, it.kc,
                       /*accumulate=*/it.k0 > 0);
      }
      done_[c].v.store(t + 1, std::memory_order_release);
      notify();
    }
  }

  // Waits until counter >= target (acquire). Returns false if the pipeline was aborted.
  bool wait_until(const std::atomic<int64_t>& counter, int64_t target) {
    for (int spin = 0; spin < 2000; ++spin) {
      if (counter.load(std::memory_order_acquire) >= target) return true;
      if (spin >= 64) std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] {
      return counter.load(std::memory_order_acquire) >= target || abort_.load(std::memory_order_acquire);
    });
    return counter.load(std::memory_order_acquire) >= target;
  }

  void notify() {
    { std::lock_guard<std::mutex> lk(mu_); }  // orders the store before any waiter's predicate check
    cv_.notify_all();
  }

  const Plan plan_;
  const elem_t* A_;
  const elem_t* B_;
  float* C_;
  FloatBuffer ring_;
  Counter filled_;
  Counter done_[CONSUMERS];
  std::atomic<bool> abort_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace
}  // namespace kbk

extern "C" int kb_gemm(const kb_gemm_args* args) {
  using namespace kbk;
  const int64_t M = args->M, N = args->N, K = args->K;
  if (M <= 0 || N <= 0 || K <= 0) return 1;
  Plan plan{M, N, K, round_up(N, BN) / BN, round_up(M, BM * CONSUMERS) / (BM * CONSUMERS), round_up(K, BK) / BK};
  try {
    Pipeline p(plan, static_cast<const elem_t*>(args->A), static_cast<const elem_t*>(args->B), args->C);
    return p.run();
  } catch (const std::bad_alloc&) {
    return 2;
  }
}
