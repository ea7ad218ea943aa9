#include "core/hash.h"

#include <fstream>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include "core/error.h"

namespace kb {

struct Hasher::Impl {
  llvm::SHA256 sha;
};

Hasher::Hasher() : impl_(std::make_unique<Impl>()) {}
Hasher::~Hasher() = default;

Hasher& Hasher::add(std::string_view data) {
  uint64_t n = data.size();
  impl_->sha.update(llvm::StringRef(reinterpret_cast<const char*>(&n), sizeof n));
  impl_->sha.update(llvm::StringRef(data.data(), data.size()));
  return *this;
}

Hasher& Hasher::add_raw(std::string_view data) {
  impl_->sha.update(llvm::StringRef(data.data(), data.size()));
  return *this;
}

std::string Hasher::hex() {
  auto digest = impl_->sha.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), digest.size()), /*LowerCase=*/true);
}

std::string sha256_hex(std::string_view data) { return Hasher().add_raw(data).hex(); }

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("cannot read " + path);
  Hasher h;
  std::string buf(1 << 20, '\0');
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    h.add_raw(std::string_view(buf.data(), size_t(f.gcount())));
  }
  return h.hex();
}

}  // namespace kb
