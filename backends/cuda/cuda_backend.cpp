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
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_kernels.h"
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

std::string cuda_root() {
  if (const char* e = getenv("CUDA_HOME"); e && *e && fs::exists(fs::path(e) / "bin" / "ptxas")) return e;
  return KBISECT_CUDA_ROOT;
}

// "sm_90a" -> "compute_90a"
std::string virtual_arch(const std::string& target) { return "compute_" + target.substr(3); }

// ---- host-side conversion of fp32 values (already rounded to the dtype by the harness) to 16-bit patterns
uint16_t to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}

uint16_t to_f16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t au = u & 0x7fffffff;
  if (au > 0x7f800000) return uint16_t(sign | 0x7e00);           // NaN
  if (au >= 0x477ff000) return uint16_t(sign | 0x7c00);          // overflow (>= 65520) -> inf
  if (au < 0x38800000) {                                         // below the smallest normal 2^-14
    if (au < 0x33000000) return uint16_t(sign);                  // < 2^-25: rounds to zero
    const uint32_t mant = (au & 0x7fffff) | 0x800000;
    const int shift = 126 - int(au >> 23);                       // 14..24 for 2^-25 .. 2^-15
    uint32_t v = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return uint16_t(sign | v);
  }
  uint32_t v = ((au >> 13) - (112u << 10));                      // rebias exponent 127 -> 15
  const uint32_t rem = au & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) ++v;
  return uint16_t(sign | v);
}

std::vector<uint16_t> to_16bit(const std::vector<float>& x, DType d) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = d == DType::bf16 ? to_bf16_bits(x[i]) : to_f16_bits(x[i]);
  return out;
}

const KernelDecl& decl_of(const std::string& name) {
  for (const auto& k : cuda_kernels())
    if (k.name == name) return k;
  throw InputError(fmt::format("unknown CUDA kernel '{}'", name));
}

