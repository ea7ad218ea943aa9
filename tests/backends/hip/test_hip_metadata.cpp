// The HIP backend: occupancy, code-object metadata, registry and sweeps without a device.
#include "tests/backends/hip/hip_fixture.h"

namespace kb {
namespace {

using namespace hiptest;

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
  EXPECT_EQ(kinds, (std::vector<std::string>{"hipcc", "clang-hip", "hiprtc", "triton"}));
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
