// The YAML readers that take text: core's loader and field helpers, toolchain files, the upstream config,
// external-metric mappings, bisect, nightly and presubmit configs. The first byte picks the reader. Sweep files are
// not fuzzed here: parsing one resolves its toolchains by running their compilers.
#include <yaml-cpp/yaml.h>

#include "backends/toolchain.h"
#include "core/text.h"
#include "fuzz/fuzz_input.h"
#include "bisect/config.h"
#include "harness/external.h"
#include "nightly/nightly.h"
#include "presubmit/config.h"
#include "upstream/upstream.h"

namespace {

void read_fields(const std::string& text) {
  kb::YamlCtx cx{"fuzz.yaml"};
  YAML::Node root = kb::yaml_load(text, cx.origin);
  if (!root.IsMap()) return;
  kb::check_yaml_keys(cx, root, "fuzz", {"name", "value", "list"});
  for (const auto& kv : root) {
    (void)cx.at(kv.second);
    (void)kb::yaml_scalar(cx, kv.second, "name");
    (void)kb::yaml_number(cx, kv.second, "value");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text = kb::fuzz::as_text(data + 1, size - 1);
  kb::fuzz::refused_or_read([&] {
    switch (data[0] % 7) {
      case 0: read_fields(text); break;
      case 1: (void)kb::parse_toolchains(text, "fuzz.yaml", {{"root", "/opt"}}); break;
      case 2: (void)kb::upstream::parse_config(text, "fuzz.yaml"); break;
      case 3: (void)kb::parse_external_metric(text, "fuzz.yaml"); break;
      case 4: (void)kb::bisect::parse_bisect_config(text, "/nonexistent/fuzz.yaml"); break;
      case 5: (void)kb::nightly::parse_nightly_config(text, "/nonexistent/fuzz.yaml"); break;
      default: (void)kb::presubmit::parse_presubmit_config(text, "/nonexistent/fuzz.yaml"); break;
    }
  });
  return 0;
}
