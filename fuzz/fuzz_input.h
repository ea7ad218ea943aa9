// What every fuzz target shares: the input as a string, and the rule that a reader may refuse bad input
// only with kb::Error (an InputError naming the place); any other exception, a crash or a sanitizer
// report is a bug the fuzzer stops on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace kb::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `read`; a kb::Error is the reader's answer to bad input, anything else escapes to libFuzzer.
template <typename F>
void refused_or_read(F&& read) {
  try {
    read();
  } catch (const kb::Error&) {
  }
}

}  // namespace kb::fuzz
