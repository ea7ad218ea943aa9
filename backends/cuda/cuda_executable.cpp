#include "backends/cuda/cuda_executable.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "backends/cpu/placement.h"
#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/device_digest.h"
#include "backends/cuda/triton_launch.h"
#include "backends/cuda/user_tensors.h"
#include "backends/triton/user_kernel.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/half_bits.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::cuda {

namespace {

const KernelDecl& decl_of(const std::string& name) {
  for (const auto& k : cuda_kernels())
    if (k.name == name) return k;
  for (const KernelDecl* k : triton::user_kernel_decls("cuda"))
    if (k->name == name) return *k;
  throw InputError(fmt::format("unknown CUDA kernel '{}'", name));
}

class CudaExecutable : public Executable {
 public:
  explicit CudaExecutable(const Artifact& art)
      : art_(art), decl_(decl_of(art.kernel)), ls_(launch_shape(art.kernel, art.params, art.dtype)) {
    auto& d = driver();
    if (!d.ok) throw EnvError(d.reason);
    if (std::string why; ls_.args == ArgStyle::Library && cublas_library_path(&why).empty())
      throw EnvError(fmt::format("{}: cuBLAS: {}", art.kernel, why));  // before anything is held
    int ordinal = 0;
    if (const char* e = getenv("KBISECT_CUDA_DEVICE"); e && *e) ordinal = std::atoi(e);
    KB_CU(d.cuDeviceGet(&dev_, ordinal));
    int major = 0, minor = 0;
    KB_CU(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_));
    KB_CU(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_));
    KB_CU(d.cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
    auto a = arch_limits(art.target);
    const int device_sm = major * 10 + minor;
    device_sm_ = device_sm;
    device_name_ = fmt::format("cuda:{} (sm_{})", ordinal, device_sm);
    // A library kernel has no cubin: cuBLAS picks its own code for the device, whatever the target.
    const bool runs = a.sm / 10 == major && device_sm >= a.sm && (!a.arch_specific || device_sm == a.sm);
    if (!runs && ls_.args != ArgStyle::Library)
      throw EnvError(fmt::format("{} was compiled for {}; device {} is sm_{} (cubins do not run across major "
                                 "versions; 'a' targets need the exact arch)",
                                 art.kernel, art.target, ordinal, device_sm));
    if (ls_.args == ArgStyle::Triton) {  // before anything is held: a wrong ABI fails here
      triton_ = std::make_unique<TritonLaunch>(TritonLaunch::read(art));
      ls_.threads = 32 * triton_->num_warps;
      ls_.dynamic_smem = triton_->shared;
      art_.entry = triton_->entry;
      user_kernel_ = triton::find_user_kernel(art.kernel);
    }
    KB_CU(d.cuDevicePrimaryCtxRetain(&ctx_, dev_));
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuDeviceGetUuid(&uuid_, dev_));
    if (ls_.args != ArgStyle::Library) {
      std::string image = read_file(art.binary_path);
      KB_CU(d.cuModuleLoadData(&module_, image.data()));
      KB_CU(d.cuModuleGetFunction(&fn_, module_, art_.entry.c_str()));
      if (ls_.dynamic_smem > 48 * 1024)
        KB_CU(d.cuFuncSetAttribute(fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(ls_.dynamic_smem)));
    }
    KB_CU(d.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    if (ls_.args == ArgStyle::Library) cublas_ = std::make_unique<CublasGemm>(stream_);
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
    digest_.reset();
    user_.reset();
    drop_graphs();
    cublas_.reset();
    for (CUdeviceptr p : {dA_, dB_, dC_, dMaps_, l2_, gaps_[0], gaps_[1], gaps_[2], dScratch_[0], dScratch_[1]})
      if (p) d.cuMemFree(p);
    if (start_) d.cuEventDestroy(start_);
    if (stop_) d.cuEventDestroy(stop_);
    if (stream_) d.cuStreamDestroy(stream_);
    if (module_) d.cuModuleUnload(module_);
    d.cuDevicePrimaryCtxRelease(dev_);
  }

