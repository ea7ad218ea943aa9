// HIP backend pieces that tests and other commands may use directly (the Backend itself is created by
// make_hip_backend() and found through the registry as "hip").
#pragma once
#include <map>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "backends/elf.h"

namespace kb {

std::unique_ptr<Backend> make_hip_backend();

// Why this toolchain's compile path cannot build for its target (e.g. hipcc's clang-15 does not know
// gfx942; hiprtc of ROCm 5.2 crashes in comgr for gfx94x), or nullopt when it can.
std::optional<std::string> hip_path_unsupported(const Toolchain& tc);

// The major version of the clang a hipcc / clang-hip toolchain runs (from `--version`); 0 if unknown.
int hip_clang_major(const Toolchain& tc);

// Static metrics of a kernel in a code object: vgprs (unified count of the metadata), agprs, sgprs,
// vgpr_spills, sgpr_spills, lds_bytes, scratch_bytes, occupancy (waves per SIMD for the target and
// `threads`), occupancy limits, threads_per_block, max_flat_workgroup_size. `dynamic_lds` is LDS the
// launch asks for on top of the code object's (Triton's): lds_bytes and occupancy include it, and it is
// reported as dynamic_lds_bytes. Throws InputError if the code object or the kernel's metadata is missing.
std::map<std::string, double> hip_static_metrics(const ElfFile& code_object, const std::string& kernel_symbol,
                                                  const std::string& target, int threads, int64_t dynamic_lds = 0);

// Code hash and size over `.text` only (`.strtab` carries temporary file names and is not deterministic).
std::string hip_code_hash(const ElfFile& code_object);
int64_t hip_code_bytes(const ElfFile& code_object);

}  // namespace kb
