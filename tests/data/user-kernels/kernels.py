# A user's own Triton kernels (not matmuls), for kbisect's user-kernel tests: a row softmax and an
# attention forward pass (online softmax over key blocks, one program per query block and head).
import triton
import triton.language as tl


@triton.jit
def row_softmax(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, scale,
                  HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr):
    # q, k, v, o: [heads, seq_len, HEAD_DIM], contiguous
    qb = tl.program_id(0)
    head = tl.program_id(1)
    base = head * seq_len * HEAD_DIM
    rows = qb * BLOCK_Q + tl.arange(0, BLOCK_Q)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < seq_len, other=0.0)
    best = tl.full((BLOCK_Q,), -float("inf"), tl.float32)
    total = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    for start in range(0, seq_len, BLOCK_KV):
        keys = start + tl.arange(0, BLOCK_KV)
        k = tl.load(k_ptr + base + keys[:, None] * HEAD_DIM + dims[None, :], mask=keys[:, None] < seq_len, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(keys[None, :] < seq_len, s, -float("inf"))
        new_best = tl.maximum(best, tl.max(s, axis=1))
        p = tl.exp(s - new_best[:, None])
        correction = tl.exp(best - new_best)
        total = total * correction + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + keys[:, None] * HEAD_DIM + dims[None, :], mask=keys[:, None] < seq_len, other=0.0)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v)
        best = new_best
    out = acc / total[:, None]
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq_len)
