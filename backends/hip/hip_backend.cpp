// HIP backend: kernel source -> raw AMDGPU code object through one of three compile paths
//   hipcc      ROCm's driver (clang-15 on Debian's ROCm 5.2), device-only, no offload bundle;
//   clang-hip  a given clang (-x hip): with the ROCm headers and device libraries when they know the
//              target, else -nogpuinc -nogpulib (the kernels need neither, see kb_portability_hip.h);
//   hiprtc     in process, through libamdhip64 (dlopen'd).
// Static metrics come from the code object's AMDGPU metadata note; kernels run through hipModule* when
// an AMD GPU is present (hip_executable.cpp).
#include "backends/hip/hip_backend.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>

#include <fmt/format.h>

#include "backends/hip/amdgpu_code_object.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/warp_groups.h"
#include "backends/hip/hip_api.h"
#include "backends/hip/hip_kernels.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "core/process.h"
#include "core/text.h"

namespace kb {

std::unique_ptr<Executable> make_hip_executable(const HipApi& api, const Artifact& art);  // hip_executable.cpp

namespace {

namespace fs = std::filesystem;

// ROCm's device bitcode libraries (ockl, ocml, oclc_isa_version_<N>) as Debian and ROCm install them.
std::string device_lib_dir() {
  std::vector<std::string> candidates;
  if (const char* e = getenv("HIP_DEVICE_LIB_PATH"); e && *e) candidates.push_back(e);
  candidates.push_back("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode");
  candidates.push_back("/opt/rocm/amdgcn/bitcode");
  for (const auto& d : candidates)
    if (file_exists(d + "/ockl.bc")) return d;
  return "";
}

// The ROCm prefix whose include/hip/hip_version.h exists ("/usr" on Debian), and that version.
struct RocmHeaders {
  std::string prefix, version;  // version "5.2.21153"; empty when not found
};
RocmHeaders rocm_headers() {
  for (const std::string prefix : {"/usr", "/opt/rocm"}) {
    std::string h = prefix + "/include/hip/hip_version.h";
    if (!file_exists(h)) continue;
    std::string text = read_file(h);
    auto num = [&](const char* macro) -> std::string {
      std::smatch m;
      std::regex re(std::string("#define\\s+") + macro + "\\s+(\\d+)");
      return std::regex_search(text, m, re) ? m[1].str() : "";
    };
    std::string ma = num("HIP_VERSION_MAJOR"), mi = num("HIP_VERSION_MINOR"), pa = num("HIP_VERSION_PATCH");
    if (!ma.empty() && !mi.empty() && !pa.empty()) return {prefix, ma + "." + mi + "." + pa};
  }
  return {};
}

std::string gfx_of(const std::string& target) { return target.substr(0, target.find(':')); }

// The device libraries carry one oclc_isa_version_<N>.bc per target they support.
bool device_libs_know(const std::string& target) {
  std::string dir = device_lib_dir();
  std::string gfx = gfx_of(target);
  return !dir.empty() && gfx.rfind("gfx", 0) == 0 && file_exists(dir + "/oclc_isa_version_" + gfx.substr(3) + ".bc");
}

// The oldest clang major that knows a target (LLVM release notes: gfx940 in 15, gfx941/gfx942 in 17).
int min_clang_for(const std::string& target) {
  std::string gfx = gfx_of(target);
  if (gfx == "gfx941" || gfx == "gfx942") return 17;
  if (gfx == "gfx940") return 15;
  if (gfx == "gfx90a") return 13;
  return 0;
}

// Targets hiprtc of ROCm 5.2 was measured to compile for; gfx940 and gfx942 abort inside comgr.
bool hiprtc_known_good(const std::string& target) { return gfx_of(target) == "gfx90a"; }

std::vector<std::string> version_argv(const Toolchain& tc) {
  if (tc.kind == "hipcc") return {tc.compiler, "--offload-arch=gfx90a", "--version"};  // else it enumerates GPUs
  return {tc.compiler, "--version"};
}

std::vector<std::string> kernel_defines(const CompileRequest& req) {
  std::vector<std::string> d = {"-DKB_HIP=1", dtype_define(req.dtype)};
  for (auto& p : param_defines(req.params)) d.push_back(p);
  return d;
}

bool has_flag(const Toolchain& tc, const std::string& f) {
  return std::find(tc.flags.begin(), tc.flags.end(), f) != tc.flags.end();
}

// Argument vector for an out-of-process compile (hipcc, clang-hip).
std::vector<std::string> driver_argv(const CompileRequest& req, const std::string& out) {
  const auto& tc = *req.toolchain;
  std::vector<std::string> argv = {tc.compiler};
  if (tc.kind == "clang-hip") {
    argv.insert(argv.end(), {"-x", "hip"});
    RocmHeaders rh = rocm_headers();
    bool nogpu = has_flag(tc, "-nogpuinc") || has_flag(tc, "-nogpulib");
    if (!nogpu && !rh.prefix.empty() && device_libs_know(tc.target)) {
      argv.push_back("--rocm-path=" + rh.prefix);
      argv.push_back("--hip-version=" + rh.version);
      argv.push_back("--rocm-device-lib-path=" + device_lib_dir());
    } else if (!nogpu) {
      argv.insert(argv.end(), {"-nogpuinc", "-nogpulib"});
    }
  }
  argv.insert(argv.end(), {"--offload-arch=" + tc.target, "--cuda-device-only", "--no-gpu-bundle-output", "-c",
                           "-std=c++17", "-O3", "-Rpass-analysis=kernel-resource-usage", "-I" + req.kernel_dir});
  for (auto& d : kernel_defines(req)) argv.push_back(d);
  for (const auto& f : tc.flags) argv.push_back(f);
  argv.insert(argv.end(), {"-o", out, req.kernel_dir + "/" + req.kernel->source});
  return argv;
}

// hiprtc: the source and the options the drivers get, compiled in this process.
std::string compile_hiprtc(const CompileRequest& req, const std::string& out, std::string& log) {
  std::string why;
  const HipApi* api = hip_api(&why);
  if (!api) throw EnvError(fmt::format("toolchain '{}': {}", req.toolchain->name, why));
  if (!api->has_hiprtc) throw EnvError(fmt::format("toolchain '{}': {} has no hiprtc", req.toolchain->name,
                                                   api->library_path));
  const auto& tc = *req.toolchain;
  std::string src_path = req.kernel_dir + "/" + req.kernel->source;
  std::string src = read_file(src_path);
  std::vector<std::string> opts = {"--offload-arch=" + tc.target, "-std=c++17", "-O3", "-I" + req.kernel_dir};
  for (auto& d : kernel_defines(req)) opts.push_back(d);
  for (const auto& f : tc.flags) opts.push_back(f);
  std::vector<const char*> copts;
  for (auto& o : opts) copts.push_back(o.c_str());

  // hiprtc keeps global state in comgr; one compile at a time per process.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  hiprtcProgram prog = nullptr;
  KB_HIPRTC_CALL(*api, hiprtcCreateProgram, &prog, src.c_str(), req.kernel->source.c_str(), 0, nullptr, nullptr);
  struct Destroy {
    const HipApi* api;
    hiprtcProgram* p;
    ~Destroy() { api->hiprtcDestroyProgram(p); }
  } destroy{api, &prog};
  hiprtcResult rc = api->hiprtcCompileProgram(prog, int(copts.size()), copts.data());
  size_t log_size = 0;
  if (api->hiprtcGetProgramLogSize(prog, &log_size) == HIPRTC_SUCCESS && log_size > 1) {
    std::string text(log_size, '\0');
    if (api->hiprtcGetProgramLog(prog, text.data()) == HIPRTC_SUCCESS) log = text.substr(0, text.find('\0'));
  }
  if (rc != HIPRTC_SUCCESS)
    throw CompileError(fmt::format("{}: hiprtcCompileProgram failed ({}) compiling {}", tc.name,
                                   api->hiprtcGetErrorString(rc), req.kernel->source),
                       tail(log));
  size_t code_size = 0;
  KB_HIPRTC_CALL(*api, hiprtcGetCodeSize, prog, &code_size);
  std::string code(code_size, '\0');
  KB_HIPRTC_CALL(*api, hiprtcGetCode, prog, code.data());
  write_file_atomic(out, code);
  return src_path;
}

class HipBackend : public Backend {
 public:
  std::string name() const override { return "hip"; }

