// The YAML readers that take text: core's loader and field helpers, toolchain files, the upstream config,
// external-metric mappings, bisect, nightly and presubmit configs, typed parameter values (every scalar of the document,
// which must print to a text that reads back to the same value and kind), and users' triton_kernel: files
// (beside a Python source whose signature is read too). The first byte picks the reader. Sweep files are
// not fuzzed here: parsing one resolves its toolchains by running their compilers.
#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "backends/param_yaml.h"
#include "backends/toolchain.h"
#include "backends/triton/user_kernel.h"
#include "core/fsutil.h"
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

// Every scalar of the document as a typed value; what it prints must read back as the same value and kind.
void read_values(const kb::YamlCtx& cx, const YAML::Node& n) {
  if (n.IsScalar()) {
    const kb::ParamValue v = kb::yaml_param_value(cx, n, "value");
    const kb::ParamValue back = kb::parse_param_value(kb::to_string(v));
    const bool nan = std::holds_alternative<double>(v) && std::get<double>(v) != std::get<double>(v);
    if (!nan && !(back == v)) std::abort();  // a value that does not survive its own text
  }
  if (n.IsSequence() || n.IsMap())
    for (const auto& x : n) read_values(cx, n.IsMap() ? x.second : x);
}

// A triton_kernel: file beside a Python source; the first line of the input is the source's def line.
void read_user_kernel(const std::string& text) {
  static const std::string dir = kb::temp_dir("kb-fuzz-kernel");
  const size_t nl = text.find('\n');
  kb::write_file_atomic(dir + "/k.py", "import triton\n@triton.jit\n" + text.substr(0, nl) + "\n    pass\n");
  kb::write_file_atomic(dir + "/k.yaml", nl == std::string::npos ? "" : text.substr(nl + 1));
  (void)kb::triton::parse_user_kernel(dir + "/k.yaml");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text = kb::fuzz::as_text(data + 1, size - 1);
  kb::fuzz::refused_or_read([&] {
    switch (data[0] % 9) {
      case 0: read_fields(text); break;
      case 1: (void)kb::parse_toolchains(text, "fuzz.yaml", {{"root", "/opt"}}); break;
      case 2: (void)kb::upstream::parse_config(text, "fuzz.yaml"); break;
      case 3: (void)kb::parse_external_metric(text, "fuzz.yaml"); break;
      case 4: (void)kb::bisect::parse_bisect_config(text, "/nonexistent/fuzz.yaml"); break;
      case 5: (void)kb::nightly::parse_nightly_config(text, "/nonexistent/fuzz.yaml"); break;
      case 6: read_values(kb::YamlCtx{"fuzz.yaml"}, kb::yaml_load(text, "fuzz.yaml")); break;
      case 7: read_user_kernel(text); break;
      default: (void)kb::presubmit::parse_presubmit_config(text, "/nonexistent/fuzz.yaml"); break;
    }
  });
  return 0;
}
