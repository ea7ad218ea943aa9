#include "backends/cuda/nvrtc_cubin.h"

#include <nvrtc.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::cuda {

NvrtcResult nvrtc_cubin(const std::string& text, const std::string& name, const std::vector<std::string>& options) {
  NvrtcResult out;
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&prog, text.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    out.error = fmt::format("nvrtcCreateProgram: {}", nvrtcGetErrorString(rc));
    return out;
  }
  struct Guard {
    nvrtcProgram* p;
    ~Guard() { nvrtcDestroyProgram(p); }
  } guard{&prog};
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.assign(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc != NVRTC_SUCCESS) {
    out.error = fmt::format("failed ({})", nvrtcGetErrorString(rc));
    return out;
  }
  size_t size = 0;
  rc = nvrtcGetCUBINSize(prog, &size);
  if (rc != NVRTC_SUCCESS || size == 0) {
    out.error = fmt::format("no cubin ({}); is the target a real sm_XX arch?", nvrtcGetErrorString(rc));
    return out;
  }
  std::string image(size, '\0');
  rc = nvrtcGetCUBIN(prog, image.data());
  if (rc != NVRTC_SUCCESS) {
    out.error = fmt::format("nvrtcGetCUBIN: {}", nvrtcGetErrorString(rc));
    return out;
  }
  out.cubin = std::move(image);
  return out;
}

const std::string& helper_cubin(const std::string& text, const std::string& name, int sm, const std::string& what) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, std::string> cubins;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cubins.find({name, sm}); it != cubins.end()) return it->second;
  NvrtcResult r = nvrtc_cubin(text, name, {fmt::format("-arch=sm_{}", sm), "-std=c++17"});
  if (r.cubin.empty()) throw Error(fmt::format("{} do not compile for sm_{}: {} {}", what, sm, r.error, r.log));
  return cubins[{name, sm}] = std::move(r.cubin);
}

}  // namespace kb::cuda