  Availability available() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!availability_) availability_ = probe();
    return *availability_;
  }

  const std::vector<KernelDecl>& kernels() const override { return hip_kernels(); }
  std::vector<std::string> kinds() const override { return {"hipcc", "clang-hip", "hiprtc", "triton"}; }

  std::vector<Toolchain> presets() const override {
    std::vector<Toolchain> out;
    auto add = [&](const std::string& name, const std::string& kind, const std::string& compiler,
                   const std::string& target, const std::string& desc, std::map<std::string, std::string> tools = {}) {
      Toolchain t;
      t.name = name;
      t.backend = "hip";
      t.kind = kind;
      t.compiler = compiler;
      t.target = target;
      t.tools = std::move(tools);
      t.origin = "preset";
      t.description = desc;
      out.push_back(std::move(t));
    };
    if (!which("hipcc").empty()) {
      // Debian's hipcc runs /usr/bin/clang++-15: hash it too, so a changed clang changes the identity.
      std::map<std::string, std::string> tools;
      if (!which("clang++-15").empty()) tools["clang"] = "clang++-15";
      add("hipcc-gfx90a", "hipcc", "hipcc", "gfx90a", "hipcc (ROCm, clang-15) device-only code object", tools);
      add("hipcc-gfx940", "hipcc", "hipcc", "gfx940", "hipcc (ROCm, clang-15) device-only code object", tools);
    }
    if (!which("clang++-19").empty()) {
      add("clang19-hip-gfx90a", "clang-hip", "clang++-19", "gfx90a", "clang-19 -x hip with the ROCm headers");
      add("clang19-hip-gfx942", "clang-hip", "clang++-19", "gfx942", "clang-19 -x hip -nogpuinc -nogpulib");
    }
    for (auto& t : triton::presets("hip")) out.push_back(std::move(t));
    if (file_exists("/usr/lib/llvm-16/bin/clang++") && file_exists("/usr/lib/llvm-16/bin/ld.lld"))
      add("clang16-hip-gfx90a", "clang-hip", "/usr/lib/llvm-16/bin/clang++", "gfx90a",
          "clang-16 -x hip with the ROCm headers (lld-16)");
    if (!which("clang++-15").empty())
      add("clang15-hip-gfx90a", "clang-hip", "clang++-15", "gfx90a", "clang-15 -x hip with the ROCm headers");
    if (const HipApi* api = hip_api(); api && api->has_hiprtc)
      add("hiprtc-gfx90a", "hiprtc", "", "gfx90a", "hiprtc (in process, libamdhip64)");
    return out;
  }

