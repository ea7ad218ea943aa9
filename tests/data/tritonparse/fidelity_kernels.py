# Kernels written the way users write them, for kbisect's fidelity checks (`kbisect import-trace --verify`,
# docs/triton.md "Fidelity"): every kind of constexpr Triton's JIT specializes, names that clash with
# kbisect's own, and the JIT's own specializations.
#
#   matmul_kernel  a GEMM with a bias and a leaky-ReLU epilogue, named as Triton's tutorial names its
#                  kernel: a float constexpr (SLOPE), a string or None constexpr (ACTIVATION), a bool
#                  (HAS_BIAS), a Triton dtype (OUT_DTYPE), a constexpr named NUM_STAGES (its software
#                  pipeline depth), defaults in the signature (BLOCK_*, GROUP_M); called with the inner
#                  strides equal to 1, which the JIT compiles as constants.
#   scale_rows     a row scaling whose n_cols is `do_not_specialize` (never a constant, never divisible)
#                  and whose constexpr is named num_stages, lower case, as in Triton's softmax tutorial;
#                  SALT is a 64-bit negative constexpr.
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  SLOPE: tl.constexpr, ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, OUT_DTYPE: tl.constexpr,
                  NUM_STAGES: tl.constexpr, BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 128,
                  BLOCK_K: tl.constexpr = 64, GROUP_M: tl.constexpr = 8):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    tm = first_m + (pid % per_group) % rows_in_group
    tn = (pid % per_group) // rows_in_group
    rm = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=NUM_STAGES):
        left = K - k * BLOCK_K
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
        b = tl.load(b_tile, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, acc * SLOPE)
    c = acc.to(OUT_DTYPE)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit(do_not_specialize=["n_cols"])
def scale_rows(out_ptr, in_ptr, row_stride, n_cols, scale, BLOCK: tl.constexpr, num_stages: tl.constexpr,
               SALT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for start in tl.range(0, n_cols, BLOCK, num_stages=num_stages):
        offs = start + cols
        x = tl.load(in_ptr + row * row_stride + offs, mask=offs < n_cols, other=0.0)
        tl.store(out_ptr + row * row_stride + offs, x * scale + SALT % 3, mask=offs < n_cols)
