// The metrics per warp group read from any TTGIR and PTX text (backends/triton/warp_groups.h): the first
// line names the kernel's entry, then the TTGIR, a line `//--ptx--`, then the PTX.
#include "backends/triton/warp_groups.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = kb::fuzz::as_text(data, size);
  const size_t nl = text.find('\n');
  const std::string entry = nl == std::string::npos ? text : text.substr(0, nl);
  const std::string rest = nl == std::string::npos ? "" : text.substr(nl + 1);
  const size_t cut = rest.find("//--ptx--\n");
  const std::string ttgir = cut == std::string::npos ? rest : rest.substr(0, cut);
  const std::string ptx = cut == std::string::npos ? "" : rest.substr(cut + 10);
  kb::fuzz::refused_or_read([&] {
    const auto w = kb::triton::read_warp_groups(ttgir, ptx, entry, 4);
    (void)kb::triton::warp_group_metrics(w, !ptx.empty());
  });
  return 0;
}
