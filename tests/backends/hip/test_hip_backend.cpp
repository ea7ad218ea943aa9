// HIP backend, CPU only: every registered kernel config compiles for every arch it claims through every
// compile path that supports it; metrics equal llvm-readelf-19 --notes; register-starved builds spill;
// code hashes are stable and differ across compilers; the no-device reason is exact; a sweep with HIP
// cases completes here with them skipped and their static metrics present.
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

namespace kb {
namespace {

Backend& hip() {
  Backend* b = find_backend("hip");
  if (!b) throw std::runtime_error("hip backend not built in");
  return *b;
}

const KernelDecl& kernel(const std::string& name) { return find_kernel("hip", name); }

Toolchain preset(const std::string& name) {
  for (auto& t : hip().presets())
    if (t.name == name) {
      resolve_identity(t);
      return t;
    }
  throw std::runtime_error("no preset " + name);
}

bool have_preset(const std::string& name) {
  for (auto& t : hip().presets())
    if (t.name == name) return true;
  return false;
}

Params config(const KernelDecl& k, const std::string& name) {
  for (const auto& [n, p] : k.configs)
    if (n == name) return k.complete(p);
  throw std::runtime_error("no config " + name);
}

// A compile straight through the backend (no cache), into its own temporary directory.
Artifact compile(const Toolchain& tc, const KernelDecl& k, const Params& p, DType d, const std::string& dir) {
  CompileRequest req = test::compile_request(k, tc, p, d);
  req.out_dir = dir;
  req.timeout_s = 300;
  return hip().compile(req);
}

// The per-kernel numbers llvm-readelf-19 prints for a code object holding exactly one kernel.
std::map<std::string, int64_t> readelf_notes(const std::string& path) {
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

TEST(HipBackend, EveryConfigCompilesOnEveryPathAndArch) {
  // The compile paths and the arches they claim; each must be found here (the CI image has them).
  const std::vector<std::string> full = {"hipcc-gfx90a", "hipcc-gfx940", "clang19-hip-gfx90a", "clang19-hip-gfx942",
                                         "hiprtc-gfx90a"};
  // Other clangs on this machine: the default config of each kernel, bf16.
  const std::vector<std::string> extra = {"clang15-hip-gfx90a", "clang16-hip-gfx90a"};
  // f16 and bf16 differ only in the MFMA opcode (same registers, same LDS): f16 on one path per arch
  // family keeps the run short on CI's two cores.
  const std::set<std::string> f16_paths = {"hipcc-gfx90a", "clang19-hip-gfx942"};
  std::map<std::string, Toolchain> tcs;
  for (const auto& n : full) tcs[n] = preset(n);
  for (const auto& n : extra)
    if (have_preset(n)) tcs[n] = preset(n);

  std::vector<Job> jobs;
  size_t skipped_by_params = 0;
  for (const auto& [tn, tc] : tcs) {
    bool is_full = std::find(full.begin(), full.end(), tn) != full.end();
    ASSERT_FALSE(hip_path_unsupported(tc).has_value()) << tn << ": " << *hip_path_unsupported(tc);
    for (const auto& k : hip().kernels()) {
      for (size_t ci = 0; ci < (is_full ? k.configs.size() : 1); ++ci) {
        for (DType d : k.dtypes) {
          if (d == DType::f16 && !f16_paths.count(tn)) continue;
          if (!is_full && d != DType::bf16) continue;
          Params p = k.complete(k.configs[ci].second);
          if (auto why = k.check_params(p, d, tc.target)) {
            ++skipped_by_params;
            // The only rejections among the registered configs are f32 tiles that overflow LDS.
            EXPECT_EQ(d, DType::f32) << k.name << "/" << k.configs[ci].first << ": " << *why;
            EXPECT_NE(why->find("LDS"), std::string::npos) << *why;
            continue;
          }
          jobs.push_back({tn, k.name, k.configs[ci].first, d, {}, {}});
        }
      }
    }
  }
  ASSERT_GT(skipped_by_params, 0u);

  TempDir tmp;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      Job& j = jobs[i];
      try {
        j.art = compile(tcs.at(j.toolchain), kernel(j.kernel), config(kernel(j.kernel), j.config), j.dtype,
                        tmp.sub(fmt::format("job{}", i)));
      } catch (const CompileError& e) {
        j.error = std::string(e.what()) + "\n" + e.log();
      } catch (const std::exception& e) {
        j.error = e.what();
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();

  std::map<std::string, const Job*> by_key;
  for (const auto& j : jobs) {
    std::string id = fmt::format("{}/{}/{}/{}", j.toolchain, j.kernel, j.config, to_string(j.dtype));
    by_key[id] = &j;
    ASSERT_TRUE(j.error.empty()) << id << ": " << j.error;
    const auto& m = j.art.metrics;
    SCOPED_TRACE(id);
    EXPECT_EQ(j.art.entry, "kb_" + j.kernel);
    EXPECT_GT(j.art.code_bytes, 0);
    EXPECT_EQ(j.art.code_hash.size(), 64u);
    EXPECT_GT(m.at("vgprs"), 0);
    EXPECT_GT(m.at("sgprs"), 0);
    EXPECT_GT(m.at("lds_bytes"), 0);
    EXPECT_EQ(m.at("lds_bytes") <= 65536, true);
    EXPECT_GT(m.at("occupancy"), 0);
    EXPECT_LE(m.at("occupancy"), 8);
    // The kernel's launch bounds reach the code object: its workgroup size is the one we launch.
    EXPECT_EQ(m.at("max_flat_workgroup_size"), m.at("threads_per_block"));
    EXPECT_EQ(m.at("threads_per_block"), hip_launch_shape(j.kernel, j.art.params).threads);
    // Registered configs are meant to be usable: no spills, no scratch.
    EXPECT_EQ(m.at("vgpr_spills"), 0);
    EXPECT_EQ(m.at("scratch_bytes"), 0);
    // The LDS the code object declares is what the declaration computes (+ alignment of the counters).
    double lds_decl = double(hip_kernel_lds_bytes(j.kernel, j.art.params, j.dtype));
    EXPECT_GE(m.at("lds_bytes"), lds_decl);
    EXPECT_LE(m.at("lds_bytes"), lds_decl + 16);
  }

  // Metrics equal llvm-readelf-19 --notes, for every artifact of three kernels' instances.
  int cross_checked = 0;
  for (const char* key : {"hipcc-gfx90a/matmul_tiled/best/bf16", "clang19-hip-gfx942/matmul_ws/best/f16",
                          "hiprtc-gfx90a/matmul_tiled/small/f32", "hipcc-gfx940/matmul_ws/deep/bf16",
                          "clang19-hip-gfx90a/matmul_tiled/large/bf16"}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(by_key.count(key));
    const Artifact& a = by_key[key]->art;
    auto notes = readelf_notes(a.binary_path);
    ASSERT_EQ(notes.size(), 7u);
    EXPECT_EQ(a.metrics.at("vgprs"), notes.at("vgpr_count"));
    EXPECT_EQ(a.metrics.at("sgprs"), notes.at("sgpr_count"));
    EXPECT_EQ(a.metrics.at("agprs"), notes.at("agpr_count"));
    EXPECT_EQ(a.metrics.at("vgpr_spills"), notes.at("vgpr_spill_count"));
    EXPECT_EQ(a.metrics.at("sgpr_spills"), notes.at("sgpr_spill_count"));
    EXPECT_EQ(a.metrics.at("lds_bytes"), notes.at("group_segment_fixed_size"));
    EXPECT_EQ(a.metrics.at("scratch_bytes"), notes.at("private_segment_fixed_size"));
    ++cross_checked;
  }
  EXPECT_GE(cross_checked, 3);

  // Different compilers, same source: clang-15 (hipcc) and clang-19 emit different gfx90a code.
  for (const char* k : {"matmul_tiled/best/bf16", "matmul_ws/best/bf16", "matmul_tiled/small/f32"}) {
    const auto* a = by_key.at(std::string("hipcc-gfx90a/") + k);
    const auto* b = by_key.at(std::string("clang19-hip-gfx90a/") + k);
    EXPECT_NE(a->art.code_hash, b->art.code_hash) << k;
    EXPECT_NE(a->art.toolchain_identity, b->art.toolchain_identity) << k;
  }
  // Different arches from one compiler differ too.
  EXPECT_NE(by_key.at("clang19-hip-gfx90a/matmul_tiled/best/bf16")->art.code_hash,
            by_key.at("clang19-hip-gfx942/matmul_tiled/best/bf16")->art.code_hash);

  // The resource table (kernel x config x dtype x toolchain), for the report.
  std::string table = "| toolchain | kernel | config | dtype | VGPR | AGPR | SGPR | LDS | occ |\n";
  for (const auto& j : jobs) {
    const auto& m = j.art.metrics;
    table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} |\n", j.toolchain, j.kernel, j.config,
                         to_string(j.dtype), m.at("vgprs"), m.at("agprs"), m.at("sgprs"), m.at("lds_bytes"),
                         m.at("occupancy"));
  }
  if (const char* out = getenv("KBISECT_HIP_TABLE"); out && *out) write_file_atomic(out, table);
  RecordProperty("instances", int(jobs.size()));
}

// ------------------------------------------------------------------------------------------------

TEST(HipBackend, IdenticalBuildsHaveTheSameCodeHash) {
  Toolchain tc = preset("clang19-hip-gfx942");
  const auto& k = kernel("matmul_tiled");
  TempDir tmp;
  Artifact a = compile(tc, k, config(k, "small"), DType::bf16, tmp.sub("a"));
  Artifact b = compile(tc, k, config(k, "small"), DType::bf16, tmp.sub("b"));
  EXPECT_EQ(a.code_hash, b.code_hash);
  EXPECT_EQ(a.code_bytes, b.code_bytes);
  EXPECT_EQ(a.metrics, b.metrics);
  // One parameter changed: different code.
  Params p = config(k, "small");
  p.set("DB", int64_t(0));
  Artifact c = compile(tc, k, p, DType::bf16, tmp.sub("c"));
  EXPECT_NE(a.code_hash, c.code_hash);
  // The hash covers .text only: the same bytes give the same hash whatever the file name.
  auto elf = ElfFile::open(a.binary_path);
  EXPECT_EQ(hip_code_hash(elf), a.code_hash);
  EXPECT_EQ(hip_code_bytes(elf), int64_t(elf.section(".text")->size));
}

TEST(HipBackend, RegisterStarvedBuildSpills) {
  // OCC=8 asks for 8 waves per SIMD: at most 64 VGPRs per lane, for a 128x64 wave tile (128 fp32
  // accumulators per lane) -- the allocator must spill to scratch.
  const auto& k = kernel("matmul_tiled");
  Params p = config(k, "large");
  p.set("OCC", int64_t(8));
  ASSERT_FALSE(k.check_params(p, DType::bf16, "gfx90a").has_value());
  TempDir tmp;
  for (const char* tn : {"clang19-hip-gfx90a", "hipcc-gfx90a"}) {
    SCOPED_TRACE(tn);
    Artifact a = compile(preset(tn), k, p, DType::bf16, tmp.sub(tn));
    EXPECT_LE(a.metrics.at("vgprs"), 64);
    EXPECT_GT(a.metrics.at("vgpr_spills") + a.metrics.at("sgpr_spills"), 0);
    EXPECT_GT(a.metrics.at("scratch_bytes"), 0);
    EXPECT_EQ(a.metrics.at("occupancy_vgpr_limit"), 8);
    auto notes = readelf_notes(a.binary_path);
    EXPECT_EQ(a.metrics.at("vgpr_spills"), notes.at("vgpr_spill_count"));
    EXPECT_EQ(a.metrics.at("scratch_bytes"), notes.at("private_segment_fixed_size"));
  }
}

TEST(HipBackend, NoDeviceReasonIsExact) {
  std::string why;
  const HipApi* api = hip_api(&why);
  if (!api) {
    // No runtime library at all: that is the reason, verbatim.
    auto av = hip().available();
    EXPECT_FALSE(av.ok);
    EXPECT_EQ(av.reason, why);
    EXPECT_EQ(why.rfind("HIP runtime not found (dlopen libamdhip64: ", 0), 0u) << why;
    return;
  }
  int n = -1;
  hipError_t rc = api->hipGetDeviceCount(&n);
  if (rc != hipErrorNoDevice) GTEST_SKIP() << "this machine has an AMD GPU (hipGetDeviceCount rc=" << int(rc) << ")";
  EXPECT_EQ(int(rc), 100);
  auto av = hip().available();
  EXPECT_FALSE(av.ok);
  EXPECT_EQ(av.reason, "no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)");
  // Loading an artifact then fails with that reason as an environment error (exit code 3).
  Artifact art;
  art.kernel = "matmul_tiled";
  try {
    hip().load(art);
    ADD_FAILURE() << "load() succeeded without a device";
  } catch (const EnvError& e) {
    EXPECT_EQ(std::string(e.what()), av.reason);
    EXPECT_EQ(exit_code_for(e), kExitEnvMissing);
  }
}

TEST(HipBackend, UnsupportedPathsSayWhy) {
  auto with_target = [](std::string name, const std::string& target) {
    Toolchain t = preset(name);
    t.target = target;
    t.name = name + "-as-" + target;
    return t;
  };
  auto r1 = hip_path_unsupported(with_target("hipcc-gfx90a", "gfx942"));
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(*r1,
            "hipcc runs clang-15, which does not know gfx942 (needs clang 17 or newer); use clang-hip with clang-19 "
            "(-nogpuinc -nogpulib)");
  auto r2 = hip_path_unsupported(with_target("hiprtc-gfx90a", "gfx942"));
  ASSERT_TRUE(r2.has_value());
  EXPECT_NE(r2->find("comgr"), std::string::npos) << *r2;
  if (have_preset("clang16-hip-gfx90a")) {
    auto r3 = hip_path_unsupported(with_target("clang16-hip-gfx90a", "gfx942"));
    ASSERT_TRUE(r3.has_value());
    EXPECT_NE(r3->find("clang-16"), std::string::npos) << *r3;
  }
  EXPECT_FALSE(hip_path_unsupported(preset("clang19-hip-gfx942")).has_value());
  EXPECT_EQ(hip_clang_major(preset("hipcc-gfx90a")), 15);
  EXPECT_EQ(hip_clang_major(preset("clang19-hip-gfx90a")), 19);

  // compile() refuses with that reason instead of running a compiler that would fail or crash.
  TempDir tmp;
  const auto& k = kernel("matmul_tiled");
  try {
    compile(with_target("hiprtc-gfx90a", "gfx942"), k, config(k, "best"), DType::bf16, tmp.path);
    ADD_FAILURE() << "hiprtc compiled for gfx942";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(*r2), std::string::npos) << e.what();
  }
}

TEST(HipBackend, ParameterConstraintsGiveReasons) {
  const auto& t = kernel("matmul_tiled");
  const auto& ws = kernel("matmul_ws");
  auto why = [](const KernelDecl& k, Params p, DType d, const std::string& target) {
    return k.check_params(k.complete(p), d, target).value_or("");
  };
  EXPECT_EQ(why(t, config(t, "best"), DType::bf16, "gfx90a"), "");
  EXPECT_EQ(why(t, config(t, "best"), DType::f32, "gfx90a"),
            "f32: LDS tiles need 67584 bytes, more than the 64 KiB per workgroup");
  EXPECT_NE(why(t, config(t, "best"), DType::bf16, "gfx908").find("target gfx908"), std::string::npos);
  EXPECT_EQ(why(t, {{"MFMA", 8}}, DType::f16, "gfx942"), "MFMA=8 must be 32 (32x32x8) or 16 (16x16x16)");
  EXPECT_EQ(why(t, {{"OCC", 9}}, DType::f16, "gfx942"), "OCC=9 must be in 0..8 (waves per SIMD; 0 = compiler's choice)");
  EXPECT_EQ(why(t, {{"BK", 24}, {"MFMA", 16}}, DType::f16, "gfx90a"), "BK=24 must be a multiple of the MFMA K (16)");
  Params deep4 = config(ws, "best");
  deep4.set("STAGES", int64_t(4));
  EXPECT_EQ(why(ws, deep4, DType::bf16, "gfx90a"),
            "ring of 4 slots needs 75808 bytes of LDS, more than the 64 KiB per workgroup");
  EXPECT_EQ(why(ws, config(ws, "best"), DType::f32, "gfx90a"), "matmul_ws is an MFMA kernel: f16 or bf16 only");
  EXPECT_EQ(why(ws, {{"PW", 4}, {"CWM", 4}, {"CWN", 4}}, DType::f16, "gfx90a"),
            "4 producer + 16 consumer waves exceed 16 per workgroup");
  // Shapes: K and N feed 16-byte vector loads.
  EXPECT_FALSE(t.check_shape(config(t, "best"), {100, 4096, 4096}).has_value());
  EXPECT_EQ(t.check_shape(config(t, "best"), {4096, 4100, 4096}).value_or(""),
            "shape 4096x4100x4096: N and K must be multiples of 8 (16-byte vector loads)");
}

TEST(HipBackend, OccupancyModel) {
  AmdgpuArch arch = *amdgpu_arch("gfx90a:xnack-");
  EXPECT_FALSE(amdgpu_arch("gfx1100").has_value());
  AmdgpuKernelInfo k;
  k.sgpr_count = 40;
  k.vgpr_count = 128;  // 512 / 128 = 4 waves per SIMD
  auto o = amdgpu_occupancy(k, 256, arch);
  EXPECT_EQ(o.vgpr_limit, 4);
  EXPECT_EQ(o.waves_per_simd, 4);
  EXPECT_EQ(o.limiter, "vgpr");
  k.vgpr_count = 124;  // allocated in granules of 8: 128
  EXPECT_EQ(amdgpu_occupancy(k, 256, arch).vgpr_limit, 4);
  k.vgpr_count = 24;  // 8 waves max on CDNA2/3
  EXPECT_EQ(amdgpu_occupancy(k, 256, arch).waves_per_simd, 8);
  k.vgpr_count = 265;  // > 256 of 512: one wave
  EXPECT_EQ(amdgpu_occupancy(k, 256, arch).waves_per_simd, 1);
  k.vgpr_count = 64;
  k.group_segment_bytes = 37888;  // one 4-wave workgroup per CU: one wave per SIMD
  o = amdgpu_occupancy(k, 256, arch);
  EXPECT_EQ(o.lds_workgroups, 1);
  EXPECT_EQ(o.waves_per_simd, 1);
  EXPECT_EQ(o.limiter, "lds");
  k.group_segment_bytes = 16384;  // four workgroups: 16 waves on 4 SIMDs
  EXPECT_EQ(amdgpu_occupancy(k, 256, arch).waves_per_simd, 4);
  k.group_segment_bytes = 56860;  // matmul_ws best: one 5-wave workgroup per CU
  EXPECT_DOUBLE_EQ(amdgpu_occupancy(k, 320, arch).waves_per_simd, 1.25);
  k.group_segment_bytes = 0;
  k.sgpr_count = 102;  // GFX9 SGPR table: > 100 SGPRs allows 7 waves
  EXPECT_EQ(amdgpu_occupancy(k, 64, arch).waves_per_simd, 7);
  EXPECT_EQ(amdgpu_occupancy(k, 64, arch).limiter, "sgpr");
}

TEST(HipBackend, ReadsMetadataOfAllKernelsInACodeObject) {
  // Not an AMDGPU object: a clear error naming the file.
  auto self = ElfFile::open(executable_path());
  try {
    read_amdgpu_code_object(self);
    ADD_FAILURE() << "read an x86 executable as an AMDGPU code object";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not an AMDGPU code object"), std::string::npos) << e.what();
  }
  // A code object with two kernels (compiled here): both are listed, with their own numbers.
  TempDir tmp;
  std::string src = tmp.path + "/two.hip";
  write_file_atomic(src, R"(extern "C" __attribute__((global)) void small_k(float* p) { p[0] = 1.f; }
extern "C" __attribute__((global)) void lds_k(float* p) {
  __attribute__((shared)) float s[1000];
  s[__builtin_amdgcn_workitem_id_x()] = p[0];
  __builtin_amdgcn_s_barrier();
  p[1] = s[999 - __builtin_amdgcn_workitem_id_x()];
})");
  std::string out = tmp.path + "/two.hsaco";
  auto r = run_process({"clang++-19", "-x", "hip", "-nogpuinc", "-nogpulib", "--offload-arch=gfx942",
                        "--cuda-device-only", "--no-gpu-bundle-output", "-O3", "-c", "-o", out, src});
  ASSERT_TRUE(r.ok()) << r.err;
  auto co = read_amdgpu_code_object(ElfFile::open(out));
  EXPECT_EQ(co.target.rfind("amdgcn-amd-amdhsa--gfx942", 0), 0u) << co.target;
  ASSERT_EQ(co.kernels.size(), 2u);
  ASSERT_NE(co.find("small_k"), nullptr);
  ASSERT_NE(co.find("lds_k"), nullptr);
  EXPECT_EQ(co.find("small_k")->group_segment_bytes, 0);
  EXPECT_EQ(co.find("lds_k")->group_segment_bytes, 4000);
  EXPECT_EQ(co.find("lds_k")->symbol, "lds_k.kd");
  EXPECT_EQ(co.find("lds_k")->wavefront_size, 64);
  EXPECT_EQ(co.find("missing"), nullptr);
}

TEST(HipBackend, RegistryAndPresets) {
  EXPECT_EQ(hip().name(), "hip");
  auto kinds = hip().kinds();
  EXPECT_EQ(kinds, (std::vector<std::string>{"hipcc", "clang-hip", "hiprtc"}));
  std::set<std::string> names;
  for (const auto& t : hip().presets()) {
    names.insert(t.name);
    EXPECT_EQ(t.backend, "hip");
    EXPECT_FALSE(t.target.empty());
  }
  for (const char* n : {"hipcc-gfx90a", "hipcc-gfx940", "clang19-hip-gfx90a", "clang19-hip-gfx942", "hiprtc-gfx90a"})
    EXPECT_TRUE(names.count(n)) << n;
  // hiprtc's identity covers the runtime library; two targets give two identities.
  Toolchain a = preset("hiprtc-gfx90a");
  Toolchain b = a;
  b.identity.clear();
  b.target = "gfx942";
  hip().identify(b);
  EXPECT_EQ(a.identity.size(), 64u);
  EXPECT_NE(a.identity, b.identity);
  EXPECT_NE(a.version_text.find("hiprtc"), std::string::npos) << a.version_text;
  for (const auto& k : hip().kernels()) {
    EXPECT_EQ(k.backend, "hip");
    EXPECT_TRUE(file_exists(kernel_dir() + "/" + k.source)) << k.source;
    for (const auto& e : k.extra_sources) EXPECT_TRUE(file_exists(kernel_dir() + "/" + e)) << e;
    EXPECT_FALSE(k.configs.empty());
  }
}

// A sweep with HIP cases completes here: cases skipped with the no-device reason, static metrics kept.
TEST(HipBackend, SweepRecordsSkippedCasesWithStaticMetrics) {
  std::string exe = std::string(KBISECT_BINARY_DIR) + "/kbisect";
  if (!file_exists(exe)) GTEST_SKIP() << exe << " not built";
  auto av = hip().available();
  if (av.ok) GTEST_SKIP() << "an AMD GPU is present: cases would run";
  TempDir tmp;
  std::string sweep = tmp.path + "/hip.yaml";
  write_file_atomic(sweep, R"(name: hip-test
tier: l1
toolchains: [hipcc-gfx90a, clang19-hip-gfx942]
benchmarks:
  - kernel: matmul_tiled
    backend: hip
    config: small
    dtypes: [bf16, f32]
    shapes: [[256, 256, 256]]
  - kernel: matmul_ws
    backend: hip
    config: best
    dtypes: [f16]
    shapes: [[256, 256, 256]]
)");
  RunOptions o;
  o.timeout_s = 300;
  o.env_set["KBISECT_CACHE_DIR"] = tmp.path + "/cache";
  auto r = run_process({exe, "sweep", sweep, "-o", tmp.path + "/out"}, o);
  ASSERT_TRUE(r.ok()) << r.status_text() << "\n" << r.out << "\n" << r.err;
  auto j = nlohmann::json::parse(read_file(tmp.path + "/out/results.json"));
  ASSERT_TRUE(j.contains("cases"));
  ASSERT_EQ(j["cases"].size(), 6u);  // 3 instances x 2 toolchains
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(c["status"], "skipped");
    EXPECT_EQ(c["reason"], av.reason);
    ASSERT_TRUE(c["static"].is_object());
    EXPECT_GT(c["static"]["code_bytes"].get<double>(), 0);
    EXPECT_EQ(c["static"]["code_hash"].get<std::string>().size(), 64u);
    EXPECT_GT(c["static"]["compile_s"].get<double>(), 0);
    for (const char* m : {"vgprs", "sgprs", "agprs", "lds_bytes", "scratch_bytes", "vgpr_spills", "occupancy"})
      EXPECT_TRUE(c["static"].contains(m)) << m;
    EXPECT_GT(c["static"]["vgprs"].get<double>(), 0);
    EXPECT_GT(c["static"]["occupancy"].get<double>(), 0);
  }
}

}  // namespace
}  // namespace kb
