#include "backends/elf.h"

#include <fmt/format.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"

namespace kb {

ElfFile ElfFile::open(const std::string& path) { return from_bytes(read_file(path), path); }

ElfFile ElfFile::from_bytes(std::string bytes, const std::string& name) {
  using namespace llvm;
  using namespace llvm::object;
  auto err_text = [](llvm::Error e) { return toString(std::move(e)); };
  auto buf = MemoryBuffer::getMemBuffer(StringRef(bytes.data(), bytes.size()), name, false);
  auto obj = ObjectFile::createObjectFile(buf->getMemBufferRef());
  if (!obj) throw InputError(fmt::format("{}: not an object file: {}", name, err_text(obj.takeError())));
  auto* elf = dyn_cast<ELF64LEObjectFile>(obj->get());
  if (!elf) throw InputError(fmt::format("{}: not a 64-bit little-endian ELF file", name));
  const auto& file = elf->getELFFile();

  ElfFile out;
  out.name_ = name;
  out.machine_ = file.getHeader().e_machine;
  out.eflags_ = file.getHeader().e_flags;
  auto sections = file.sections();
  if (!sections) throw InputError(fmt::format("{}: bad section table: {}", name, err_text(sections.takeError())));
  size_t idx = 0;
  for (const auto& sh : *sections) {
    ElfSection s;
    s.index = idx++;
    auto nm = file.getSectionName(sh);
    if (nm) s.name = nm->str();
    else consumeError(nm.takeError());
    s.type = sh.sh_type;
    s.flags = sh.sh_flags;
    s.size = sh.sh_size;
    if (sh.sh_type != ELF::SHT_NOBITS) {
      auto contents = file.getSectionContents(sh);
      if (contents) s.data.assign(reinterpret_cast<const char*>(contents->data()), contents->size());
      else consumeError(contents.takeError());
    }
    // Notes only from a section that lies inside the file: LLVM's note iterator checks sh_offset +
    // sh_size without overflow, so a wrapped sum would let it read past the end.
    if (sh.sh_type == ELF::SHT_NOTE && s.data.size() == sh.sh_size) {
      llvm::Error e = llvm::Error::success();
      for (const auto& note : file.notes(sh, e)) {
        ElfNote n;
        n.owner = note.getName().str();
        n.type = note.getType();
        auto d = note.getDesc(sh.sh_addralign ? sh.sh_addralign : 4);
        n.desc.assign(reinterpret_cast<const char*>(d.data()), d.size());
        out.notes_.push_back(std::move(n));
      }
      consumeError(std::move(e));
    }
    out.sections_.push_back(std::move(s));
  }
  for (const auto& sym : elf->symbols()) {
    // An entry is unreadable when its table lies (partly) outside the file, and then so is every other
    // entry: stop at the first, or a table whose header claims 2^40 symbols is walked one by one.
    auto esym_or = elf->getSymbol(sym.getRawDataRefImpl());
    if (!esym_or) {
      consumeError(esym_or.takeError());
      break;
    }
    const auto* esym = *esym_or;
    ElfSymbol s;
    if (esym->getType() == ELF::STT_SECTION) {
      // A section symbol is named by its section. LLVM 19 finds that section's header without checking it
      // lies inside the file (a fuzzed AMDGPU code object read past the buffer), so take the name from the
      // sections read above, which were checked.
      if (esym->st_shndx < out.sections_.size()) s.name = out.sections_[esym->st_shndx].name;
    } else {
      auto nm = sym.getName();
      if (nm) s.name = nm->str();
      else consumeError(nm.takeError());
    }
    s.value = esym->st_value;
    s.size = esym->st_size;
    s.type = esym->getType();
    s.binding = esym->getBinding();
    s.section_index = esym->st_shndx;
    out.symbols_.push_back(std::move(s));
  }
  return out;
}

const ElfSection* ElfFile::section(const std::string& name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

std::string ElfFile::hash_sections(const std::function<bool(const ElfSection&)>& pick) const {
  Hasher h;
  h.add("kbisect-code-v1");
  for (const auto& s : sections_)
    if (pick(s)) h.add(s.name).add(s.data);
  return h.hex();
}

uint64_t ElfFile::total_size(const std::function<bool(const ElfSection&)>& pick) const {
  uint64_t n = 0;
  for (const auto& s : sections_)
    if (pick(s)) n += s.size;
  return n;
}

}  // namespace kb
