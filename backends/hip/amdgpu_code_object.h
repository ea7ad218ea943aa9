// AMDGPU code objects: per-kernel resource metadata (the NT_AMDGPU_METADATA msgpack note, read with
// the project's ELF reader and LLVM's msgpack Document) and an occupancy model for CDNA targets.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/elf.h"

namespace kb {

// One kernel's entry in the metadata (fields named after the note's keys).
struct AmdgpuKernelInfo {
  std::string name;                    // .name
  std::string symbol;                  // .symbol (the kernel descriptor, "<name>.kd")
  int64_t vgpr_count = 0;              // .vgpr_count (gfx90a/gfx94x: unified, arch rounded to 4 + AGPRs)
  int64_t agpr_count = 0;              // .agpr_count (0 when the target has no AGPRs)
  int64_t sgpr_count = 0;              // .sgpr_count (includes VCC / flat scratch / XNACK)
  int64_t vgpr_spill_count = 0;        // .vgpr_spill_count
  int64_t sgpr_spill_count = 0;        // .sgpr_spill_count
  int64_t group_segment_bytes = 0;     // .group_segment_fixed_size (static LDS)
  int64_t private_segment_bytes = 0;   // .private_segment_fixed_size (scratch per lane)
  int64_t kernarg_segment_bytes = 0;   // .kernarg_segment_size
  int64_t max_flat_workgroup_size = 0; // .max_flat_workgroup_size
  int64_t wavefront_size = 0;          // .wavefront_size
};

struct AmdgpuCodeObject {
  std::string target;                  // amdhsa.target, e.g. "amdgcn-amd-amdhsa--gfx90a"
  std::vector<int64_t> version;        // amdhsa.version
  std::vector<AmdgpuKernelInfo> kernels;
  const AmdgpuKernelInfo* find(const std::string& kernel_name) const;  // by .name; nullptr if absent
};

// Reads the metadata note (owner "AMDGPU", type NT_AMDGPU_METADATA = 32). Throws InputError naming the
// file when the ELF is not an AMDGPU code object or the note is missing or malformed.
AmdgpuCodeObject read_amdgpu_code_object(const ElfFile& elf);

// What bounds occupancy on one CDNA compute unit.
struct AmdgpuArch {
  std::string name;                // "gfx90a"
  int simds_per_cu = 4;
  int max_waves_per_simd = 8;      // gfx90a / gfx94x
  int vgprs_per_lane = 512;        // unified VGPR + AGPR file per SIMD lane
  int vgpr_granule = 8;
  int sgprs_per_simd = 800;
  int lds_bytes_per_cu = 65536;
  int lds_granule = 512;
  int max_workgroups_per_cu = 32;
  int wave_size = 64;
};
// Known CDNA2/CDNA3 targets (gfx90a, gfx940, gfx941, gfx942); nullopt for others.
std::optional<AmdgpuArch> amdgpu_arch(const std::string& target);

struct AmdgpuOccupancy {
  double waves_per_simd = 0;   // resident waves per SIMD for workgroups of `threads`
  int vgpr_limit = 0;          // waves per SIMD the registers alone allow
  int sgpr_limit = 0;
  int lds_workgroups = 0;      // workgroups per CU the LDS allows (max_workgroups_per_cu if no LDS)
  int workgroups_per_cu = 0;
  std::string limiter;         // "vgpr" | "sgpr" | "lds" | "waves" | "workgroups"
};
// Occupancy of a kernel launched with `threads` per workgroup (whole workgroups must fit on one CU).
AmdgpuOccupancy amdgpu_occupancy(const AmdgpuKernelInfo& k, int threads, const AmdgpuArch& arch);

}  // namespace kb