  void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) override {
    if (user_kernel_) return prepare_user(shape);
    if (decl_.check_shape)
      if (auto why = decl_.check_shape(art_.params, art_.dtype, shape)) throw Error(fmt::format("{}: {}", art_.kernel, *why));
    if (int64_t(A.size()) != shape.M * shape.K || int64_t(B.size()) != shape.K * shape.N)
      throw Error(fmt::format("{}: input sizes do not match shape {}", art_.kernel, shape.str()));
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuStreamSynchronize(stream_));
    drop_graphs();
    shape_ = shape;
    const size_t esz = dtype_bytes(art_.dtype);
    // A freed device range is handed out again by the next allocation of its size, so every fresh load of
    // a process would get the same addresses. A random gap held before each operand moves them between
    // loads (docs/statistics.md, "Placement per block"); KBISECT_CUDA_GAPS=0 turns the gaps off.
    draw_gap(0);
    realloc(dA_, A.size() * esz);
    draw_gap(1);
    realloc(dB_, B.size() * esz);
    draw_gap(2);
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
    if (triton_) bind_triton();
    KB_CU(d.cuStreamSynchronize(stream_));
  }

  TimedSample run(int batch) override {
    if (!dC_ && !user_) throw Error(fmt::format("{}: run() before prepare()", art_.kernel));
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
    wait_for(stop_);
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
      l2_bytes_ = l2_flush_bytes(l2);
      KB_CU(d.cuMemAlloc(&l2_, l2_bytes_));
    }
    // A memset of twice the L2 evicts the operands (one L2's worth is not enough: the replacement policy
    // keeps part of the old lines, and Hopper's L2 is two partitions); stream order keeps it out of the
    // next timing.
    KB_CU(d.cuMemsetD8Async(l2_, uint8_t(++flush_value_), l2_bytes_, stream_));
  }

  std::vector<float> result() override {
    if (user_kernel_) throw Error(fmt::format("{}: a user kernel's outputs are compared on the device, not read back", art_.kernel));
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuStreamSynchronize(stream_));
    std::vector<float> c(size_t(shape_.M * shape_.N));
    KB_CU(d.cuMemcpyDtoH(c.data(), dC_, c.size() * sizeof(float)));
    return c;
  }

  // On the device (backends/cuda/device_digest.h); KBISECT_DIGEST=host computes it on the host from
  // result() instead, to compare the two.
  ResultDigest digest(const Shape& shape, const DigestRequest& req) override {
    if (user_kernel_) throw Error(fmt::format("{}: a user kernel has no GEMM result to digest", art_.kernel));
    if (const char* e = getenv("KBISECT_DIGEST"); e && std::string(e) == "host") return Executable::digest(shape, req);
    if (!dC_ || shape.M != shape_.M || shape.N != shape_.N)
      throw Error(fmt::format("{}: digest of {} asked, prepared for {}", art_.kernel, shape.str(), shape_.str()));
    KB_CU(driver().cuCtxSetCurrent(ctx_));
    if (!digest_) digest_ = std::make_unique<DeviceDigest>(device_sm_, stream_);
    return digest_->compute(dC_, shape_, req, device_name_);
  }

  std::shared_ptr<const OutputSnapshot> snapshot_outputs() override {
    if (!user_) throw Error(fmt::format("{}: outputs asked of a kernel that is not a prepared user kernel", art_.kernel));
    KB_CU(driver().cuCtxSetCurrent(ctx_));
    return user_->snapshot(dev_, stream_);
  }

  OutputCheck compare_outputs(const OutputSnapshot& reference, const ToleranceOf& tolerance) override {
    if (!user_) throw Error(fmt::format("{}: outputs asked of a kernel that is not a prepared user kernel", art_.kernel));
    KB_CU(driver().cuCtxSetCurrent(ctx_));
    return user_->compare(reference, tolerance, device_sm_, stream_, device_name_);
  }

  std::string clock_name() const override { return "cuda-events"; }

  // The device addresses of the operands and the gaps drawn before them (in 2 MiB units).
  std::string placement() const override {
    return fmt::format("A=0x{:x} B=0x{:x} C=0x{:x} gaps={},{},{}", dA_, dB_, dC_, gap_units_[0], gap_units_[1],
                       gap_units_[2]);
  }

 private:
  // cuEventSynchronize has no deadline: a kernel that never ends (a hung mbarrier ring) would hold the
  // process, and the lease, forever. Poll instead, and give up after $KBISECT_CUDA_TIMEOUT_S (default 60 s)
  // with an error that says so; the context is unusable afterwards, so the error is an EnvError.
  void wait_for(CUevent ev) {
    auto& d = driver();
    const double limit = kernel_timeout_s();
    const auto t0 = std::chrono::steady_clock::now();
    for (int spin = 0;; ++spin) {
      CUresult r = d.cuEventQuery(ev);
      if (r == CUDA_SUCCESS) return;
      if (r != CUDA_ERROR_NOT_READY) KB_CU(r);
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > limit)
        throw EnvError(fmt::format("{}[{}] on {}: the launch did not finish within {:.0f} s (KBISECT_CUDA_TIMEOUT_S); "
                                   "the kernel is hung or far too slow, and the GPU context cannot be used again",
                                   art_.kernel, art_.params.str(), shape_.str(), limit));
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(waited > 1 ? 1000 : 20));
    }
  }

  // Replaces gap i by a fresh allocation of 0..31 units of 2 MiB (the driver's large-page granule).
  void draw_gap(int i) {
    auto& d = driver();
    if (gaps_[i]) KB_CU(d.cuMemFree(gaps_[i]));
    gaps_[i] = 0;
    gap_units_[i] = 0;
    static const bool enabled = [] {
      const char* e = getenv("KBISECT_CUDA_GAPS");
      return !(e && std::string(e) == "0");
    }();
    if (!enabled) return;
    gap_units_[i] = int(placement_draw(32));
    if (gap_units_[i]) KB_CU(d.cuMemAlloc(&gaps_[i], size_t(gap_units_[i]) << 21));
  }

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

  // A user's Triton kernel: its own tensors for the shape's label, filled with their initial bytes (the
  // random gaps before them as for A, B and C), then the launch bound to them.
  void prepare_user(const Shape& shape) {
    auto& d = driver();
    KB_CU(d.cuCtxSetCurrent(ctx_));
    KB_CU(d.cuStreamSynchronize(stream_));
    drop_graphs();
    shape_ = shape;
    user_.reset();
    user_ = std::make_unique<UserTensors>(*user_kernel_, shape.label);
    user_->upload([this](int i) { draw_gap(i); });
    bind_triton();
  }

  // The Triton launch for this shape: its grid, its scratch buffers (sized by the grid), its arguments.
  void bind_triton() {
    bound_ = triton_->plan(shape_, sms_);
    const size_t bytes[2] = {bound_.global_scratch_bytes, bound_.profile_scratch_bytes};
    for (int i = 0; i < 2; ++i) {  // NULL when the release asks for none, as Triton's own launcher passes
      if (dScratch_[i]) KB_CU(driver().cuMemFree(dScratch_[i]));
      dScratch_[i] = 0;
      if (bytes[i]) KB_CU(driver().cuMemAlloc(&dScratch_[i], bytes[i]));
    }
    if (user_) triton_->bind(bound_, shape_, sms_, user_->pointers(), user_->args().reals, &dScratch_[0], &dScratch_[1],
                             &user_->args().tensors);
    else triton_->bind(bound_, shape_, sms_, &dA_, &dB_, &dC_, &dScratch_[0], &dScratch_[1]);
  }

  void launch() {
    if (ls_.args == ArgStyle::Library) return cublas_->gemm(art_.dtype, shape_, dA_, dB_, dC_);
    if (triton_) return triton_->launch(fn_, stream_, bound_);
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
    // A library picks and loads its kernels at its first call for a shape: that happens once outside the
    // capture (one more execution, writing the same C), so the capture records launches alone.
    if (ls_.args == ArgStyle::Library) launch();
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
  CUdeviceptr gaps_[3] = {0, 0, 0};
  int gap_units_[3] = {0, 0, 0};
  unsigned flush_value_ = 0;
  alignas(128) CUtensorMap maps_[2]{};  // the type asks for 128 bytes (clang refuses less)
  bool tmap_by_value_ = true;
  std::map<int, CUgraphExec> graphs_;
  int device_sm_ = 0;
  std::string device_name_;
  std::unique_ptr<DeviceDigest> digest_;
  std::unique_ptr<CublasGemm> cublas_;  // ArgStyle::Library only
  std::unique_ptr<TritonLaunch> triton_;  // ArgStyle::Triton only
  const triton::UserKernel* user_kernel_ = nullptr;  // a user's Triton kernel: its own arguments
  std::unique_ptr<UserTensors> user_;                // ... for the prepared shape
  TritonLaunch::Bound bound_;
  CUdeviceptr dScratch_[2] = {0, 0};     // Triton's global and profile scratch (0 when unused)
};

}  // namespace

std::unique_ptr<Executable> make_cuda_executable(const Artifact& art) { return std::make_unique<CudaExecutable>(art); }

size_t l2_flush_bytes(int l2_cache_bytes) { return 2 * size_t(std::max(l2_cache_bytes, 1 << 20)); }

double kernel_timeout_s() {
  const char* e = getenv("KBISECT_CUDA_TIMEOUT_S");
  if (!e || !*e) return 60;
  char* end = nullptr;
  double v = std::strtod(e, &end);
  if (end == e || *end || !(v > 0) || !std::isfinite(v))
    throw InputError(fmt::format("KBISECT_CUDA_TIMEOUT_S='{}' is not a positive number of seconds", e));
  return v;
}

}  // namespace kb::cuda
