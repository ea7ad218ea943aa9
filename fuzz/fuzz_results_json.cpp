// A results file (harness/results.h) from any text: JSON syntax first, then every field's type and value.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_input.h"
#include "harness/results.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  kb::fuzz::refused_or_read([&] {
    auto r = kb::results_from_json(j, "fuzz.json");
    (void)kb::to_json(r).dump();
  });
  return 0;
}
