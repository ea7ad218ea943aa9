// The ELF reader (backends/elf.h) on any bytes: sections, symbols, notes and the section hash.
#include "backends/elf.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kb::fuzz::refused_or_read([&] {
    auto elf = kb::ElfFile::from_bytes(kb::fuzz::as_text(data, size), "fuzz.o");
    (void)elf.hash_sections([](const kb::ElfSection&) { return true; });
    (void)elf.total_size([](const kb::ElfSection& s) { return s.type == 1; });
    (void)elf.section(".text");
  });
  return 0;
}
