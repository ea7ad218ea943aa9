// Cubin metrics (.nv.info attributes, .nv.shared sizes, code hash) read from any bytes, for the kernel
// named by the first symbol the ELF has (so the per-kernel records are reached) and for a missing one.
#include "backends/cuda/cubin_metrics.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kb::fuzz::refused_or_read([&] {
    auto elf = kb::ElfFile::from_bytes(kb::fuzz::as_text(data, size), "fuzz.cubin");
    for (const auto& s : elf.symbols())
      if (!s.name.empty()) {
        (void)kb::cuda::cubin_metrics(elf, s.name);
        break;
      }
    (void)kb::cuda::cubin_metrics(elf, "no_such_kernel");
  });
  return 0;
}
