#include "backends/cpu/placement.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"

namespace kb {

std::string Placement::str() const {
  return fmt::format("entry={:#x} A={:#x} B={:#x} C={:#x} heap={:#x}", entry, a, b, c, heap);
}

uint64_t placement_draw(uint64_t n) {
  static std::mutex mu;
  static Rng rng(std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32) ^ uint64_t(getpid()));
  std::lock_guard<std::mutex> lock(mu);
  return n == 0 ? 0 : rng.below(n);
}

uint64_t FreshDraws::draw() {
  std::lock_guard<std::mutex> lock(mu_);
  if (used_.size() >= n_) used_.clear();
  for (;;) {
    const uint64_t v = placement_draw(n_);
    if (used_.insert(v).second) return v;
  }
}

size_t page_bytes() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

AddressGap::AddressGap(size_t bytes) : len_(bytes) {
  void* m = mmap(nullptr, len_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw EnvError(fmt::format("reserving {} bytes failed: {}", len_, strerror(errno)));
  base_ = m;
}

AddressGap::AddressGap(void* at, size_t bytes) {
  void* m = mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (m == MAP_FAILED || m != at) {
    if (m != MAP_FAILED) munmap(m, bytes);
    return;
  }
  base_ = m;
  len_ = bytes;
}

AddressGap::AddressGap(AddressGap&& o) noexcept : base_(o.base_), len_(o.len_) { o.base_ = nullptr; }

AddressGap& AddressGap::operator=(AddressGap&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, len_);
    base_ = o.base_;
    len_ = o.len_;
    o.base_ = nullptr;
  }
  return *this;
}

AddressGap::~AddressGap() {
  if (base_) munmap(base_, len_);
}

// Splits the region into [below][slot][above] by unmapping the slot: the region is one mapping, so its
// parts are owned as two AddressGaps made from its ends.
CodeGap::CodeGap(size_t slot_bytes, size_t max_pages) {
  const size_t page = page_bytes();
  const size_t slot = (slot_bytes + page - 1) / page * page;
  static FreshDraws skips(max_pages + 1);
  const size_t skip = page * size_t(skips.draw());
  const size_t region = slot + page * (max_pages + 1);
  void* m = mmap(nullptr, region, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw EnvError(fmt::format("reserving {} bytes failed: {}", region, strerror(errno)));
  const uintptr_t lo = uintptr_t(m), hi = lo + region;
  munmap(m, region);
  if (skip > 0) below_ = AddressGap(reinterpret_cast<void*>(lo), skip);
  if (region > skip + slot) above_ = AddressGap(reinterpret_cast<void*>(lo + skip + slot), region - skip - slot);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uintptr_t prev_end = 0;
  while (std::getline(maps, line)) {
    uintptr_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &start, &end) != 2) continue;
    if (line.find("[stack]") != std::string::npos) break;  // the hole below the stack is the stack's to grow into
    if (prev_end >= hi && start > prev_end) fillers_.emplace_back(reinterpret_cast<void*>(prev_end), start - prev_end);
    prev_end = end;
  }
}

HeapGap::HeapGap(size_t max_pages) {
  // Chunks below malloc's mmap threshold, so they come from the heap itself and push its top along.
  constexpr size_t kChunk = 32 << 10;
  size_t left = page_bytes() * placement_draw(max_pages + 1);
  while (left > 0) {
    const size_t n = std::min(left, kChunk);
    void* p = std::malloc(n);
    if (!p) break;
    chunks_.push_back(p);
    left -= n;
  }
}

HeapGap::~HeapGap() {
  for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) std::free(*it);
}

}  // namespace kb
