// Proving that kbisect compiles what the user's own Triton compiled (docs/triton.md, "Fidelity"): each IR
// stage of a recorded compile (a tritonparse trace) against kbisect's recompile, once what says where the
// compile ran is removed, and the compiled kernel's metadata. `kbisect import-trace --verify` runs it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "backends/cache.h"
#include "backends/toolchain.h"
#include "backends/triton/trace.h"
#include "backends/triton/user_kernel.h"

namespace kb::triton {

// One stage's text without what differs between two machines compiling the same kernel the same way:
// MLIR locations (loc(...) and #loc lines) in TTIR and TTGIR; debug metadata, !dbg attachments, debug
// records and the source file name in LLVM IR; .file and .loc directives and the DWARF sections in PTX and
// AMDGCN. Blank lines and trailing blanks are dropped. `stage` is ttir, ttgir, llir, ptx or amdgcn.
std::string normalize_stage(const std::string& stage, const std::string& text);

// The first line (1-based, of the normalized texts) where two texts differ; 0 when they are identical.
struct FirstDifference {
  size_t line = 0;
  std::string expected, got;  // that line of each ("" past the end)
};
FirstDifference first_difference(const std::string& expected, const std::string& got);

// The stages and metadata of one verified compilation.
struct StageCheck {
  std::string stage;       // ttir, ..., or "metadata"
  bool identical = false;
  FirstDifference diff;    // for a metadata field: line 0, expected/got "field: value"
  std::string note;        // why a stage could not be compared (the trace lacks it)
};
struct VerifyResult {
  std::string kernel, target, release, toolchain;
  size_t index = 0, line = 0;
  std::string failure;  // set when kbisect could not recompile it (the compiler's reason)
  std::vector<StageCheck> stages;
  bool identical() const;
};

// The metadata fields compared (num_warps, num_stages, shared, num_ctas, cluster_dims) between the trace's
// kernel JSON and kbisect's: one StageCheck per field present in the trace.
std::vector<StageCheck> compare_metadata(const std::string& trace_json, const std::string& ours_json);

// Compiles a user kernel as its file declares it (its values, the shape named `shape` or compile-only when ""),
// through `cache`: the directory holding the build's stages, kernel.json and specialization.json.
std::string compile_user_kernel(const UserKernel& k, const Toolchain& tc, const std::string& shape, CompileCache cache);

// Recompiles compilation `c` of `t` through kbisect's own path (import into work_dir, then the Triton
// compile of the imported file, through the compile cache) with `toolchain` (a name or toolchain file; ""
// picks the preset of the trace's release and target) and checks every stage the trace holds. EnvError
// when no toolchain of that release and target is here (naming the release and the pip command that
// installs it); InputError for a trace that does not say its release when no toolchain is named.
// `imported_dir`, when not empty, is where an earlier import wrote this compilation's files (perhaps edited
// since: a helper added, a constexpr changed): its NAME.yaml is verified as it is, instead of a fresh import.
VerifyResult verify_compilation(const Trace& t, const TraceCompilation& c, const std::string& toolchain,
                                const std::string& work_dir, const std::string& imported_dir = "");

}  // namespace kb::triton
