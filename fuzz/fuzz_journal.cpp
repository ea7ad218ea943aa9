// A bisection journal (one JSON event per line, a torn last line allowed) from any text.
#include "bisect/journal.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kb::fuzz::refused_or_read([&] { (void)kb::bisect::parse_journal(kb::fuzz::as_text(data, size), "fuzz.jsonl"); });
  return 0;
}
