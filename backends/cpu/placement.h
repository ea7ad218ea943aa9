// Where a CPU executable's code, operands and kernel heap land, and the random gaps that move them.
//
// Within one process a dlopen after the previous dlclose, an mmap after the previous munmap and a malloc
// after the previous free all return the same addresses again, so loading afresh alone does not move
// anything: every block of `ab` or the bisector would run in one placement (the process's) and the
// block-to-block spread would leave out the layout term (docs/statistics.md, "Placement per block").
// Each load therefore draws random gaps of whole pages first: a reservation below which its code maps,
// pages skipped before each operand array, and heap chunks held before the kernel's own allocations.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kb {

// The addresses of one load: the kernel entry, the operands and the next heap allocation at load time.
struct Placement {
  uintptr_t entry = 0, a = 0, b = 0, c = 0, heap = 0;
  std::string str() const;  // "entry=0x... A=0x... B=0x... C=0x... heap=0x..."
};

// The placement of a loaded CPU executable (after prepare()); nothing for other backends' executables.
std::optional<Placement> placement_of(const Executable& exe);

// A uniform draw in [0, n) from a generator seeded once per process from the OS.
uint64_t placement_draw(uint64_t n);

// Uniform draws in [0, n) that do not repeat within the process until all n were drawn: two loads of one
// process never get the same gap (a repeated gap would repeat the placement).
class FreshDraws {
 public:
  explicit FreshDraws(uint64_t n) : n_(n) {}
  uint64_t draw();

 private:
  uint64_t n_;
  std::mutex mu_;
  std::set<uint64_t> used_;
};

// Address space (PROT_NONE, nothing committed) held for as long as the object lives.
class AddressGap {
 public:
  AddressGap() = default;
  explicit AddressGap(size_t bytes);
  AddressGap(void* at, size_t bytes);  // exactly at `at` (MAP_FIXED_NOREPLACE); empty if taken
  AddressGap(AddressGap&& o) noexcept;
  AddressGap& operator=(AddressGap&& o) noexcept;
  AddressGap(const AddressGap&) = delete;
  AddressGap& operator=(const AddressGap&) = delete;
  ~AddressGap();
  uintptr_t address() const { return uintptr_t(base_); }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
};

// Held while a library is mapped. Mappings go top-down into the highest hole that fits, so a reservation
// alone does not move a small library: a hole left above it would take the library at the same address
// every time. CodeGap reserves a region, fills every hole above it (from /proc/self/maps, up to the
// stack, whose hole stays free) and opens a slot of slot_bytes at a random page (0..max_pages)
// (never the same twice in a process) inside the region, the only place left for the next mapping of up to slot_bytes. release() once the
// library is mapped.
class CodeGap {
 public:
  CodeGap() = default;
  CodeGap(size_t slot_bytes, size_t max_pages);
  void release() {
    fillers_.clear();
    below_ = AddressGap();
    above_ = AddressGap();
  }

 private:
  AddressGap below_, above_;  // the region's parts around the slot
  std::vector<AddressGap> fillers_;
};

// Heap chunks totalling 0..max_pages random pages, held for as long as the object lives: the kernel's
// scratch (operator new) then comes from further along the heap.
class HeapGap {
 public:
  HeapGap() = default;
  explicit HeapGap(size_t max_pages);
  HeapGap(const HeapGap&) = delete;
  HeapGap& operator=(const HeapGap&) = delete;
  ~HeapGap();

 private:
  std::vector<void*> chunks_;
};

size_t page_bytes();

}  // namespace kb
