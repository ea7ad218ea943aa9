// AMDGPU code objects: the NT_AMDGPU_METADATA msgpack note of any ELF bytes, then the occupancy model for
// every kernel it lists on a known target.
#include "backends/hip/amdgpu_code_object.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kb::fuzz::refused_or_read([&] {
    auto elf = kb::ElfFile::from_bytes(kb::fuzz::as_text(data, size), "fuzz.hsaco");
    auto co = kb::read_amdgpu_code_object(elf);
    auto arch = kb::amdgpu_arch(co.target);
    if (!arch) arch = kb::amdgpu_arch("gfx90a");
    for (const auto& k : co.kernels) {
      (void)co.find(k.name);
      for (int threads : {64, 256, 1024}) (void)kb::amdgpu_occupancy(k, threads, *arch);
    }
  });
  return 0;
}
