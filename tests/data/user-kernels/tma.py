# A user kernel that takes a host-side tensor descriptor (Triton 3.4+): each program loads one BM x BN tile
# of the input through the descriptor (TMA on sm_90a) and stores it scaled through a plain pointer.
import triton
import triton.language as tl


@triton.jit
def scale_tiles(in_desc, out_ptr, n_cols, factor, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    tile = in_desc.load([pm * BM, pn * BN])
    rows = pm * BM + tl.arange(0, BM)
    cols = pn * BN + tl.arange(0, BN)
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], (tile.to(tl.float32) * factor).to(tl.float16))
