// One ELF reader for every backend (CPU shared objects, cubins, AMDGPU code objects), on LLVM's
// Object library. Reads sections, symbols and notes; hashes chosen (code) sections only.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kb {

struct ElfSection {
  std::string name;
  uint32_t type = 0;    // SHT_*
  uint64_t flags = 0;   // SHF_*
  uint64_t size = 0;
  std::string data;     // empty for SHT_NOBITS
  size_t index = 0;
};

struct ElfSymbol {
  std::string name;
  uint64_t value = 0, size = 0;
  uint8_t type = 0;     // STT_*
  uint8_t binding = 0;  // STB_*
  uint16_t section_index = 0;
};

struct ElfNote {
  std::string owner;  // e.g. "AMDGPU"
  uint32_t type = 0;  // e.g. NT_AMDGPU_METADATA = 32
  std::string desc;
};

class ElfFile {
 public:
  // Throws InputError naming the path when it is not a readable 64-bit little-endian ELF.
  static ElfFile open(const std::string& path);
  static ElfFile from_bytes(std::string bytes, const std::string& name);

  const std::vector<ElfSection>& sections() const { return sections_; }
  const std::vector<ElfSymbol>& symbols() const { return symbols_; }
  const std::vector<ElfNote>& notes() const { return notes_; }
  const ElfSection* section(const std::string& name) const;  // nullptr if absent
  const std::string& name() const { return name_; }
  uint16_t machine() const { return machine_; }  // EM_*
  uint32_t eflags() const { return eflags_; }

  // SHA-256 over (name, bytes) of every section the predicate accepts, in file order.
  std::string hash_sections(const std::function<bool(const ElfSection&)>& pick) const;
  uint64_t total_size(const std::function<bool(const ElfSection&)>& pick) const;

 private:
  std::string name_;
  uint16_t machine_ = 0;
  uint32_t eflags_ = 0;
  std::vector<ElfSection> sections_;
  std::vector<ElfSymbol> symbols_;
  std::vector<ElfNote> notes_;
};

}  // namespace kb
