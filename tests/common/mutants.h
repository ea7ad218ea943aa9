// Mutants: copies of the kernel tree in which one kernel source carries one classic GEMM bug, made by
// text edits (they live with the tests, never in kernels/). An edit whose text is not found throws, so
// a kernel change cannot silently turn a mutant back into the correct kernel.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "core/fsutil.h"

namespace kb::test {

struct Edit {
  std::string from, to;  // the first `from` in the file becomes `to`
};

// Rebuilds `dir`/kernels as a copy of the source tree's kernels with `edits` applied, in order, to
// `file` (a path below kernels/, e.g. "cuda/matmul_tiled.cu"). Returns the new kernel root.
inline std::string mutant_tree(const std::string& dir, const std::string& file, const std::vector<Edit>& edits) {
  namespace fs = std::filesystem;
  const std::string root = dir + "/kernels";
  fs::remove_all(root);
  fs::create_directories(dir);
  fs::copy(kernel_dir(), root, fs::copy_options::recursive);
  std::string text = read_file(root + "/" + file);
  for (const auto& e : edits) {
    const size_t at = text.find(e.from);
    if (at == std::string::npos) throw std::runtime_error("mutant: '" + e.from + "' not in " + file);
    text.replace(at, e.from.size(), e.to);
  }
  write_file_atomic(root + "/" + file, text);
  return root;
}

// An edit that inserts `added` right after the first `anchor`.
inline Edit insert_after(const std::string& anchor, const std::string& added) { return {anchor, anchor + added}; }

// An edit that inserts `added` right before the first `anchor`.
inline Edit insert_before(const std::string& anchor, const std::string& added) { return {anchor, added + anchor}; }

}  // namespace kb::test