  void identify(Toolchain& tc) const override {
    if (tc.kind == "triton") return triton::identify(tc);
    if (tc.kind != "hiprtc") {
      identify_compiler_binary(tc, version_argv(tc));
      return;
    }
    std::string why;
    const HipApi* api = hip_api(&why);
    if (!api) throw EnvError(fmt::format("toolchain '{}': {}", tc.name, why));
    if (!api->has_hiprtc) throw EnvError(fmt::format("toolchain '{}': {} has no hiprtc", tc.name, api->library_path));
    identify_toolchain(tc, [&](Hasher& h) {
      h.add("libamdhip64").add(sha256_file(api->library_path));
      // comgr does the compiling; libamdhip64 loads it on first use from its own directory. Hash that file
      // without loading it here: comgr brings its own libLLVM, whose command-line options collide with
      // the libLLVM this program links unless libamdhip64 loads it its own way.
      std::string comgr = (fs::path(api->library_path).parent_path() / "libamd_comgr.so.2").string();
      std::error_code ec;
      if (auto real = fs::canonical(comgr, ec); !ec) h.add("comgr").add(real.string()).add(sha256_file(real.string()));
      else h.add("comgr-not-found");
      int major = 0, minor = 0;
      if (api->hiprtcVersion(&major, &minor) != HIPRTC_SUCCESS) major = minor = -1;
      int runtime = 0;
      if (api->hipRuntimeGetVersion(&runtime) != hipSuccess) runtime = -1;
      tc.version_text = fmt::format("hiprtc {}.{} (HIP runtime {}, {})", major, minor, runtime, api->library_path);
      h.add(tc.version_text);
    });
  }

