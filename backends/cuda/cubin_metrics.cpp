#include "backends/cuda/cubin_metrics.h"

#include <cstring>
#include <regex>
#include <sstream>

#include "core/text.h"

namespace kb::cuda {

namespace {

uint32_t u32_at(const std::string& d, size_t off) {
  uint32_t v;
  std::memcpy(&v, d.data() + off, 4);
  return v;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

CubinMetrics read_cubin(const std::string& path, const std::string& kernel) {
  return cubin_metrics(ElfFile::open(path), kernel);
}

CubinMetrics cubin_metrics(const ElfFile& elf, const std::string& kernel) {
  CubinMetrics m;
  // ELF symbol index of the kernel: LLVM's symbol list starts after the null symbol 0.
  int64_t sym_index = -1;
  for (size_t i = 0; i < elf.symbols().size(); ++i)
    if (elf.symbols()[i].name == kernel) sym_index = int64_t(i) + 1;
  m.kernel_found = sym_index >= 0;

  // .nv.info: records [format u8][attribute u8][u16 size or value][payload when format == 0x04].
  // Per-function attributes in the global section carry [symbol index u32][value u32].
  if (const auto* info = elf.section(".nv.info")) {
    const std::string& d = info->data;
    size_t off = 0;
    while (off + 4 <= d.size()) {
      uint8_t format = uint8_t(d[off]), attr = uint8_t(d[off + 1]);
      uint16_t size;
      std::memcpy(&size, d.data() + off + 2, 2);
      size_t payload = off + 4;
      size_t next = format == 0x04 ? payload + size : payload;
      if (next > d.size()) break;
      if (format == 0x04 && size == 8 && int64_t(u32_at(d, payload)) == sym_index) {
        int64_t value = u32_at(d, payload + 4);
        if (attr == 0x2f) m.registers = value;
        else if (attr == 0x11) m.frame_bytes = value;
        else if (attr == 0x12) m.min_stack_bytes = value;
        else if (attr == 0x23) m.max_stack_bytes = value;
      }
      off = next;
    }
  }
  if (const auto* sh = elf.section(".nv.shared." + kernel)) {
    bool reserved = elf.section(".nv.shared.reserved.0") != nullptr;
    for (const auto& s : elf.symbols())
      if (starts_with(s.name, ".nv.reservedSmem")) reserved = true;
    m.reserved_smem_bytes = reserved && sh->size >= 1024 ? 1024 : 0;
    m.smem_bytes = int64_t(sh->size) - m.reserved_smem_bytes;
  }
  auto is_text = [](const ElfSection& s) { return starts_with(s.name, ".text."); };
  m.code_bytes = int64_t(elf.total_size(is_text));
  m.code_hash = elf.hash_sections([](const ElfSection& s) {
    return starts_with(s.name, ".text.") || starts_with(s.name, ".nv.info") || starts_with(s.name, ".nv.shared.");
  });
  return m;
}

PtxasFigures parse_ptxas_log(const std::string& log, const std::string& kernel) {
  PtxasFigures f;
  static const std::regex props(R"(Function properties for (\S+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex used(R"(Used (\d+) registers(.*))");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::istringstream in(log);
  std::string line, props_of, entry_of;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, props)) {
      props_of = m[1];
      continue;
    }
    if (std::regex_search(line, m, entry)) {
      entry_of = m[1];
      continue;
    }
    if (props_of == kernel && !f.stack_frame && std::regex_search(line, m, frame)) {
      f.stack_frame = decimal_int64(m[1], "ptxas log: stack frame bytes");
      f.spill_stores = decimal_int64(m[2], "ptxas log: spill store bytes");
      f.spill_loads = decimal_int64(m[3], "ptxas log: spill load bytes");
      continue;
    }
    // The "Used N registers" line follows the properties block of the same function.
    if ((props_of == kernel || entry_of == kernel) && !f.registers && std::regex_search(line, m, used)) {
      f.registers = decimal_int64(m[1], "ptxas log: registers");
      std::string rest = m[2];
      std::smatch s;
      f.smem_bytes = std::regex_search(rest, s, smem) ? decimal_int64(s[1], "ptxas log: smem bytes") : 0;
    }
  }
  return f;
}

}  // namespace kb::cuda
