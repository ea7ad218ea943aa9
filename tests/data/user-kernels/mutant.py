# The row softmax of kernels.py, made so that a toolchain can miscompile it on purpose: a toolchain whose
# environment has KB_MUTANT=1 builds a kernel that doubles every seventh row's output, the way a wrong
# compiler breaks one tile. Same source, same inputs, different code: the baseline-output check must call
# that build incorrect (scripts/gpu-check.sh, step i).
import os

import triton
import triton.language as tl

MUTANT = tl.constexpr(os.environ.get("KB_MUTANT", "0") == "1")


@triton.jit
def row_softmax_mutant(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    if MUTANT:
        y = tl.where(row % 7 == 3, y * 2.0, y)
    tl.store(out_ptr + row * row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