  Artifact compile(const CompileRequest& req) override {
    const auto& k = *req.kernel;
    const auto& tc = *req.toolchain;
    if (tc.target.empty())
      throw InputError(fmt::format("HIP toolchain '{}' has no target (e.g. target: gfx90a)", tc.name));
    if (auto why = k.check_params ? k.check_params(req.params, req.dtype, tc.target) : std::nullopt)
      throw InputError(fmt::format("{}[{}]/{}: {}", k.name, req.params.str(), to_string(req.dtype), *why));
    if (auto why = k.language_mismatch(tc.name, tc.kind)) throw InputError(*why);
    if (tc.kind == "triton") return compile_triton(req);
    if (auto why = hip_path_unsupported(tc)) throw InputError(fmt::format("toolchain '{}': {}", tc.name, *why));

    std::string out = req.out_dir + "/kernel.hsaco";
    std::string log;
    auto t0 = std::chrono::steady_clock::now();
    if (tc.kind == "hiprtc") {
      compile_hiprtc(req, out, log);
    } else {
      auto argv = driver_argv(req, out);
      RunOptions o;
      o.timeout_s = req.timeout_s;
      o.env_set = tc.env;
      auto r = run_process(argv, o);
      log = argv_to_display(argv) + "\n" + r.out + r.err;
      if (!r.ok())
        throw CompileError(fmt::format("{} failed ({}) compiling {} for {}", tc.name, r.status_text(), k.source,
                                       tc.target),
                           tail(log));
    }
    double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    Artifact a = make_artifact(req, out, "kb_" + k.name, compile_s, log);
    auto elf = ElfFile::open(out);
    a.code_hash = hip_code_hash(elf);
    a.code_bytes = hip_code_bytes(elf);
    a.metrics = hip_static_metrics(elf, a.entry, tc.target, hip_launch_shape(k.name, req.params).threads);
    return a;
  }

  std::unique_ptr<Executable> load(const Artifact& art) override {
    Availability av = available();
    if (!av.ok) throw EnvError(av.reason);
    if (triton::find_triton_spec(art.kernel))
      throw EnvError(fmt::format("{}: launching Triton code objects through HIP is not built yet (compile and "
                                 "static metrics only)", art.kernel));
    return make_hip_executable(*hip_api(), art);
  }

 private:
  // A Triton kernel through the one Triton compile path; metrics from the code object's metadata note.
  static Artifact compile_triton(const CompileRequest& req) {
    triton::Compiled c = triton::compile(req);
    Artifact a = make_artifact(req, c.binary_path, c.entry, c.compile_s, c.log);
    auto elf = ElfFile::open(c.binary_path);
    a.code_hash = hip_code_hash(elf);
    a.code_bytes = hip_code_bytes(elf);
    const int threads = c.num_warps * 64;  // a Triton "warp" is a wavefront of 64 on CDNA
    a.metrics = hip_static_metrics(elf, a.entry, req.toolchain->target, threads, c.shared_bytes);
    a.metrics["dynamic_lds_bytes"] = double(c.shared_bytes);
    a.metrics["num_warps"] = c.num_warps;
    // Partitions, warps and register limits per warp group; TMA / wgmma / tcgen05 counts (docs/triton.md, TLX).
    for (const auto& [name, v] : triton::compiled_warp_group_metrics(c.binary_path, c.entry, c.num_warps)) a.metrics[name] = v;
    return a;
  }

  static Availability probe() {
    std::string why;
    const HipApi* api = hip_api(&why);
    if (!api) return {false, why};
    int count = 0;
    hipError_t rc = api->hipGetDeviceCount(&count);
    if (rc == hipErrorNoDevice) return {false, "no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)"};
    if (rc != hipSuccess) {
      const char* n = api->hipGetErrorName(rc);
      return {false, fmt::format("hipGetDeviceCount failed: {} ({})", n ? n : "?", int(rc))};
    }
    if (count <= 0) return {false, "no AMD GPU (hipGetDeviceCount: 0 devices)"};
    return {true, ""};
  }

