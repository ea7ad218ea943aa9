// Triton's own per-pass dumps, for `kbisect explain` between two Triton builds (docs/passes.md). With
// MLIR_ENABLE_DUMP=1 every release here (3.2-3.9) prints the MLIR module before each pass of its TTIR,
// TTGIR and LLVM-dialect pipelines ("// -----// IR Dump Before <Pass> (<arg>) ('<op>' operation...) //----- //");
// with LLVM_IR_ENABLE_DUMP=1 it prints the LLVM IR after each LLVM pass ("; *** IR Dump After <Pass> on
// <unit> ***", print-after-all). Both go to the compiler's stderr.
#pragma once
#include <string>
#include <vector>

#include "passes/explain.h"

namespace kb {

// The dumps in pipeline order as "after" dumps, keyed like split_ir_dumps': an MLIR pass's output is the
// next "before" dump (its unit is "mlir <op>"; the op's symbol name is left out, since releases mangle
// function names differently), then the LLVM passes' dumps. MLIR locations (`loc(...)`, `#loc` lines) are
// dropped from the text: they name source lines and files, not code.
std::vector<IrDump> split_triton_dumps(const std::string& log);

}  // namespace kb
