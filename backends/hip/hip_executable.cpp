// A HIP code object loaded with hipModuleLoadData and launched with hipModuleLaunchKernel, timed with
// hipEvents. Written against ROCm 5.2's API; no AMD GPU was available while writing it, so this file
// has compiled but never run (see the backend's report).
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/half_bits.h"
#include "backends/hip/hip_api.h"
#include "backends/hip/hip_kernels.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb {

namespace {

class HipExecutable : public Executable {
 public:
  HipExecutable(const HipApi& api, const Artifact& art) : api_(api), art_(art) {
    launch_ = hip_launch_shape(art.kernel, art.params);
    KB_HIP_CALL(api_, hipSetDevice, 0);
    // Check the device's ISA before loading, for a clear message (hipModuleLoadData would only say
    // hipErrorNoBinaryForGpu). The struct is padded: newer runtimes' layouts are larger.
    struct {
      hipDeviceProp_t p;
      char spare[4096];
    } props{};
    KB_HIP_CALL(api_, hipGetDeviceProperties, &props.p, 0);
    std::string arch(props.p.gcnArchName, strnlen(props.p.gcnArchName, sizeof(props.p.gcnArchName)));
    device_arch_ = arch.substr(0, arch.find(':'));
    std::string want = art.target.substr(0, art.target.find(':'));
    if (!device_arch_.empty() && device_arch_ != want)
      throw EnvError(fmt::format("{}: built for {}, but device 0 is {} ({})", art.binary_path, want, device_arch_,
                                 props.p.name));
    int l2 = 0;
    KB_HIP_CALL(api_, hipDeviceGetAttribute, &l2, hipDeviceAttributeL2CacheSize, 0);
    // Twice the L2, and at least 512 MiB: gfx94x has a 256 MiB Infinity Cache behind the L2.
    flush_bytes_ = std::max<size_t>(size_t(2) * size_t(std::max(l2, 0)), size_t(512) << 20);

    code_ = read_file(art.binary_path);
    KB_HIP_CALL(api_, hipModuleLoadData, &module_, code_.data());
    KB_HIP_CALL(api_, hipModuleGetFunction, &function_, module_, art.entry.c_str());
    KB_HIP_CALL(api_, hipEventCreate, &start_);
    KB_HIP_CALL(api_, hipEventCreate, &stop_);
  }

  ~HipExecutable() override {
    // Best effort: the destructor must not throw.
    for (void* p : {a_, b_, c_, flush_})
      if (p) (void)api_.hipFree(p);
    if (start_) (void)api_.hipEventDestroy(start_);
    if (stop_) (void)api_.hipEventDestroy(stop_);
    if (module_) (void)api_.hipModuleUnload(module_);
  }

  void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) override {
    if (auto why = find_kernel("hip", art_.kernel).check_shape(art_.params, art_.dtype, shape)) throw Error(*why);
    if (A.size() != size_t(shape.M * shape.K) || B.size() != size_t(shape.K * shape.N))
      throw Error(fmt::format("prepare {}: A/B sizes {} / {} do not match the shape", shape.str(), A.size(), B.size()));
    shape_ = shape;
    for (void** p : {&a_, &b_, &c_})
      if (*p) {
        KB_HIP_CALL(api_, hipFree, *p);
        *p = nullptr;
      }
    upload(A, &a_);
    upload(B, &b_);
    size_t c_bytes = size_t(shape.M * shape.N) * sizeof(float);
    KB_HIP_CALL(api_, hipMalloc, &c_, c_bytes);
    KB_HIP_CALL(api_, hipMemset, c_, 0xff, c_bytes);  // NaN: a kernel that skips an element fails the check
    KB_HIP_CALL(api_, hipDeviceSynchronize);
  }

  TimedSample run(int batch) override {
    if (!c_) throw Error("run() before prepare()");
    if (batch < 1) batch = 1;
    unsigned gx = unsigned((shape_.N + launch_.block_n - 1) / launch_.block_n);
    unsigned gy = unsigned((shape_.M + launch_.block_m - 1) / launch_.block_m);
    int M = int(shape_.M), N = int(shape_.N), K = int(shape_.K);
    void* args[] = {&a_, &b_, &c_, &M, &N, &K};
    KB_HIP_CALL(api_, hipEventRecord, start_, nullptr);
    for (int i = 0; i < batch; ++i)
      KB_HIP_CALL(api_, hipModuleLaunchKernel, function_, gx, gy, 1, unsigned(launch_.threads), 1, 1, 0, nullptr,
                  args, nullptr);
    KB_HIP_CALL(api_, hipEventRecord, stop_, nullptr);
    KB_HIP_CALL(api_, hipEventSynchronize, stop_);
    KB_HIP_CALL(api_, hipGetLastError);
    float ms = 0;
    KB_HIP_CALL(api_, hipEventElapsedTime, &ms, start_, stop_);
    TimedSample s;
    s.seconds = double(ms) * 1e-3 / batch;
    return s;
  }

  void flush_caches() override {
    if (!flush_) KB_HIP_CALL(api_, hipMalloc, &flush_, flush_bytes_);
    KB_HIP_CALL(api_, hipMemset, flush_, int(++flush_value_ & 0xff), flush_bytes_);
    KB_HIP_CALL(api_, hipDeviceSynchronize);
  }

  std::vector<float> result() override {
    if (!c_) throw Error("result() before prepare()");
    std::vector<float> c(size_t(shape_.M * shape_.N));
    KB_HIP_CALL(api_, hipMemcpy, c.data(), c_, c.size() * sizeof(float), hipMemcpyDeviceToHost);
    return c;
  }

  std::string clock_name() const override { return "hip-events"; }

 private:
  void upload(const std::vector<float>& x, void** dst) {
    std::string bytes;
    if (art_.dtype == DType::f32) {
      bytes.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
    } else {
      std::vector<uint16_t> h = to_16bit(x, art_.dtype);
      bytes.assign(reinterpret_cast<const char*>(h.data()), h.size() * sizeof(uint16_t));
    }
    KB_HIP_CALL(api_, hipMalloc, dst, bytes.size());
    KB_HIP_CALL(api_, hipMemcpy, *dst, bytes.data(), bytes.size(), hipMemcpyHostToDevice);
  }

  const HipApi& api_;
  Artifact art_;
  HipLaunchShape launch_;
  std::string device_arch_, code_;
  hipModule_t module_ = nullptr;
  hipFunction_t function_ = nullptr;
  hipEvent_t start_ = nullptr, stop_ = nullptr;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *flush_ = nullptr;
  size_t flush_bytes_ = 0;
  unsigned flush_value_ = 0;
  Shape shape_;
};

}  // namespace

std::unique_ptr<Executable> make_hip_executable(const HipApi& api, const Artifact& art) {
  return std::make_unique<HipExecutable>(api, art);
}

}  // namespace kb
