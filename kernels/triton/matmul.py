# kbisect's Triton matmuls: C[MxN] (fp32) = A[MxK] @ B[KxN], row-major, fp32 accumulation.
#
# One source for every target: the Triton toolchain under test compiles it for CUDA (sm_80, sm_90a) and
# HIP (gfx90a, gfx942) alike. kbisect's parameters arrive as constexprs (BLOCK_M, BLOCK_N, BLOCK_K,
# GROUP_M), num_warps and num_stages as compile options; the signature each kernel is compiled with, its
# grid and its divisibility hints are declared once in backends/triton/triton_kernels.cpp.
#
#   matmul_tiled       one program per C tile, tiles visited in grouped order (GROUP_M rows of tiles at
#                      a time, so consecutive programs share B panels in L2), tl.dot over K tiles.
#   matmul_persistent  NUM_PROGRAMS programs walk the tiles with a stride; A, B and C go through tensor
#                      descriptors made on the device (TMA on sm_90a; other targets lower them to plain
#                      loads). Needs a release with device-side descriptors (3.3's experimental API, or
#                      tl.make_tensor_descriptor from 3.4 on).
#   matmul_ws          matmul_tiled's loop as tl.range(..., warp_specialize=True): the compiler splits
#                      producer (loads) and consumer (MMA) warps. Needs a release with that option.
#   matmul_ws_tma      the same loop over device-side tensor descriptors (TMA loads, a TMA store): the
#                      form automatic warp specialization takes on sm_90a as well as sm_100a, the
#                      counterpart of the TLX kernels (tlx_matmul.py) in the per-warp-group metrics.
import triton
import triton.language as tl

# The device-side descriptor constructor of this release, or None. Resolved when the module is imported,
# so a kernel body names one builtin whatever the release calls it.
if hasattr(tl, "make_tensor_descriptor"):
    _make_descriptor = tl.make_tensor_descriptor
elif hasattr(tl, "_experimental_make_tensor_descriptor"):
    _make_descriptor = tl._experimental_make_tensor_descriptor
else:
    _make_descriptor = None


@triton.jit
def _tile_coords(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped order: tiles go down GROUP_M tile rows before moving one tile column right.
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = tile // per_group
    first_m = group * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    tm = first_m + (tile % per_group) % rows
    tn = (tile % per_group) // rows
    return tm, tn


@triton.jit
def matmul_tiled(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 IEEE: tl.constexpr):
    tm, tn = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] + k0 < K), other=0.0)
        b = tl.load(b_tile, mask=(ks[:, None] + k0 < K) & (cols[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      IEEE: tl.constexpr):
    a_desc = _make_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = _make_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = _make_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), tiles, NUM_PROGRAMS):
        tm, tn = _tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([tm * BLOCK_M, k0])
            b = b_desc.load([k0, tn * BLOCK_N])
            if IEEE:
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
        c_desc.store([tm * BLOCK_M, tn * BLOCK_N], acc)


@triton.jit
def matmul_ws(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
              NUM_STAGES: tl.constexpr, IEEE: tl.constexpr):
    tm, tn = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES, warp_specialize=True):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (ks[None, :] + k0),
                    mask=(rows[:, None] < M) & (ks[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptr + (ks[:, None] + k0) * stride_bk + cols[None, :],
                    mask=(ks[:, None] + k0 < K) & (cols[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matmul_ws_tma(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  NUM_STAGES: tl.constexpr, IEEE: tl.constexpr):
    a_desc = _make_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = _make_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = _make_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    tm, tn = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES, warp_specialize=True):
        acc = tl.dot(a_desc.load([tm * BLOCK_M, k0]), b_desc.load([k0, tn * BLOCK_N]), acc,
                     input_precision="ieee" if IEEE else None)
    c_desc.store([tm * BLOCK_M, tn * BLOCK_N], acc)
