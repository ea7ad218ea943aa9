// HIP backend, CPU only: every registered kernel config compiles for every arch it claims through every
// compile path that supports it; metrics equal llvm-readelf-19 --notes; register-starved builds spill;
// code hashes are stable and differ across compilers; the no-device reason is exact; a sweep with HIP
// cases completes here with them skipped and their static metrics present.
#include "tests/backends/hip/hip_fixture.h"

namespace kb {
namespace {

using namespace hiptest;

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
      if (k.language == "triton") continue;  // Triton toolchains compile these (tests/backends/triton)
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
  EXPECT_FALSE(t.check_shape(config(t, "best"), DType::bf16, {100, 4096, 4096}).has_value());
  EXPECT_EQ(t.check_shape(config(t, "best"), DType::bf16, {4096, 4100, 4096}).value_or(""),
            "shape 4096x4100x4096: N and K must be multiples of 8 (16-byte vector loads)");
}

}  // namespace
}  // namespace kb
