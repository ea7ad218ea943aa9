#include "backends/hip/hip_api.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"

namespace kb {

namespace {

struct Loaded {
  HipApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  void* h = nullptr;
  std::string errors;
  for (const char* name : {"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    const char* e = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e ? e : name);
  }
  if (!h) {
    l.why = fmt::format("HIP runtime not found (dlopen libamdhip64: {})", errors);
    return l;
  }
  auto sym = [&](const char* name) { return dlsym(h, name); };
  std::string missing;
#define KB_HIP_LOAD(fn)                                                  \
  l.api.fn = reinterpret_cast<decltype(l.api.fn)>(sym(#fn));             \
  if (!l.api.fn) missing += std::string(missing.empty() ? "" : ", ") + #fn;
  KB_HIP_RUNTIME_FUNCTIONS(KB_HIP_LOAD)
#undef KB_HIP_LOAD
  l.api.hipMalloc = reinterpret_cast<decltype(l.api.hipMalloc)>(sym("hipMalloc"));
  if (!l.api.hipMalloc) missing += std::string(missing.empty() ? "" : ", ") + "hipMalloc";
  if (!missing.empty()) {
    l.why = fmt::format("libamdhip64 lacks {}", missing);
    return l;
  }
  bool rtc = true;
#define KB_HIPRTC_LOAD(fn)                                   \
  l.api.fn = reinterpret_cast<decltype(l.api.fn)>(sym(#fn)); \
  rtc = rtc && l.api.fn != nullptr;
  KB_HIPRTC_FUNCTIONS(KB_HIPRTC_LOAD)
#undef KB_HIPRTC_LOAD
  l.api.has_hiprtc = rtc;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(l.api.hipGetDeviceCount), &info) && info.dli_fname) {
    std::error_code ec;
    auto real = std::filesystem::canonical(info.dli_fname, ec);
    l.api.library_path = ec ? info.dli_fname : real.string();
  }
  l.ok = true;
  return l;
}

}  // namespace

const HipApi* hip_api(std::string* why) {
  static const Loaded loaded = load();  // never dlclose'd: the runtime's own threads outlive us
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

void hip_check(const HipApi& api, hipError_t rc, const char* call, const char* file, int line) {
  if (rc == hipSuccess) return;
  const char* name = api.hipGetErrorName ? api.hipGetErrorName(rc) : "?";
  const char* text = api.hipGetErrorString ? api.hipGetErrorString(rc) : "";
  std::string msg = fmt::format("{} failed: {} ({}): {} [{}:{}]", call, name ? name : "?", int(rc), text ? text : "",
                                std::filesystem::path(file).filename().string(), line);
  if (rc == hipErrorNoDevice || rc == hipErrorInsufficientDriver || rc == hipErrorNoBinaryForGpu) throw EnvError(msg);
  throw Error(msg);
}

void hiprtc_check(const HipApi& api, hiprtcResult rc, const char* call, const char* file, int line) {
  if (rc == HIPRTC_SUCCESS) return;
  const char* text = api.hiprtcGetErrorString ? api.hiprtcGetErrorString(rc) : "?";
  throw Error(fmt::format("{} failed: {} ({}) [{}:{}]", call, text ? text : "?", int(rc),
                          std::filesystem::path(file).filename().string(), line));
}

}  // namespace kb
