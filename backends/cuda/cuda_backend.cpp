// CUDA backend: kernel source -> cubin through nvcc, NVRTC (in-process) or clang (device-only PTX, then
// ptxas); static metrics read from the cubin; kernels run through the driver API loaded with dlopen.
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cuda/cubin_metrics.h"
#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/nvrtc_cubin.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/warp_groups.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "core/process.h"

#ifndef KBISECT_CUDA_ROOT
#define KBISECT_CUDA_ROOT "/usr/local/cuda"
#endif

namespace kb {

namespace cuda {
namespace {

namespace fs = std::filesystem;

// The toolkit the nvcc presets and clang's ptxas come from: the first of $KBISECT_CUDA_ROOT, $CUDA_HOME,
// $CUDA_PATH, the folder above the nvcc on PATH, and the toolkit kbisect was built against, that holds
// bin/ptxas. A machine whose toolkit lives elsewhere than where kbisect was built (a carried bundle) finds it.
std::string cuda_root() {
  auto has_ptxas = [](const fs::path& root) { return !root.empty() && fs::exists(root / "bin" / "ptxas"); };
  for (const char* var : {"KBISECT_CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char* e = getenv(var); e && *e && has_ptxas(e)) return e;
  if (std::string nvcc = which("nvcc"); !nvcc.empty()) {
    std::error_code ec;
    fs::path root = fs::canonical(nvcc, ec).parent_path().parent_path();
    if (!ec && has_ptxas(root)) return root.string();
  }
  return KBISECT_CUDA_ROOT;
}

// "sm_90a" -> "compute_90a"
std::string virtual_arch(const std::string& target) { return "compute_" + target.substr(3); }

// ---- compile paths
struct CompileOutput {
  std::string log;
  double wall_s = 0;
};

std::vector<std::string> common_defines(const CompileRequest& req) {
  std::vector<std::string> v = param_defines(req.params);
  v.push_back(dtype_define(req.dtype));
  v.push_back("-I" + req.kernel_dir + "/common");
  v.push_back("-I" + req.kernel_dir + "/cuda");
  return v;
}

CompileOutput run_compiler(const std::vector<std::string>& argv, const CompileRequest& req, const std::string& what) {
  RunOptions o;
  o.timeout_s = req.timeout_s;
  o.env_set = req.toolchain->env;
  auto r = run_process(argv, o);
  std::string log = r.out + r.err;
  if (!r.ok())
    throw CompileError(fmt::format("{} failed ({}) compiling {}: {}", req.toolchain->name, r.status_text(),
                                   req.kernel->source, what),
                       tail(log));
  return {log, r.wall_s};
}

CompileOutput compile_nvcc(const CompileRequest& req, const std::string& src, const std::string& cubin) {
  const auto& tc = *req.toolchain;
  std::vector<std::string> argv = {tc.compiler,
                                   "-cubin",
                                   fmt::format("-gencode=arch={},code={}", virtual_arch(tc.target), tc.target),
                                   "-O3",
                                   "-std=c++17",
                                   "-Xptxas",
                                   "-v"};
  for (auto& f : common_defines(req)) argv.push_back(f);
  for (const auto& f : tc.flags) argv.push_back(f);
  argv.insert(argv.end(), {"-o", cubin, src});
  return run_compiler(argv, req, argv_to_display(argv));
}

CompileOutput compile_clang(const CompileRequest& req, const std::string& src, const std::string& cubin) {
  const auto& tc = *req.toolchain;
  std::string ptxas = tc.tools.count("ptxas") ? tc.tools.at("ptxas") : cuda_root() + "/bin/ptxas";
  std::string root = fs::path(which(ptxas).empty() ? ptxas : which(ptxas)).parent_path().parent_path().string();
  std::string ptx = req.out_dir + "/kernel.ptx";
  std::vector<std::string> argv = {tc.compiler, "-x", "cuda", "-std=c++17", "--cuda-gpu-arch=" + tc.target,
                                   "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-path=" + root,
                                   "-Wno-unknown-cuda-version", "-O3", "-S"};
  std::vector<std::string> ptxas_argv = {ptxas, "-arch=" + tc.target, "-v", "-O3"};
  for (auto& f : common_defines(req)) argv.push_back(f);
  for (const auto& f : tc.flags) {
    if (f.rfind("-Xptxas=", 0) == 0) ptxas_argv.push_back(f.substr(8));
    else argv.push_back(f);
  }
  argv.insert(argv.end(), {"-o", ptx, src});
  auto a = run_compiler(argv, req, argv_to_display(argv));
  ptxas_argv.insert(ptxas_argv.end(), {"-o", cubin, ptx});
  auto b = run_compiler(ptxas_argv, req, argv_to_display(ptxas_argv));
  return {a.log + b.log, a.wall_s + b.wall_s};
}

CompileOutput compile_nvrtc(const CompileRequest& req, const std::string& src, const std::string& cubin) {
  const auto& tc = *req.toolchain;
  std::vector<std::string> opts = {"-arch=" + tc.target, "-std=c++17", "-Xptxas=-v"};
  for (auto& f : common_defines(req)) opts.push_back(f);
  for (const auto& f : tc.flags) opts.push_back(f);
  auto t0 = std::chrono::steady_clock::now();
  NvrtcResult r = nvrtc_cubin(read_file(src), src, opts);
  if (r.cubin.empty())
    throw CompileError(fmt::format("{}: {} compiling {}", tc.name, r.error, req.kernel->source), tail(r.log));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomic(cubin, r.cubin);
  return {r.log, wall};
}

// ---- the backend
class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  Availability available() override {
    auto& d = driver();
    return {d.ok, d.ok ? "" : d.reason};
  }

  const std::vector<KernelDecl>& kernels() const override { return cuda_kernels(); }
  std::vector<std::string> kinds() const override { return {"nvcc", "nvrtc", "clang-cuda", "triton"}; }

  std::vector<Toolchain> presets() const override {
    std::vector<Toolchain> out;
    const std::string root = cuda_root();
    const std::string nvcc = root + "/bin/nvcc", ptxas = root + "/bin/ptxas", cicc = root + "/nvvm/bin/cicc";
    auto make = [](std::string name, std::string kind, std::string compiler, std::string target, std::string desc) {
      Toolchain t;
      t.name = std::move(name);
      t.backend = "cuda";
      t.kind = std::move(kind);
      t.compiler = std::move(compiler);
      t.target = std::move(target);
      t.origin = "preset";
      t.description = std::move(desc);
      return t;
    };
    if (fs::exists(nvcc)) {
      for (const char* sm : {"sm_80", "sm_90", "sm_90a"}) {
        auto t = make(fmt::format("nvcc-{}", std::string(sm).substr(3) == "90" ? "sm90" : std::string("sm") + (sm + 3)),
                      "nvcc", nvcc, sm, fmt::format("nvcc -cubin for {}", sm));
        t.tools["ptxas"] = ptxas;
        if (fs::exists(cicc)) t.tools["cicc"] = cicc;
        out.push_back(t);
      }
    }
    for (const char* sm : {"sm_80", "sm_90", "sm_90a"})
      out.push_back(make(std::string("nvrtc-sm") + (sm + 3), "nvrtc", "", sm,
                         fmt::format("NVRTC {} (in-process), cubin for {}", nvrtc_version(), sm)));
    if (fs::exists(ptxas)) {
      auto clang = [&](int v, const char* sm) {
        std::string prog = fmt::format("clang++-{}", v);
        if (which(prog).empty()) return;
        auto t = make(fmt::format("clang{}-cuda-sm{}", v, sm + 3), "clang-cuda", prog, sm,
                      fmt::format("{} -x cuda --cuda-device-only -nocudainc -> PTX -> ptxas, {}", prog, sm));
        t.tools["ptxas"] = ptxas;
        out.push_back(t);
      };
      for (int v : {14, 15, 16, 17, 18, 19, 20}) clang(v, "sm_80");
      for (int v : {16, 17, 18}) clang(v, "sm_90");  // no sm_90a before clang 19 (measured with clang 16-18 here)
      for (int v : {19, 20}) clang(v, "sm_90a");
    }
    for (auto& t : triton::presets("cuda")) out.push_back(std::move(t));
    return out;
  }

  void identify(Toolchain& tc) const override {
    if (tc.kind == "triton") return triton::identify(tc);
    if (tc.kind != "nvrtc") return Backend::identify(tc);
    // In-process: the identity is the NVRTC library (and its builtins) we are linked with.
    identify_toolchain(tc, [&](Hasher& h) {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname)
        h.add("libnvrtc").add(sha256_resolved(info.dli_fname));
      tc.version_text = "NVRTC " + nvrtc_version();
      h.add(tc.version_text);
    });
  }

  Artifact compile(const CompileRequest& req) override {
    const auto& k = *req.kernel;
    const auto& tc = *req.toolchain;
    arch_limits(tc.target);  // validates the target
    if (auto why = k.check_params ? k.check_params(req.params, req.dtype, tc.target) : std::nullopt)
      throw InputError(fmt::format("{}[{}]/{}: {}", k.name, req.params.str(), to_string(req.dtype), *why));
    if (auto why = k.language_mismatch(tc.name, tc.kind)) throw InputError(*why);
    if (tc.kind == "triton") return compile_triton(req);
    if (is_library_kernel(k.name)) return compile_library(req);
    const std::string src = req.kernel_dir + "/" + k.source;
    const std::string cubin = req.out_dir + "/kernel.cubin";
    CompileOutput co;
    if (tc.kind == "nvcc") co = compile_nvcc(req, src, cubin);
    else if (tc.kind == "nvrtc") co = compile_nvrtc(req, src, cubin);
    else if (tc.kind == "clang-cuda") co = compile_clang(req, src, cubin);
    else throw InputError(fmt::format("toolchain '{}': unknown CUDA kind '{}'", tc.name, tc.kind));

    Artifact a = make_artifact(req, cubin, "kb_matmul", co.wall_s, co.log);
    const auto ls = launch_shape(a.kernel, a.params, a.dtype);
    fill_metrics(a, co.log, ls.threads, ls.dynamic_smem, false);
    if (k.name == "matmul_ws_sm90") a.metrics["tmap_by_value"] = tc.kind == "clang-cuda" ? 0 : 1;
    return a;
  }

  std::unique_ptr<Executable> load(const Artifact& art) override {
    return make_cuda_executable(art);
  }

 private:
  // `cublas`: no compiler runs. The artifact's binary is a marker file (so the compile cache and results
  // hold it like any other), its code hash the SHA-256 of the libcublas that is loaded, and it has no static
  // metrics: there is no cubin of ours to read them from.
  static Artifact compile_library(const CompileRequest& req) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string why;
    const std::string lib = cublas_library_path(&why);
    if (lib.empty())
      throw CompileError(fmt::format("{}: {} cannot be built: {}", req.toolchain->name, req.kernel->name, why), why);
    const std::string& hash = cublas_library_sha256();
    const std::string marker = req.out_dir + "/kernel.cublas";
    write_file_atomic(marker, fmt::format("cuBLAS cublasGemmEx\nlibrary {}\nsha256 {}\n", lib, hash));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Artifact a = make_artifact(req, marker, "cublasGemmEx", wall,
                               fmt::format("no compiler run: {} is cuBLAS' cublasGemmEx from {}", req.kernel->name, lib));
    a.code_hash = hash;
    return a;
  }

