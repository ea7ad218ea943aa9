// The tuned-config table: what `kbisect tune` found, per machine, toolchain identity, kernel, dtype and
// shape, in a JSON file users can commit (docs/tune.md). Sweeps say `config: tuned` and get the entry of
// their case, the entry of the nearest shape, or the kernel's built-in default with the reason recorded.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "backends/toolchain.h"

namespace kb {

// What the CPU this runs on offers a micro-kernel, read at run time (cpuid), never assumed.
struct CpuVectorInfo {
  int f32_lanes = 4;         // per vector register
  int vector_registers = 16;
  std::string isa;           // the widest of "avx512f", "avx2", "avx", "sse2", "neon"
  std::string model;         // /proc/cpuinfo "model name" ("" when unknown)
};
CpuVectorInfo cpu_vector_info();

// The machine part of a table key: "cpu <model> <isa>" for CPU toolchains, "<backend> <target>" for GPUs.
std::string machine_key(const Toolchain& tc);

struct TunedEntry {
  std::string machine, backend, kernel, toolchain, toolchain_identity;
  DType dtype = DType::f32;
  Shape shape;
  Params params;
  std::string method = "measured";  // "measured" (raced and confirmed) or "static-only" (no device)
  double gain_pct = 0, gain_lo_pct = 0, gain_hi_pct = 0;  // speed-up over the built-in default, with its CI
  std::string verdict;              // of the confirming A/B ("better", "same", ...; "" when static-only)
  std::string tuned_at;             // UTC time
};

struct TunedQuery {
  std::string machine, backend, kernel, toolchain_identity;
  DType dtype = DType::f32;
  Shape shape;
};

struct TunedResolution {
  std::string how;              // "exact", "nearest" or "fallback"
  Params params;                // the entry's params (exact/nearest); empty on fallback
  std::optional<TunedEntry> entry;
  std::string reason;           // nearest: which shape; fallback: why no entry applies
};

class TunedTable {
 public:
  // Reads a table file; throws InputError naming the file and field. A missing file is an empty table.
  static TunedTable load(const std::string& path);
  static TunedTable parse(const std::string& json_text, const std::string& origin);
  std::string dump() const;           // JSON, entries in key order
  void save(const std::string& path) const;  // atomic

  // Adds or replaces the entry with the same key.
  void put(const TunedEntry& e);
  const std::vector<TunedEntry>& entries() const { return entries_; }
  // Entries of one machine, kernel and backend (for `kbisect list` / `inspect`).
  std::vector<TunedEntry> for_kernel(const std::string& machine, const std::string& backend,
                                     const std::string& kernel) const;
  TunedResolution resolve(const TunedQuery& q) const;

 private:
  std::vector<TunedEntry> entries_;
};

// "MxNxK" with positive sizes; throws InputError naming `what`.
Shape parse_shape_text(const std::string& text, const std::string& what);

// The table `config: tuned` reads when the sweep names none: $KBISECT_TUNED_TABLE, else "" (none).
std::string default_tuned_table_path();

}  // namespace kb