  std::mutex mu_;
  std::optional<Availability> availability_;
};

}  // namespace

int hip_clang_major(const Toolchain& tc) {
  if (tc.kind == "hiprtc" || tc.compiler.empty()) return 0;
  static std::mutex mu;
  static std::map<std::string, int> memo;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memo.find(tc.kind + "\n" + tc.compiler); it != memo.end()) return it->second;
  int major = 0;
  try {
    RunOptions o;
    o.timeout_s = 60;
    o.env_set = tc.env;
    auto r = run_process(version_argv(tc), o);
    std::smatch m;
    std::string text = r.out + r.err;
    if (std::regex_search(text, m, std::regex("clang version (\\d+)")))
      major = int(std::min<int64_t>(decimal_int64(m[1].str(), "clang --version"), 1000));
  } catch (const Error&) {
    major = 0;  // compiler missing: the compile reports it
  }
  memo[tc.kind + "\n" + tc.compiler] = major;
  return major;
}

std::optional<std::string> hip_path_unsupported(const Toolchain& tc) {
  if (tc.kind == "hiprtc") {
    if (!hiprtc_known_good(tc.target))
      return fmt::format("hiprtc of ROCm 5.2 aborts inside comgr when compiling for {} (measured for gfx940 and "
                         "gfx942); only gfx90a is supported on this path; use clang-hip with clang-19",
                         tc.target);
    return std::nullopt;
  }
  int need = min_clang_for(tc.target);
  if (need == 0) return std::nullopt;  // not a target kbisect knows: let the compiler decide
  int have = hip_clang_major(tc);
  if (have > 0 && have < need)
    return fmt::format("{} runs clang-{}, which does not know {} (needs clang {} or newer){}", tc.kind, have,
                       tc.target, need,
                       tc.kind == "hipcc" ? "; use clang-hip with clang-19 (-nogpuinc -nogpulib)" : "");
  return std::nullopt;
}

std::string hip_code_hash(const ElfFile& elf) {
  return elf.hash_sections([](const ElfSection& s) { return s.name == ".text"; });
}

int64_t hip_code_bytes(const ElfFile& elf) {
  return int64_t(elf.total_size([](const ElfSection& s) { return s.name == ".text"; }));
}

std::map<std::string, double> hip_static_metrics(const ElfFile& elf, const std::string& symbol,
                                                  const std::string& target, int threads, int64_t dynamic_lds) {
  AmdgpuCodeObject co = read_amdgpu_code_object(elf);
  const AmdgpuKernelInfo* found = co.find(symbol);
  if (!found) throw InputError(fmt::format("{}: no metadata for kernel '{}'", elf.name(), symbol));
  AmdgpuKernelInfo with_dynamic = *found;
  with_dynamic.group_segment_bytes += dynamic_lds;
  const AmdgpuKernelInfo* k = &with_dynamic;
  std::map<std::string, double> m;
  m["vgprs"] = double(k->vgpr_count);
  m["agprs"] = double(k->agpr_count);
  m["sgprs"] = double(k->sgpr_count);
  m["vgpr_spills"] = double(k->vgpr_spill_count);
  m["sgpr_spills"] = double(k->sgpr_spill_count);
  m["lds_bytes"] = double(k->group_segment_bytes);
  if (dynamic_lds) m["dynamic_lds_bytes"] = double(dynamic_lds);
  m["scratch_bytes"] = double(k->private_segment_bytes);
  m["threads_per_block"] = double(threads);
  m["max_flat_workgroup_size"] = double(k->max_flat_workgroup_size);
  if (auto arch = amdgpu_arch(target)) {
    AmdgpuOccupancy o = amdgpu_occupancy(*k, threads, *arch);
    m["occupancy"] = o.waves_per_simd;
    m["occupancy_vgpr_limit"] = double(o.vgpr_limit);
    m["occupancy_lds_workgroups"] = double(o.lds_workgroups);
    m["workgroups_per_cu"] = double(o.workgroups_per_cu);
  }
  return m;
}

std::unique_ptr<Backend> make_hip_backend() { return std::make_unique<HipBackend>(); }

}  // namespace kb
