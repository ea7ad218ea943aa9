// LLVM's logs as passes/ reads them: -opt-bisect-limit lines and -print-changed / -print-after-all
// dumps, then the IR normalization and the diff of the first two dumps.
#include "fuzz/fuzz_input.h"
#include "passes/explain.h"
#include "passes/passes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = kb::fuzz::as_text(data, size);
  kb::fuzz::refused_or_read([&] {
    (void)kb::parse_opt_bisect(text);
    auto dumps = kb::split_ir_dumps(text);
    if (dumps.size() >= 2)
      (void)kb::unified_diff(kb::normalize_ir(dumps[0].text), kb::normalize_ir(dumps[1].text), "a", "b", 3, 60);
  });
  return 0;
}
