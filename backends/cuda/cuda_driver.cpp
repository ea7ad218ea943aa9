#include "backends/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::cuda {

namespace {
#define KB_STR2(x) #x
#define KB_STR(x) KB_STR2(x)
}  // namespace

Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.handle) {
      d.reason = "no CUDA driver (libcuda.so.1 not found)";
      return;
    }
    std::string missing;
#define KB_CU_LOAD(fn)                                                               \
  d.fn = reinterpret_cast<decltype(d.fn)>(dlsym(d.handle, KB_STR(fn)));              \
  if (!d.fn) missing += (missing.empty() ? "" : ", ") + std::string(KB_STR(fn));
    KB_CU_FUNCTIONS(KB_CU_LOAD)
#undef KB_CU_LOAD
    if (!missing.empty()) {
      d.reason = "CUDA driver too old: libcuda.so.1 lacks " + missing;
      return;
    }
    CUresult rc = d.cuInit(0);
    if (rc != CUDA_SUCCESS) {
      const char* name = nullptr;
      d.cuGetErrorName(rc, &name);
      d.reason = fmt::format("cuInit failed: {} ({})", name ? name : "?", int(rc));
      return;
    }
    int count = 0;
    if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      d.reason = "CUDA driver present but no CUDA device";
      return;
    }
    d.ok = true;
  });
  return d;
}

void check(CUresult rc, const char* call, const char* file, int line) {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  auto& d = driver();
  if (d.cuGetErrorName) d.cuGetErrorName(rc, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(rc, &desc);
  throw Error(fmt::format("{}:{}: {} failed: {} ({})", file, line, call, name ? name : std::to_string(int(rc)),
                          desc ? desc : "no description"),
              ErrorKind::environment);
}

Nvml& Nvml::instance() {
  static Nvml n;
  return n;
}

Nvml::Nvml() {
  handle_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) return;
  init_ = reinterpret_cast<int (*)()>(dlsym(handle_, "nvmlInit_v2"));
  by_uuid_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(handle_, "nvmlDeviceGetHandleByUUID"));
  clock_info_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(handle_, "nvmlDeviceGetClockInfo"));
  default_app_clock_ =
      reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(handle_, "nvmlDeviceGetDefaultApplicationsClock"));
  max_clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(handle_, "nvmlDeviceGetMaxClockInfo"));
  ok_ = init_ && by_uuid_ && clock_info_ && init_() == 0;
}

void* Nvml::device(const CUuuid& uuid) {
  // NVML names devices "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", uint8_t(uuid.bytes[i]));
  }
  void* dev = nullptr;
  if (!ok_ || by_uuid_(s.c_str(), &dev) != 0) return nullptr;
  return dev;
}

constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

unsigned Nvml::sm_clock_mhz(const CUuuid& uuid) {
  void* dev = device(uuid);
  unsigned mhz = 0;
  if (dev && clock_info_(dev, kNvmlClockSm, &mhz) == 0) return mhz;
  return 0;
}

unsigned Nvml::default_sm_clock_mhz(const CUuuid& uuid) {
  void* dev = device(uuid);
  unsigned mhz = 0;
  if (!dev) return 0;
  if (default_app_clock_ && default_app_clock_(dev, kNvmlClockSm, &mhz) == 0 && mhz > 0) return mhz;
  if (max_clock_ && max_clock_(dev, kNvmlClockSm, &mhz) == 0) return mhz;
  return 0;
}

}  // namespace kb::cuda
