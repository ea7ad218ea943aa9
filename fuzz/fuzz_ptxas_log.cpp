// `ptxas -v` figures parsed from any log text. The first line names the kernel to look for.
#include "backends/cuda/cubin_metrics.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = kb::fuzz::as_text(data, size);
  size_t nl = text.find('\n');
  std::string kernel = nl == std::string::npos ? text : text.substr(0, nl);
  kb::fuzz::refused_or_read([&] { (void)kb::cuda::parse_ptxas_log(text, kernel); });
  return 0;
}
