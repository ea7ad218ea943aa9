// CUDA tests that run kernels: each skips, with the reason printed, where there is no driver or no usable
// device (scripts/gpu-check.sh runs them on a GPU machine).
// - CudaGpu.EveryConfigIsCorrect: every compiled CUDA kernel, named config and dtype, through the nvcc and
//   NVRTC presets of the device's arch, passes the full correctness check at small and odd shapes (partial
//   tiles in every dimension, a K-ring that wraps, more tiles than SMs).
// - CudaGpu.CublasIsCorrect: the `cublas` library kernel passes the same check, eagerly and from a graph.
// - CudaGpu.EventTimedRunIsSane: CUDA-event timings at 4096^3 bf16 give a throughput below the chip's
//   peak and above a floor (10% of cuBLAS in this process, else 5% of the peak).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_kernels.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/check.h"
#include "harness/reference.h"
#include "tests/backends/cuda/cuda_fixture.h"
#include "tests/common/two_threads.h"

namespace kb {
namespace {

using cudatest::compile;
using cudatest::Compiled;
using cudatest::cuda_backend;

// ---- the device --------------------------------------------------------------------------------------

// Dense bf16 tensor-core FLOP per clock per SM (fp32 accumulate), from NVIDIA's datasheet peaks:
//   sm_80  A100:      312 TFLOP/s = 108 SMs x 1.41 GHz x 2048
//   sm_90  H100 SXM:  989 TFLOP/s = 132 SMs x 1.83 GHz x 4096  (H200: the same SM)
// Other arches have no entry: the throughput test skips there.
std::optional<double> bf16_flop_per_clock_per_sm(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;
  if (major == 9 && minor == 0) return 4096;
  return std::nullopt;
}

struct Device {
  int ordinal = 0, major = 0, minor = 0, sms = 0, clock_khz = 0;
  std::string target;  // what check_params is asked for: the device's own arch ("sm_90a" on 9.0)
  std::string arch;    // the presets' suffix: "sm90a" on 9.0, "sm80" on 8.x, "" where kbisect has none
  double peak_tflops() const {
    auto f = bf16_flop_per_clock_per_sm(major, minor);
    return f ? double(sms) * double(clock_khz) * 1e3 * *f / 1e12 : 0;
  }
};

// The device the executables run on (KBISECT_CUDA_DEVICE, default 0, as cuda_executable.cpp picks it).
// Call only after gpu_skip_reason() said the driver works.
Device device() {
  auto& d = cuda::driver();
  Device dev;
  if (const char* e = getenv("KBISECT_CUDA_DEVICE"); e && *e) dev.ordinal = std::atoi(e);
  CUdevice h = 0;
  KB_CU(d.cuDeviceGet(&h, dev.ordinal));
  KB_CU(d.cuDeviceGetAttribute(&dev.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, h));
  KB_CU(d.cuDeviceGetAttribute(&dev.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, h));
  KB_CU(d.cuDeviceGetAttribute(&dev.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h));
  KB_CU(d.cuDeviceGetAttribute(&dev.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, h));
  dev.target = dev.major == 9 && dev.minor == 0 ? "sm_90a" : fmt::format("sm_{}{}", dev.major, dev.minor);
  if (dev.major == 9 && dev.minor == 0) dev.arch = "sm90a";
  else if (dev.major == 8) dev.arch = "sm80";
  return dev;
}

// Skips the test unless kernels can run here and kbisect has presets for the device's arch.
#define KB_DEVICE_OR_SKIP(dev)                                                                              \
  KB_SKIP_WITHOUT_CUDA_DEVICE();                                                                           \
  const Device dev = device();                                                                              \
  if (dev.arch.empty())                                                                                     \
    GTEST_SKIP() << fmt::format("device {} is sm_{}{}: kbisect has presets for sm_80 and sm_90a only", dev.ordinal, \
                                dev.major, dev.minor)

// ---- compile, load, check -----------------------------------------------------------------------------

struct Job {
  const KernelDecl* k = nullptr;
  std::string config;
  Params params;
  DType dtype = DType::f32;
  const Toolchain* tc = nullptr;
  std::string what() const { return fmt::format("{}[{}]/{}/{}", k->name, config, to_string(dtype), tc->name); }
};

// The temporary directory a test compile wrote (cudatest::compile), removed.
void drop(const Artifact& a) {
  if (!a.binary_path.empty()) remove_tree(std::filesystem::path(a.binary_path).parent_path().string());
}

// Compiles every job, one per core.
std::vector<Compiled> compile_all(const std::vector<Job>& jobs) {
  std::vector<Compiled> out(jobs.size());
  test::on_every_core(jobs.size(), [&](size_t i) {
    out[i] = compile(*jobs[i].k, jobs[i].params, jobs[i].dtype, *jobs[i].tc);
  });
  return out;
}

// The inputs and full fp64 reference of each (shape, dtype), built once.
class Problems {
 public:
  const GemmProblem& get(const Shape& s, DType d) {
    auto key = std::make_tuple(s.M, s.N, s.K, int(d));
    auto it = items_.find(key);
    if (it == items_.end()) {
      ReferenceOptions ro;
      ro.full_max_flop = 1e12;  // the full check: every element against the fp64 reference
      it = items_.emplace(key, make_problem(s, d, 11, ro)).first;
    }
    return *it->second;
  }

