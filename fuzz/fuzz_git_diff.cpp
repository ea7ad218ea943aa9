// git's output as kbisect reads it: `git diff-tree -p -U0` (one commit or several) and C-quoted paths.
#include "fuzz/fuzz_input.h"
#include "git/git.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = kb::fuzz::as_text(data, size);
  kb::fuzz::refused_or_read([&] {
    for (const auto& c : kb::git::parse_diff_tree(text)) (void)c;
    (void)kb::git::unquote_path(text.substr(0, 256));
  });
  return 0;
}