// ---- the executable
class CudaExecutable : public Executable {
 public:
  explicit CudaExecutable(const Artifact& art)
      : art_(art), decl_(decl_of(art.kernel)), ls_(launch_shape(art.kernel, art.params, art.dtype)) {
    auto& d = driver();
    if (!d.ok) throw EnvError(d.reason);
    int ordinal = 0;
    if (const char* e = getenv("KBISECT_CUDA_DEVICE"); e && *e) ordinal = std::atoi(e);
    KB_CU(d.cuDeviceGet(&dev_, ordinal));
    int major = 0, minor = 0;
    KB_CU(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_));
    KB_CU(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_));
    KB_CU(d.cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
    auto a = arch_limits(art.target);
    const int device_sm = major * 10 + minor;
    if (a.sm / 10 != major || device_sm < a.sm || (a.arch_specific && device_sm != a.sm))
      throw EnvError(fmt::format("{} was compiled for {}; device {} is sm_{} (cubins do not run across major "
                                 "versions; 'a' targets need the exact arch)",
                                 art.kernel, art.target, ordinal, device_sm));
    KB_CU(d.cuDevicePrimaryCtxRetain(&ctx_, dev_));
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuDeviceGetUuid(&uuid_, dev_));
    std::string image = read_file(art.binary_path);
    KB_CU(d.cuModuleLoadData(&module_, image.data()));
    KB_CU(d.cuModuleGetFunction(&fn_, module_, art.entry.c_str()));
    if (ls_.dynamic_smem > 48 * 1024)
      KB_CU(d.cuFuncSetAttribute(fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(ls_.dynamic_smem)));
    KB_CU(d.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    KB_CU(d.cuEventCreate(&start_, CU_EVENT_DEFAULT));
    KB_CU(d.cuEventCreate(&stop_, CU_EVENT_DEFAULT));
    auto it = art.metrics.find("tmap_by_value");
    tmap_by_value_ = it == art.metrics.end() || it->second != 0;
    default_clock_mhz_ = Nvml::instance().default_sm_clock_mhz(uuid_);
  }

  ~CudaExecutable() override {
    auto& d = driver();
    if (!ctx_) return;
    d.cuCtxSetCurrent(ctx_);
    if (stream_) d.cuStreamSynchronize(stream_);
    drop_graphs();
    for (CUdeviceptr p : {dA_, dB_, dC_, dMaps_, l2_})
      if (p) d.cuMemFree(p);
    if (start_) d.cuEventDestroy(start_);
    if (stop_) d.cuEventDestroy(stop_);
    if (stream_) d.cuStreamDestroy(stream_);
    if (module_) d.cuModuleUnload(module_);
    d.cuDevicePrimaryCtxRelease(dev_);
  }

  void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) override {
    if (decl_.check_shape)
      if (auto why = decl_.check_shape(art_.params, shape)) throw Error(fmt::format("{}: {}", art_.kernel, *why));
    if (int64_t(A.size()) != shape.M * shape.K || int64_t(B.size()) != shape.K * shape.N)
      throw Error(fmt::format("{}: input sizes do not match shape {}", art_.kernel, shape.str()));
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuStreamSynchronize(stream_));
    drop_graphs();
    shape_ = shape;
    const size_t esz = dtype_bytes(art_.dtype);
    realloc(dA_, A.size() * esz);
    realloc(dB_, B.size() * esz);
    realloc(dC_, size_t(shape.M * shape.N) * sizeof(float));
    if (art_.dtype == DType::f32) {
      KB_CU(d.cuMemcpyHtoD(dA_, A.data(), A.size() * 4));
      KB_CU(d.cuMemcpyHtoD(dB_, B.data(), B.size() * 4));
    } else {
      auto a16 = to_16bit(A, art_.dtype);
      std::vector<float> bt;
      const std::vector<float>* bsrc = &B;
      if (ls_.b_transposed) {  // Bt[n][k] = B[k][n]
        bt.resize(B.size());
        for (int64_t k = 0; k < shape.K; ++k)
          for (int64_t n = 0; n < shape.N; ++n) bt[size_t(n * shape.K + k)] = B[size_t(k * shape.N + n)];
        bsrc = &bt;
      }
      auto b16 = to_16bit(*bsrc, art_.dtype);
      KB_CU(d.cuMemcpyHtoD(dA_, a16.data(), a16.size() * 2));
      KB_CU(d.cuMemcpyHtoD(dB_, b16.data(), b16.size() * 2));
    }
    // Poison C with NaN bit patterns so unwritten elements fail the check.
    KB_CU(d.cuMemsetD8Async(dC_, 0xff, size_t(shape.M * shape.N) * sizeof(float), stream_));
    if (ls_.args == ArgStyle::TensorMaps) encode_maps();
    KB_CU(d.cuStreamSynchronize(stream_));
  }

  TimedSample run(int batch) override {
    if (!dC_) throw Error(fmt::format("{}: run() before prepare()", art_.kernel));
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    batch = std::max(batch, 1);
    KB_CU(d.cuEventRecord(start_, stream_));
    if (batch == 1) {
      launch();
    } else {
      KB_CU(d.cuGraphLaunch(graph_for(batch), stream_));
    }
    KB_CU(d.cuEventRecord(stop_, stream_));
    KB_CU(d.cuEventSynchronize(stop_));
    float ms = 0;
    KB_CU(d.cuEventElapsedTime(&ms, start_, stop_));
    TimedSample s;
    s.seconds = double(ms) * 1e-3 / batch;
    s.clock_mhz = Nvml::instance().sm_clock_mhz(uuid_);
    s.throttled = default_clock_mhz_ > 0 && s.clock_mhz > 0 && s.clock_mhz < 0.75 * default_clock_mhz_;
    return s;
  }

  void flush_caches() override {
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    if (!l2_) {
      int l2 = 0;
      KB_CU(d.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_));
      l2_bytes_ = size_t(std::max(l2, 1 << 20));
      KB_CU(d.cuMemAlloc(&l2_, l2_bytes_));
    }
    // A memset of an L2-sized buffer evicts the operands; stream order keeps it out of the next timing.
    KB_CU(d.cuMemsetD8Async(l2_, uint8_t(++flush_value_), l2_bytes_, stream_));
  }

  std::vector<float> result() override {
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuStreamSynchronize(stream_));
    std::vector<float> c(size_t(shape_.M * shape_.N));
    KB_CU(d.cuMemcpyDtoH(c.data(), dC_, c.size() * sizeof(float)));
    return c;
  }

  std::string clock_name() const override { return "cuda-events"; }

 private:
  void realloc(CUdeviceptr& p, size_t bytes) {
    auto& d = driver();
    if (p) KB_CU(d.cuMemFree(p));
    p = 0;
    KB_CU(d.cuMemAlloc(&p, std::max<size_t>(bytes, 256)));
  }

  void encode_map(CUtensorMap& map, CUdeviceptr base, int64_t rows, int box_rows) {
    const CUtensorMapDataType type =
        art_.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    cuuint64_t dims[2] = {cuuint64_t(shape_.K), cuuint64_t(rows)};
    cuuint64_t strides[1] = {cuuint64_t(shape_.K) * 2};
    cuuint32_t box[2] = {cuuint32_t(ls_.block_k), cuuint32_t(box_rows)};
    cuuint32_t elem_strides[2] = {1, 1};
    KB_CU(driver().cuTensorMapEncodeTiled(&map, type, 2, reinterpret_cast<void*>(base), dims, strides, box,
                                          elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }

  void encode_maps() {
    encode_map(maps_[0], dA_, shape_.M, ls_.block_m);
    encode_map(maps_[1], dB_, shape_.N, ls_.block_n);  // Bt: N rows of K
    if (!tmap_by_value_) {
      realloc(dMaps_, sizeof(maps_));
      KB_CU(driver().cuMemcpyHtoD(dMaps_, maps_, sizeof(maps_)));
      dMapA_ = dMaps_;
      dMapB_ = dMaps_ + sizeof(CUtensorMap);
    }
  }

  void launch() {
    int M = int(shape_.M), N = int(shape_.N), K = int(shape_.K);
    unsigned gx, gy = 1;
    if (ls_.args == ArgStyle::TensorMaps) {
      int64_t tiles = ceil_div(shape_.M, ls_.block_m) * ceil_div(shape_.N, ls_.block_n);
      gx = unsigned(ls_.persistent ? std::min<int64_t>(tiles, sms_) : tiles);
    } else {
      gx = unsigned(ceil_div(shape_.N, ls_.block_n));
      gy = unsigned(ceil_div(shape_.M, ls_.block_m));
    }
    void* args[6];
    if (ls_.args == ArgStyle::TensorMaps && tmap_by_value_) {
      args[0] = &maps_[0];
      args[1] = &maps_[1];
    } else if (ls_.args == ArgStyle::TensorMaps) {
      args[0] = &dMapA_;
      args[1] = &dMapB_;
    } else {
      args[0] = &dA_;
      args[1] = &dB_;
    }
    args[2] = &dC_;
    args[3] = &M;
    args[4] = &N;
    args[5] = &K;
    KB_CU(driver().cuLaunchKernel(fn_, gx, gy, 1, unsigned(ls_.threads), 1, 1, unsigned(ls_.dynamic_smem), stream_,
                                  args, nullptr));
  }

  // A CUDA graph of `batch` back-to-back launches: one launch call per sample hides launch overhead.
  CUgraphExec graph_for(int batch) {
    if (auto it = graphs_.find(batch); it != graphs_.end()) return it->second;
    auto& d = driver();
    if (graphs_.size() >= 8) drop_graphs();
    KB_CU(d.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    try {
      for (int i = 0; i < batch; ++i) launch();
    } catch (...) {
      CUgraph g = nullptr;
      d.cuStreamEndCapture(stream_, &g);
      if (g) d.cuGraphDestroy(g);
      throw;
    }
    CUgraph graph = nullptr;
    KB_CU(d.cuStreamEndCapture(stream_, &graph));
    CUgraphExec exec = nullptr;
    CUresult rc = d.cuGraphInstantiate(&exec, graph, 0);
    d.cuGraphDestroy(graph);
    KB_CU(rc);
    graphs_[batch] = exec;
    return exec;
  }

  void drop_graphs() {
    for (auto& [b, g] : graphs_) driver().cuGraphExecDestroy(g);
    graphs_.clear();
  }

  Artifact art_;
  const KernelDecl& decl_;
  LaunchShape ls_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  CUuuid uuid_{};
  int sms_ = 1;
  unsigned default_clock_mhz_ = 0;
  Shape shape_;
  CUdeviceptr dA_ = 0, dB_ = 0, dC_ = 0, dMaps_ = 0, dMapA_ = 0, dMapB_ = 0, l2_ = 0;
  size_t l2_bytes_ = 0;
  unsigned flush_value_ = 0;
  alignas(64) CUtensorMap maps_[2]{};
  bool tmap_by_value_ = true;
  std::map<int, CUgraphExec> graphs_;
};

// ---- compile paths
struct CompileOutput {
  std::string log;
  double wall_s = 0;
};

std::vector<std::string> common_defines(const CompileRequest& req) {
  std::vector<std::string> v;
  for (const auto& [n, val] : req.params.values()) v.push_back(fmt::format("-DKB_{}={}", n, to_string(val)));
  v.push_back(req.dtype == DType::bf16 ? "-DKB_DTYPE_BF16=1"
              : req.dtype == DType::f16 ? "-DKB_DTYPE_F16=1"
                                        : "-DKB_DTYPE_F32=1");
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

std::string nvrtc_error(nvrtcResult r) { return nvrtcGetErrorString(r); }

CompileOutput compile_nvrtc(const CompileRequest& req, const std::string& src, const std::string& cubin) {
  const auto& tc = *req.toolchain;
  std::string text = read_file(src);
  std::vector<std::string> opts = {"-arch=" + tc.target, "-std=c++17", "-Xptxas=-v"};
  for (auto& f : common_defines(req)) opts.push_back(f);
  for (const auto& f : tc.flags) opts.push_back(f);
  std::vector<const char*> copts;
  for (auto& o : opts) copts.push_back(o.c_str());
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&prog, text.c_str(), src.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) throw CompileError(fmt::format("nvrtcCreateProgram: {}", nvrtc_error(rc)), "");
  struct Guard {
    nvrtcProgram* p;
    ~Guard() { nvrtcDestroyProgram(p); }
  } guard{&prog};
  rc = nvrtcCompileProgram(prog, int(copts.size()), copts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (rc != NVRTC_SUCCESS)
    throw CompileError(fmt::format("{} failed ({}) compiling {}", tc.name, nvrtc_error(rc), req.kernel->source),
                       tail(log));
  size_t size = 0;
  rc = nvrtcGetCUBINSize(prog, &size);
  if (rc != NVRTC_SUCCESS || size == 0)
    throw CompileError(fmt::format("{}: no cubin ({}); is the target a real sm_XX arch?", tc.name, nvrtc_error(rc)),
                       tail(log));
  std::string image(size, '\0');
  rc = nvrtcGetCUBIN(prog, image.data());
  if (rc != NVRTC_SUCCESS) throw CompileError(fmt::format("nvrtcGetCUBIN: {}", nvrtc_error(rc)), tail(log));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomic(cubin, image);
  return {log, wall};
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
  std::vector<std::string> kinds() const override { return {"nvcc", "nvrtc", "clang-cuda"}; }

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
      for (int v : {16, 17, 18}) clang(v, "sm_90");  // no sm_90a before clang 19 (TOOLCHAINS.md)
      for (int v : {19, 20}) clang(v, "sm_90a");
    }
    return out;
  }

  void identify(Toolchain& tc) const override {
    if (tc.kind != "nvrtc") return Backend::identify(tc);
    // In-process: the identity is the NVRTC library (and its builtins) we are linked with.
    Hasher h;
    h.add("kbisect-toolchain-v1").add(tc.backend).add(tc.kind).add(tc.target);
    for (const auto& f : tc.flags) h.add(f);
    for (const auto& [k, v] : tc.env) h.add(k).add(v);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
      std::error_code ec;
      auto real = fs::canonical(info.dli_fname, ec);
      h.add("libnvrtc").add(sha256_file(ec ? info.dli_fname : real.string()));
    }
    tc.version_text = "NVRTC " + nvrtc_version();
    h.add(tc.version_text);
    tc.identity = h.hex();
  }

  Artifact compile(const CompileRequest& req) override {
    const auto& k = *req.kernel;
    const auto& tc = *req.toolchain;
    arch_limits(tc.target);  // validates the target
    if (auto why = k.check_params ? k.check_params(req.params, req.dtype, tc.target) : std::nullopt)
      throw InputError(fmt::format("{}[{}]/{}: {}", k.name, req.params.str(), to_string(req.dtype), *why));
    const std::string src = req.kernel_dir + "/" + k.source;
    const std::string cubin = req.out_dir + "/kernel.cubin";
    CompileOutput co;
    if (tc.kind == "nvcc") co = compile_nvcc(req, src, cubin);
    else if (tc.kind == "nvrtc") co = compile_nvrtc(req, src, cubin);
    else if (tc.kind == "clang-cuda") co = compile_clang(req, src, cubin);
    else throw InputError(fmt::format("toolchain '{}': unknown CUDA kind '{}'", tc.name, tc.kind));

    Artifact a;
    a.kernel = k.name;
    a.backend = "cuda";
    a.params = req.params;
    a.dtype = req.dtype;
    a.toolchain = tc.name;
    a.toolchain_identity = tc.identity;
    a.target = tc.target;
    a.binary_path = cubin;
    a.entry = "kb_matmul";
    a.compile_s = co.wall_s;
    a.log = tail(co.log, req.log_limit);
    fill_metrics(a, co.log);
    if (k.name == "matmul_ws_sm90") a.metrics["tmap_by_value"] = tc.kind == "clang-cuda" ? 0 : 1;
    return a;
  }

  std::unique_ptr<Executable> load(const Artifact& art) override { return std::make_unique<CudaExecutable>(art); }

 private:
  static std::string nvrtc_version() {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return fmt::format("{}.{}", major, minor);
  }

  static void fill_metrics(Artifact& a, const std::string& log) {
    auto m = read_cubin(a.binary_path, a.entry);
    if (!m.kernel_found) throw CompileError(fmt::format("{}: cubin has no kernel '{}'", a.binary_path, a.entry), "");
    a.code_hash = m.code_hash;
    a.code_bytes = m.code_bytes;
    if (m.registers) a.metrics["registers"] = double(*m.registers);
    if (m.frame_bytes) a.metrics["frame_bytes"] = double(*m.frame_bytes);
    if (m.min_stack_bytes) a.metrics["stack_bytes"] = double(*m.min_stack_bytes);
    if (m.max_stack_bytes) a.metrics["max_stack_bytes"] = double(*m.max_stack_bytes);
    a.metrics["smem_bytes"] = double(m.smem_bytes);
    auto p = parse_ptxas_log(log, a.entry);
    if (p.spill_stores) a.metrics["spill_stores"] = double(*p.spill_stores);
    if (p.spill_loads) a.metrics["spill_loads"] = double(*p.spill_loads);
    auto ls = launch_shape(a.kernel, a.params, a.dtype);
    a.metrics["threads_per_block"] = ls.threads;
    a.metrics["dynamic_smem_bytes"] = double(ls.dynamic_smem);
    a.metrics["occupancy"] = theoretical_occupancy(arch_limits(a.target), int(m.registers.value_or(0)), ls.threads,
                                                   m.smem_bytes + ls.dynamic_smem);
  }
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

}  // namespace kb
