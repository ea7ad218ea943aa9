#include "backends/cuda/user_tensors.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/nvrtc_cubin.h"
#include "core/error.h"

namespace kb::cuda {
namespace {

// One thread per element (grid-stride): the same rule as triton::compare_host. out[0] mismatches, out[1] the
// first mismatching index, out[2] the largest |got - ref| over finite floating pairs (a non-negative
// double's bits order like the double, so an integer atomicMax finds it).
const char* const kSource = R"CUDA(
__device__ double kb_nan() { return __longlong_as_double(0x7ff8000000000000ll); }
__device__ double kb_inf() { return __longlong_as_double(0x7ff0000000000000ll); }
__device__ double kb_load(const unsigned char* p, long long i, int code, int esz) {
  if (code == 0) {  // fp16
    const unsigned int h = ((const unsigned short*)p)[i];
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? kb_nan() : kb_inf()) : ldexp((double)(m | 0x400), e - 25);
    return (h >> 15) ? -v : v;
  }
  if (code == 1) return (double)__uint_as_float(((unsigned int)((const unsigned short*)p)[i]) << 16);  // bf16
  if (code == 2) return (double)((const float*)p)[i];
  if (code == 3) return ((const double*)p)[i];
  long long v = 0;  // integers (code 4 signed, 5 unsigned)
  if (esz == 1) v = code == 4 ? (long long)((const signed char*)p)[i] : (long long)p[i];
  else if (esz == 2) v = code == 4 ? (long long)((const short*)p)[i] : (long long)((const unsigned short*)p)[i];
  else if (esz == 4) v = code == 4 ? (long long)((const int*)p)[i] : (long long)((const unsigned int*)p)[i];
  else v = ((const long long*)p)[i];
  return (double)v;
}
__device__ bool kb_same_bits(const unsigned char* a, const unsigned char* b, long long i, int esz) {
  if (esz == 1) return a[i] == b[i];
  if (esz == 2) return ((const unsigned short*)a)[i] == ((const unsigned short*)b)[i];
  if (esz == 4) return ((const unsigned int*)a)[i] == ((const unsigned int*)b)[i];
  return ((const unsigned long long*)a)[i] == ((const unsigned long long*)b)[i];
}
extern "C" __global__ void kb_compare(const unsigned char* ref, const unsigned char* got, long long n, int code,
                                      int esz, int exact, double atol, double rtol, unsigned long long* out) {
  unsigned long long bad = 0, first = ~0ull;
  double worst = 0.0;
  const bool floating = code <= 3;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const double r = kb_load(ref, i, code, esz), g = kb_load(got, i, code, esz);
    bool mismatch;
    if (exact || !floating) mismatch = !kb_same_bits(ref, got, i, esz);
    else if (isnan(r) || isnan(g)) mismatch = isnan(r) != isnan(g);
    else if (isinf(r) || isinf(g)) mismatch = r != g;
    else mismatch = fabs(g - r) > atol + rtol * fabs(r);
    if (floating && isfinite(r) && isfinite(g) && fabs(g - r) > worst) worst = fabs(g - r);
    if (mismatch) {
      ++bad;
      if ((unsigned long long)i < first) first = (unsigned long long)i;
    }
  }
  if (bad) {
    atomicAdd(&out[0], bad);
    atomicMin(&out[1], first);
  }
  if (worst > 0.0) atomicMax(&out[2], (unsigned long long)__double_as_longlong(worst));
}
)CUDA";

int dtype_code(const std::string& t) {
  if (t == "fp16") return 0;
  if (t == "bf16") return 1;
  if (t == "fp32") return 2;
  if (t == "fp64") return 3;
  return t[0] == 'u' || t == "i1" ? 5 : 4;
}

// Device copies of a launch's outputs; it holds the device's primary context until it is dropped.
class CudaOutputs : public OutputSnapshot {
 public:
  struct Out {
    std::string name, dtype;
    int64_t elements = 0;
    CUdeviceptr copy = 0;
  };
  CudaOutputs(CUdevice dev, std::string kernel, std::string label) : dev_(dev), kernel(std::move(kernel)), label(std::move(label)) {
    KB_CU(driver().cuDevicePrimaryCtxRetain(&ctx_, dev_));
  }
  ~CudaOutputs() override {
    auto& d = driver();
    d.cuCtxSetCurrent(ctx_);
    for (const auto& o : outs)
      if (o.copy) d.cuMemFree(o.copy);
    d.cuDevicePrimaryCtxRelease(dev_);
  }
  int64_t bytes() const override {
    int64_t b = 0;
    for (const auto& o : outs) b += o.elements * triton::triton_type_bytes(o.dtype);
    return b;
  }
  CUdevice dev_;
  CUcontext ctx_ = nullptr;
  std::string kernel, label;
  std::vector<Out> outs;
};

}  // namespace

const std::string& compare_source() {
  static const std::string s = kSource;
  return s;
}

const std::string& compare_cubin(int sm) {
  return helper_cubin(kSource, "kb_compare.cu", sm, "the output comparison kernels");
}

UserTensors::UserTensors(const triton::UserKernel& kernel, const std::string& label) : kernel_(kernel.name), label_(label) {
  auto it = kernel.launches.find(label);
  if (it == kernel.launches.end())
    throw InputError(fmt::format("{}: kernel '{}' has no shape named '{}'", kernel.file, kernel.name, label));
  args_ = it->second;
  for (const auto& [name, t] : args_.tensors) buffers_[name] = 0;  // allocated by upload()
}