 private:
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, std::shared_ptr<const GemmProblem>> items_;
};

// Runs the executable once at the shape (or `batch` times from a graph) and checks C; "" when correct,
// else what failed.
std::string run_and_check(Executable& exe, const KernelDecl& k, const GemmProblem& p, int batch = 1) {
  try {
    exe.prepare(p.shape, p.A, p.B);
    exe.run(batch);
    const Check c = check_executable(p, exe, k.tolerance);
    if (c.ok) return "";
    return fmt::format("{} check failed: {} (max error {:.3g}, tolerance {:.3g})", c.method, c.detail, c.max_error,
                       c.tolerance);
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

// Shapes of the correctness matrix: a square one, partial last tiles in M, N and K of every block tile
// declared here, M and N under one tile, odd shapes (fp32 only: the 16-byte copies of the tensor-core paths
// need K, N % 8 == 0), and one with more 128x128 tiles (8 x 17) than an H100/H200 has SMs (132), so the
// persistent kernels stride, and K = 136 = 5 K tiles of 32 (the rings of up to 4 stages wrap).
const std::vector<Shape> kShapes = {{128, 128, 64}, {200, 136, 72}, {77, 64, 40}, {77, 45, 33}, {1000, 2120, 136}};

TEST(CudaGpu, EveryConfigIsCorrect) {
  KB_DEVICE_OR_SKIP(dev);
  std::vector<Toolchain> tcs;
  std::string missing;
  for (const std::string kind : {"nvcc", "nvrtc"}) {
    const std::string name = kind + "-" + dev.arch;
    if (cudatest::has_preset(name)) tcs.push_back(cudatest::preset(name));
    else missing += " " + name;
  }
  ASSERT_FALSE(tcs.empty()) << "no CUDA preset for " << dev.arch;
  if (!missing.empty()) std::cout << "[ note ] presets not on this machine, not tested:" << missing << "\n";

  std::vector<Job> jobs;
  int refused = 0;
  for (const auto* k : all_kernels()) {
    if (k->backend != "cuda" || cuda::is_library_kernel(k->name)) continue;  // cublas: CudaGpu.CublasIsCorrect
    if (k->language == "triton") continue;  // compiled by Triton toolchains, not these presets
    for (const auto& [cname, p] : k->configs)
      for (DType d : k->dtypes)
        for (const auto& tc : tcs) {
          const Params full = k->complete(p);
          // Refused for the preset's target, or for the device's own arch (an sm_80 cubin on an sm_86 has
          // that arch's shared memory): not claimed here.
          if (k->check_params(full, d, tc.target) || k->check_params(full, d, dev.target)) {
            ++refused;
            continue;
          }
          jobs.push_back({k, cname, full, d, &tc});
        }
  }
  std::cout << fmt::format("[ info ] {} on sm_{}{}: {} kernel builds, {} combinations refused by check_params\n",
                           dev.ordinal, dev.major, dev.minor, jobs.size(), refused);
  RecordProperty("builds", int(jobs.size()));
  RecordProperty("refused_by_check_params", refused);
  ASSERT_FALSE(jobs.empty());

  const std::vector<Compiled> built = compile_all(jobs);
  Problems problems;
  std::vector<std::string> failures;
  int runs = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    if (!built[i].error.empty()) {
      failures.push_back(fmt::format("{}: compile: {}", j.what(), built[i].error));
      continue;
    }
    std::unique_ptr<Executable> exe;
    try {
      exe = cuda_backend().load(built[i].art);
    } catch (const std::exception& e) {
      failures.push_back(fmt::format("{}: load: {}", j.what(), e.what()));
      continue;
    }
    for (const Shape& s : kShapes) {
      if (j.k->check_shape(j.params, j.dtype, s)) continue;  // e.g. K % 8 for the tensor-core paths
      ++runs;
      std::string why = run_and_check(*exe, *j.k, problems.get(s, j.dtype));
      if (!why.empty()) failures.push_back(fmt::format("{}/{}: {}", j.what(), s.str(), why));
    }
    exe.reset();
    drop(built[i].art);
  }
  RecordProperty("runs", runs);
  std::string all;
  for (const auto& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << runs << " runs (and compiles/loads) failed:" << all;
}

// ---- cuBLAS ---------------------------------------------------------------------------------------------

// The `cublas` kernel, compiled (no compiler runs) through the device's NVRTC preset and loaded; skips the
// test with the reason when libcublas cannot be loaded.
#define KB_CUBLAS_OR_SKIP()                                                                          \
  do {                                                                                               \
    std::string why_;                                                                                \
    if (cuda::cublas_library_path(&why_).empty()) GTEST_SKIP() << "cuBLAS cannot be loaded: " << why_; \
  } while (0)

TEST(CudaGpu, CublasIsCorrect) {
  KB_DEVICE_OR_SKIP(dev);
  KB_CUBLAS_OR_SKIP();
  const KernelDecl& k = find_kernel("cuda", "cublas");
  const Toolchain tc = cudatest::preset("nvrtc-" + dev.arch);
  Problems problems;
  struct Case {
    DType d;
    Shape s;
  };
  const std::vector<Case> cases = {{DType::bf16, {200, 136, 72}}, {DType::bf16, {1000, 1024, 520}},
                                   {DType::f16, {200, 136, 72}},  {DType::f32, {200, 136, 72}},
                                   {DType::f32, {77, 45, 33}}};
  std::map<int, std::unique_ptr<Executable>> exes;  // by dtype
  std::vector<std::string> failures;
  for (const Case& c : cases) {
    auto& exe = exes[int(c.d)];
    if (!exe) {
      Compiled built = compile(k, {}, c.d, tc);
      ASSERT_TRUE(built.error.empty()) << built.error;
      exe = cuda_backend().load(built.art);
      drop(built.art);  // loaded: the marker file is not read again
    }
    const GemmProblem& p = problems.get(c.s, c.d);
    // Once eagerly, then 3 times from a CUDA graph (cuBLAS captured with its own workspace).
    for (int batch : {1, 3}) {
      std::string why = run_and_check(*exe, k, p, batch);
      if (!why.empty()) failures.push_back(fmt::format("cublas/{}/{} batch {}: {}", to_string(c.d), c.s.str(), batch, why));
    }
  }
  std::string all;
  for (const auto& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << all;
}

// ---- timing ---------------------------------------------------------------------------------------------

// Median time per execution of `samples` event-timed batches, after a warm-up (one eager run, one graph).
double median_seconds(Executable& exe, int samples = 10, int batch = 5) {
  exe.run(1);
  exe.run(batch);
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) t.push_back(exe.run(batch).seconds);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TEST(CudaGpu, EventTimedRunIsSane) {
  KB_DEVICE_OR_SKIP(dev);
  const double peak = dev.peak_tflops();
  if (peak <= 0)
    GTEST_SKIP() << fmt::format("no bf16 peak figure for sm_{}{} (clock {} kHz)", dev.major, dev.minor, dev.clock_khz);
  const Shape s{4096, 4096, 4096};
  const Toolchain tc = cudatest::preset("nvrtc-" + dev.arch);
  std::vector<Job> jobs;
  std::vector<const KernelDecl*> kernels;
  if (dev.arch == "sm90a") kernels.push_back(&find_kernel("cuda", "matmul_ws_sm90"));  // wgmma: sm_90a only
  kernels.push_back(&find_kernel("cuda", "matmul_tiled"));
  for (const KernelDecl* k : kernels)
    for (const auto& [n, p] : k->configs)
      if (n == "best") jobs.push_back({k, n, k->complete(p), DType::bf16, &tc});
  ASSERT_EQ(jobs.size(), kernels.size()) << "a config 'best' for each kernel";
  const bool with_cublas = !cuda::cublas_library_path().empty();
  if (with_cublas) jobs.push_back({&find_kernel("cuda", "cublas"), "best", {}, DType::bf16, &tc});
  const std::vector<Compiled> built = compile_all(jobs);
  const auto problem = make_problem(s, DType::bf16, 5);  // the fast check (digest on the device) at this size

  std::vector<double> tflops(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    ASSERT_TRUE(built[i].error.empty()) << j.what() << ": " << built[i].error;
    auto exe = cuda_backend().load(built[i].art);
    drop(built[i].art);
    exe->prepare(s, problem->A, problem->B);
    exe->run(1);
    const Check before = check_executable(*problem, *exe, j.k->tolerance);
    ASSERT_TRUE(before.ok) << j.what() << " " << s.str() << ": " << before.detail;
    tflops[i] = s.flops() / median_seconds(*exe) / 1e12;
    const Check after = check_executable(*problem, *exe, j.k->tolerance);  // the graph runs wrote C too
    EXPECT_TRUE(after.ok) << j.what() << " after the timed graph runs: " << after.detail;
    std::cout << fmt::format("[ perf ] {} {}: {:.1f} TFLOP/s (peak {:.0f})\n", j.what(), s.str(), tflops[i], peak);
    RecordProperty(j.k->name + "_tflops", fmt::format("{:.1f}", tflops[i]));
  }
  // The floor: 10% of cuBLAS at the same shape where it runs in this process, else 5% of the peak.
  const double floor = with_cublas ? 0.10 * tflops.back() : 0.05 * peak;
  const std::string floor_source =
      with_cublas ? fmt::format("10% of cuBLAS ({:.1f} TFLOP/s)", tflops.back()) : fmt::format("5% of peak {:.0f}", peak);
  std::cout << fmt::format("[ perf ] peak {:.0f} TFLOP/s = {} SMs x {} MHz x {} FLOP/clk/SM; floor {:.1f} TFLOP/s: {}\n",
                           peak, dev.sms, dev.clock_khz / 1000, *bf16_flop_per_clock_per_sm(dev.major, dev.minor), floor,
                           floor_source);
  RecordProperty("peak_tflops", fmt::format("{:.0f}", peak));
  RecordProperty("floor", floor_source);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_LT(tflops[i], 1.10 * peak) << jobs[i].what() << ": faster than the chip's peak: the timing is wrong";
    if (!cuda::is_library_kernel(jobs[i].k->name)) {
      EXPECT_GT(tflops[i], floor) << jobs[i].what() << ": below the floor, " << floor_source;
    }
  }
}

}  // namespace
}  // namespace kb
