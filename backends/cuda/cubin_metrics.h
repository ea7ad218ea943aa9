// Static metrics of a cubin, read in-process from its ELF sections (backends/elf.h), and the figures
// ptxas prints with -v (the cross-check, and the only source of spill byte counts).
#pragma once
#include <map>
#include <optional>
#include <string>

#include "backends/elf.h"

namespace kb::cuda {

struct CubinMetrics {
  std::optional<int64_t> registers;       // .nv.info EIATTR_REGCOUNT (0x2f)
  std::optional<int64_t> frame_bytes;     // EIATTR_FRAME_SIZE (0x11)
  std::optional<int64_t> min_stack_bytes; // EIATTR_MIN_STACK_SIZE (0x12)
  std::optional<int64_t> max_stack_bytes; // EIATTR_MAX_STACK_SIZE (0x23)
  int64_t smem_bytes = 0;                 // static shared memory as ptxas reports it
  int64_t reserved_smem_bytes = 0;        // the 1 KiB sm_90+ cubins add to .nv.shared.<kernel>
  int64_t code_bytes = 0;                 // sum of .text.* sizes
  std::string code_hash;                  // over .text.*, .nv.info*, .nv.shared.* only
  bool kernel_found = false;              // the entry symbol exists
};

// Throws InputError if the file is not a readable ELF.
CubinMetrics read_cubin(const std::string& path, const std::string& kernel);
// The same, from an ELF already read (e.g. from bytes).
CubinMetrics cubin_metrics(const ElfFile& elf, const std::string& kernel);

struct PtxasFigures {
  std::optional<int64_t> registers, stack_frame, spill_stores, spill_loads, smem_bytes;
};
// Parses `ptxas -v` lines (also found in nvcc and NVRTC logs) for one kernel; fields stay empty when
// the log has no such lines.
PtxasFigures parse_ptxas_log(const std::string& log, const std::string& kernel);

}  // namespace kb::cuda
