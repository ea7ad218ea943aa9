// Shared pieces of the HIP backend tests: the backend, presets, compiles, readelf notes, temp dirs.
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include "cli/exit_codes.h"
#include "backends/backend.h"
#include "backends/elf.h"
#include "backends/hip/amdgpu_code_object.h"
#include "backends/hip/hip_api.h"
#include "backends/hip/hip_backend.h"
#include "backends/hip/hip_kernels.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/backends/compile_request.h"

namespace kb::hiptest {


inline Backend& hip() {
  Backend* b = find_backend("hip");
  if (!b) throw std::runtime_error("hip backend not built in");
  return *b;
}

inline const KernelDecl& kernel(const std::string& name) { return find_kernel("hip", name); }

inline Toolchain preset(const std::string& name) {
  for (auto& t : hip().presets())
    if (t.name == name) {
      resolve_identity(t);
      return t;
    }
  throw std::runtime_error("no preset " + name);
}

inline bool have_preset(const std::string& name) {
  for (auto& t : hip().presets())
    if (t.name == name) return true;
  return false;
}

inline Params config(const KernelDecl& k, const std::string& name) {
  for (const auto& [n, p] : k.configs)
    if (n == name) return k.complete(p);
  throw std::runtime_error("no config " + name);
}

// A compile straight through the backend (no cache), into its own temporary directory.
inline Artifact compile(const Toolchain& tc, const KernelDecl& k, const Params& p, DType d, const std::string& dir) {
  CompileRequest req = test::compile_request(k, tc, p, d);
  req.out_dir = dir;
  req.timeout_s = 300;
  return hip().compile(req);
}

// The per-kernel numbers llvm-readelf-19 prints for a code object holding exactly one kernel.
inline std::map<std::string, int64_t> readelf_notes(const std::string& path) {
  auto r = run_process({"llvm-readelf-19", "--notes", path});
  EXPECT_TRUE(r.ok()) << r.status_text() << "\n" << r.err;
  std::map<std::string, int64_t> out;
  std::regex line(R"(^\s*-?\s*\.(vgpr_count|sgpr_count|agpr_count|vgpr_spill_count|sgpr_spill_count|group_segment_fixed_size|private_segment_fixed_size):\s+(\d+)\s*$)");
  std::istringstream in(r.out);
  std::string l;
  std::map<std::string, int> seen;
  while (std::getline(in, l)) {
    std::smatch m;
    if (std::regex_match(l, m, line)) {
      out[m[1].str()] = std::stoll(m[2].str());
      ++seen[m[1].str()];
    }
  }
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 1) << k << " appears " << n << " times in " << path;
  return out;
}

struct TempDir {
  std::string path = temp_dir("kbisect-hip-test");
  ~TempDir() { remove_tree(path); }
  std::string sub(const std::string& name) const {
    std::string d = path + "/" + name;
    make_dirs(d);
    return d;
  }
};

// ------------------------------------------------------------------------------------------------
// Every registered config x dtype x compile path (hipcc, clang-hip, hiprtc) x arch (gfx90a, gfx94x).
// Each instance compiles once; the other checks on these artifacts share them.

struct Job {
  std::string toolchain, kernel, config;
  DType dtype;
  Artifact art;
  std::string error;  // compile exception text, empty if it compiled
};

}  // namespace kb::hiptest
