// A nightly history database (nightly/history.h) from any bytes: the file is opened as it is (never
// created), its schema version checked, then every query the CLI makes is run on it: the runs, each run
// loaded back with its samples, every series and the integrity check. SQLite reads corrupt files safely;
// what is fuzzed is kbisect's reading of the rows (types, JSON columns, missing values).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz/fuzz_input.h"
#include "nightly/history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/kb-fuzz-history-" + std::to_string(getpid()) + ".sqlite";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  kb::fuzz::refused_or_read([&] {
    kb::History h(path, /*create=*/false);
    (void)h.schema_version();
    for (const auto& r : h.runs()) (void)h.load_run(r.id);
    (void)h.series_by_case("", 0);
    (void)h.integrity_ok();
  });
  std::remove(path.c_str());
  std::remove((path + "-journal").c_str());
  return 0;
}
