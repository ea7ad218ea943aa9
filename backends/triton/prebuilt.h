// Prebuilt Triton toolchains: compile where Triton is, run where the GPU is (docs/triton.md, "Compile here,
// run there"). `kbisect prebuild` compiles a sweep's cases with Triton toolchains into a directory that holds
// a compile cache (DIR/compile) and, per release, a record of the toolchains' identities
// (DIR/triton/triton-X.Y.Z/kbisect-prebuilt.json). On a machine without that Triton (a GPU node with no
// package index), pointing KBISECT_TRITON_DIR at DIR/triton and KBISECT_CACHE_DIR at DIR makes the same
// toolchain names resolve to the same identities, so every case finds its build in the cache: nothing is
// compiled there, and a case the record has no build for fails with a reason that says so.
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kb::triton {

inline constexpr const char* kPrebuiltRecord = "kbisect-prebuilt.json";

// A case that `kbisect prebuild` could not build: the device reports what this machine found.
struct NotBuilt {
  std::string cache_key, case_id;
  std::string status;  // "skipped" | "failed"
  std::string reason;
};

// Writes DIR/triton/triton-<version>/kbisect-prebuilt.json for every Triton toolchain in `toolchains`
// (identity resolved), grouped by release, with the cases each could not build. `made_on` names this machine.
// Returns the record files written.
std::vector<std::string> write_prebuilt_records(const std::string& dir, const std::vector<Toolchain>& toolchains,
                                                const std::vector<std::pair<std::string, NotBuilt>>& not_built,
                                                const std::string& made_on);

// The toolchains a record declares for `backend` (compiler empty, `prebuilt` set to the record's path).
// Throws InputError naming the file and field when the record is malformed.
std::vector<Toolchain> prebuilt_toolchains(const std::string& record, const std::string& backend);

// A prebuilt toolchain's identity and version text from its record.
void identify_prebuilt(Toolchain& tc);

// What compiling on a prebuilt toolchain does: the record's verdict for a case it could not build
// (CompileSkipped / CompileError with this machine's reason), else a CompileError saying that the case is
// not among the prebuilt builds. Never returns.
[[noreturn]] void refuse_prebuilt_compile(const CompileRequest& req, const std::string& cache_key);

}  // namespace kb::triton