UserTensors::~UserTensors() {
  for (const auto& [name, p] : buffers_)
    if (p) driver().cuMemFree(p);
}

void UserTensors::upload(const std::function<void(int)>& gap) {
  auto& d = driver();
  int i = 0;
  for (const auto& [name, t] : args_.tensors) {
    if (gap) gap(i++ % 3);
    CUdeviceptr& p = buffers_[name];
    if (p) d.cuMemFree(p), p = 0;
    const std::vector<uint8_t> bytes = triton::initial_bytes(t, triton::arg_seed(label_, name));
    KB_CU(d.cuMemAlloc(&p, std::max<size_t>(bytes.size(), 16)));
    if (!bytes.empty()) KB_CU(d.cuMemcpyHtoD(p, bytes.data(), bytes.size()));
  }
}

std::map<std::string, DevicePtr*> UserTensors::pointers() {
  std::map<std::string, DevicePtr*> m;
  for (auto& [name, p] : buffers_) m[name] = reinterpret_cast<DevicePtr*>(&p);
  return m;
}

std::shared_ptr<const OutputSnapshot> UserTensors::snapshot(CUdevice dev, CUstream stream) const {
  auto& d = driver();
  auto snap = std::make_shared<CudaOutputs>(dev, kernel_, label_);
  for (const auto& [name, t] : args_.tensors) {
    if (!t.output) continue;
    CudaOutputs::Out o{name, t.dtype, t.storage_elements(), 0};
    KB_CU(d.cuMemAlloc(&o.copy, size_t(std::max<int64_t>(t.storage_bytes(), 16))));
    snap->outs.push_back(o);
    if (t.storage_bytes()) KB_CU(d.cuMemcpyDtoDAsync(o.copy, buffers_.at(name), size_t(t.storage_bytes()), stream));
  }
  KB_CU(d.cuStreamSynchronize(stream));
  return snap;
}

OutputCheck UserTensors::compare(const OutputSnapshot& ref, const ToleranceOf& tolerance, int sm, CUstream stream,
                                 const std::string& device) const {
  const auto* r = dynamic_cast<const CudaOutputs*>(&ref);
  if (!r) throw Error(fmt::format("{} / {}: the reference outputs were not kept by the CUDA backend", kernel_, label_));
  auto& d = driver();
  KB_CU(d.cuStreamSynchronize(stream));  // the run has finished writing
  CUmodule module = nullptr;
  KB_CU(d.cuModuleLoadData(&module, compare_cubin(sm).data()));
  CUdeviceptr out = 0;
  OutputCheck check;
  check.where = device;
  try {
    CUfunction fn = nullptr;
    KB_CU(d.cuModuleGetFunction(&fn, module, "kb_compare"));
    KB_CU(d.cuMemAlloc(&out, 24));
    for (const auto& o : r->outs) {
      auto it = args_.tensors.find(o.name);
      if (it == args_.tensors.end() || it->second.dtype != o.dtype || it->second.storage_elements() != o.elements)
        throw Error(fmt::format("{} / {}: output {} is not the reference's ({} {} elements)", kernel_, label_, o.name,
                                o.elements, o.dtype));
      const triton::TensorArg& t = it->second;
      const triton::OutputTolerance tol = tolerance(t.dtype);
      KB_CU(d.cuMemsetD8Async(out, 0, 8, stream));
      KB_CU(d.cuMemsetD8Async(out + 8, 0xff, 8, stream));
      KB_CU(d.cuMemsetD8Async(out + 16, 0, 8, stream));
      CUdeviceptr got = buffers_.at(o.name), refp = o.copy;
      long long n = o.elements;
      int code = dtype_code(t.dtype), esz = int(t.element_bytes()), exact = tol.bitwise ? 1 : 0;
      double atol = tol.atol, rtol = tol.rtol;
      void* argv[] = {&refp, &got, &n, &code, &esz, &exact, &atol, &rtol, &out};
      const unsigned blocks = unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 4096));
      KB_CU(d.cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, stream, argv, nullptr));
      unsigned long long res[3] = {0, 0, 0};
      KB_CU(d.cuStreamSynchronize(stream));
      KB_CU(d.cuMemcpyDtoH(res, out, sizeof res));
      triton::OutputDiff diff;
      diff.dtype = t.dtype;
      diff.elements = n;
      diff.mismatches = int64_t(res[0]);
      std::memcpy(&diff.max_abs_error, &res[2], 8);
      if (diff.mismatches) {
        diff.first = int64_t(res[1]);
        uint8_t a[8] = {}, b[8] = {};
        KB_CU(d.cuMemcpyDtoH(a, got + size_t(diff.first * esz), size_t(esz)));
        KB_CU(d.cuMemcpyDtoH(b, refp + size_t(diff.first * esz), size_t(esz)));
        diff.first_got = triton::element_value(t.dtype, a, 0);
        diff.first_ref = triton::element_value(t.dtype, b, 0);
      }
      check.outputs.emplace_back(o.name, diff);
    }
  } catch (...) {
    if (out) d.cuMemFree(out);
    d.cuModuleUnload(module);
    throw;
  }
  d.cuMemFree(out);
  d.cuModuleUnload(module);
  return check;
}

}  // namespace kb::cuda