  // A Triton kernel through the one Triton compile path; the metrics come from the cubin as for every other
  // kind, spills from the `ptxas -v` the release itself ran, shared memory from Triton's metadata too
  // (Triton's shared memory is dynamic: the cubin's .nv.shared holds only what ptxas reserves).
  static Artifact compile_triton(const CompileRequest& req) {
    triton::Compiled c = triton::compile(req);
    Artifact a = make_artifact(req, c.binary_path, c.entry, c.compile_s, c.log);
    fill_metrics(a, c.log, 32 * c.num_warps, c.shared_bytes, true);
    a.metrics["num_warps"] = c.num_warps;
    // Partitions, warps and register limits per warp group; TMA / wgmma / tcgen05 counts (docs/triton.md, TLX).
    for (const auto& [name, v] : triton::compiled_warp_group_metrics(c.binary_path, c.entry, c.num_warps)) a.metrics[name] = v;
    return a;
  }

  static std::string nvrtc_version() {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return fmt::format("{}.{}", major, minor);
  }

  // The cubin's metrics, the spills ptxas -v printed in `log`, and the occupancy for blocks of `threads` with
  // `dynamic_smem` bytes on top of the static shared memory. smem_bytes is the static figure, or static plus
  // dynamic when `smem_with_dynamic` (a Triton kernel's shared memory is all dynamic).
  static void fill_metrics(Artifact& a, const std::string& log, int threads, int64_t dynamic_smem,
                           bool smem_with_dynamic) {
    auto m = read_cubin(a.binary_path, a.entry);
    if (!m.kernel_found) throw CompileError(fmt::format("{}: cubin has no kernel '{}'", a.binary_path, a.entry), "");
    a.code_hash = m.code_hash;
    a.code_bytes = m.code_bytes;
    if (m.registers) a.metrics["registers"] = double(*m.registers);
    if (m.frame_bytes) a.metrics["frame_bytes"] = double(*m.frame_bytes);
    if (m.min_stack_bytes) a.metrics["stack_bytes"] = double(*m.min_stack_bytes);
    if (m.max_stack_bytes) a.metrics["max_stack_bytes"] = double(*m.max_stack_bytes);
    a.metrics["smem_bytes"] = double(m.smem_bytes + (smem_with_dynamic ? dynamic_smem : 0));
    auto p = parse_ptxas_log(log, a.entry);
    if (p.spill_stores) a.metrics["spill_stores"] = double(*p.spill_stores);
    if (p.spill_loads) a.metrics["spill_loads"] = double(*p.spill_loads);
    a.metrics["threads_per_block"] = threads;
    a.metrics["dynamic_smem_bytes"] = double(dynamic_smem);
    a.metrics["occupancy"] = theoretical_occupancy(arch_limits(a.target), int(m.registers.value_or(0)), threads,
                                                   m.smem_bytes + dynamic_smem);
  }
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

}  // namespace kb
