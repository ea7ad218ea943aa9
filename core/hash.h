// Content hashes (SHA-256 from LLVM's Support library, docs/design.md's dependency table).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kb {

// Incremental SHA-256. Each add() is length-prefixed so ("ab","c") and ("a","bc") differ.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher& add(std::string_view data);
  Hasher& add_raw(std::string_view data);  // no length prefix (for streaming file contents)
  std::string hex();                       // finishes; the hasher is spent afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view data);
std::string sha256_file(const std::string& path);  // throws InputError if unreadable

}  // namespace kb
