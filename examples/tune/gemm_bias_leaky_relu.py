# A user's own Triton GEMM with a fused epilogue, as `kbisect tune` takes it (docs/tune.md):
#   C = leaky_relu(A @ B + bias), A: M x K, B: K x N, bias: N, C: M x N, fp16 in and out, fp32 accumulation.
# One program per BM x BN tile of C, visited in groups of GROUP_M tile rows (so that the programs running
# together share columns of B in L2); the K loop is what Triton pipelines over num_stages buffers.
import triton
import triton.language as tl


@triton.jit
def gemm_bias_leaky_relu(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                         SLOPE: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % in_group) % group_rows
    tile_n = (pid % in_group) // group_rows

    rows = tile_m * BM + tl.arange(0, BM)
    cols = tile_n * BN + tl.arange(0, BN)
    depth = tl.arange(0, BK)
    a_tile = a_ptr + rows[:, None] * stride_am + depth[None, :]
    b_tile = b_ptr + depth[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_tile, mask=(rows[:, None] < M) & (depth[None, :] + k0 < K), other=0.0)
        b = tl.load(b_tile, mask=(depth[:, None] + k0 < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BK
        b_tile += BK * stride_bk

    # The epilogue, on the fp32 accumulator: bias per column, then leaky ReLU with slope SLOPE (a float).
    acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    acc = tl.where(acc >= 0, acc, SLOPE * acc)
    out = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(out, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))
