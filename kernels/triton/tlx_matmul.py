# kbisect's TLX matmuls: C[MxN] (fp32) = A[MxK] @ B[KxN], row-major, fp32 accumulation, the operand layout
# and correctness check of every other GEMM. Written with TLX (Triton's low-level language extensions:
# async tasks as warp groups, shared and tensor memory buffers, mbarriers, TMA, wgmma, tcgen05), which a
# stock Triton gets from the triton-utlx plugin (`pip install triton==3.8.0 triton-utlx==3.8.0.postN`).
# The declarations (signature, grid, the kernel per target) are in backends/triton/tlx_kernels.cpp.
#
#   tlx_matmul_ws_hopper     sm_90a. Persistent programs over the tiles. One producer warp group issues TMA
#                            loads of A (two halves) and B into a ring of NUM_STAGES shared-memory slots,
#                            one "full" mbarrier per slot counting the bytes; two consumer warp groups
#                            (one per half of the tile's rows) run wgmma on the slot, keep one wgmma in
#                            flight, and release the slot on its "empty" mbarrier when it has been read.
#                            The epilogue writes C through TMA stores, half a tile row block at a time.
#   tlx_matmul_ws_blackwell  sm_100a. Persistent too, three partitions: a load warp (TMA into the ring),
#                            an MMA warp (tcgen05.mma from shared memory into one of two accumulators in
#                            tensor memory, committing each slot back to the loader and each finished
#                            accumulator to the epilogue), and the epilogue warp group (tensor memory ->
#                            registers -> TMA stores), which overlaps the next tile's MMAs.
#   tlx_matmul_lds           gfx942. One program per tile: global -> registers -> LDS (two buffers) ->
#                            registers -> MFMA, the next K step's global loads issued before this step's
#                            MFMAs.
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def _tile_of(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M tile rows share each B panel before the next column of tiles.
    in_group = GROUP_M * tiles_n
    first_m = (tile // in_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % in_group) % rows, (tile % in_group) // rows


@triton.jit
def _ring(count, SLOTS: tl.constexpr):
    # The slot a running count lands in, and the parity of its pass around the ring.
    return count % SLOTS, (count // SLOTS) & 1


@triton.jit
def _fill_slot(a_desc, b_desc, a_ring, b_ring, free, ready, count, row, col, k, NUM_STAGES: tl.constexpr,
               A_PARTS: tl.constexpr, PART_M: tl.constexpr, BLOCK_K: tl.constexpr, SLOT_BYTES: tl.constexpr):
    # The producer's step: wait until the slot `count` lands in is free, then TMA-load A (in A_PARTS row
    # blocks of PART_M) and B into it, the slot's "ready" mbarrier counting the bytes.
    s, phase = _ring(count, NUM_STAGES)
    tlx.barrier_wait(tlx.local_view(free, s), phase ^ 1)
    bar = tlx.local_view(ready, s)
    tlx.barrier_expect_bytes(bar, SLOT_BYTES)
    for p in tl.static_range(A_PARTS):
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, A_PARTS * s + p), [row + p * PART_M, k * BLOCK_K], bar)
    tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, s), [k * BLOCK_K, col], bar)


@triton.jit
def tlx_matmul_ws_hopper(a_ptr, b_ptr, c_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr):
    HALF_M: tl.constexpr = BLOCK_M // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[HALF_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[HALF_M, BLOCK_N // 2])
    # Slot s holds A's upper half in a_ring[2s], its lower half in a_ring[2s + 1], and B in b_ring[s].
    a_ring = tlx.local_alloc((HALF_M, BLOCK_K), tlx.dtype_of(a_desc), 2 * NUM_STAGES)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_desc), NUM_STAGES)
    # Each consumer stages C through its own buffer, half a row block (HALF_M x BLOCK_N / 2) at a time.
    c_stage = tlx.local_alloc((HALF_M, BLOCK_N // 2), tl.float32, 2)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    slot_bytes: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(tlx.dtype_of(a_desc))

    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tiles_m * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=40):  # the producer warp group
            count = 0
            for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
                for k in range(0, k_steps):
                    _fill_slot(a_desc, b_desc, a_ring, b_ring, empty, full, count, tm * BLOCK_M, tn * BLOCK_N, k,
                               NUM_STAGES, 2, HALF_M, BLOCK_K, slot_bytes)
                    count += 1
        with tlx.async_task(num_warps=4, num_regs=232, replicate=2):  # the consumers: one half of the rows each
            half = tlx.async_task_replica_id()
            count = 0
            for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
                acc = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
                for k in range(0, k_steps):
                    s, phase = _ring(count, NUM_STAGES)
                    tlx.barrier_wait(tlx.local_view(full, s), phase)
                    acc = tlx.async_dot(tlx.local_view(a_ring, 2 * s + half), tlx.local_view(b_ring, s), acc)
                    # One wgmma stays in flight: the previous one has finished reading its slot.
                    acc = tlx.async_dot_wait(tl.constexpr(1), acc)
                    if k > 0:
                        tlx.barrier_arrive(tlx.local_view(empty, (count - 1) % NUM_STAGES))
                    count += 1
                acc = tlx.async_dot_wait(tl.constexpr(0), acc)
                tlx.barrier_arrive(tlx.local_view(empty, (count - 1) % NUM_STAGES))
                row = tm * BLOCK_M + half * HALF_M
                left, right = tl.split(tl.permute(tl.reshape(acc, (HALF_M, 2, BLOCK_N // 2)), (0, 2, 1)))
                stage = tlx.local_view(c_stage, half)
                tlx.async_descriptor_store_wait(tl.constexpr(0))  # the last tile's store has read the stage
                tlx.local_store(stage, left)
                tlx.fence("async_shared")
                tlx.async_descriptor_store(c_desc, stage, [row, tn * BLOCK_N])
                tlx.async_descriptor_store_wait(tl.constexpr(0))
                tlx.local_store(stage, right)
                tlx.fence("async_shared")
                tlx.async_descriptor_store(c_desc, stage, [row, tn * BLOCK_N + BLOCK_N // 2])
            tlx.async_descriptor_store_wait(tl.constexpr(0))


@triton.jit
def tlx_matmul_ws_blackwell(a_ptr, b_ptr, c_ptr, M, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr):
    SUB_N: tl.constexpr = BLOCK_N // 4  # the epilogue's store width
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, SUB_N])
    a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_desc), NUM_STAGES)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_desc), NUM_STAGES)
    # Two accumulators in tensor memory: the MMA warp fills one while the epilogue drains the other.
    accs = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, 2, tlx.storage_kind.tmem)
    c_stage = tlx.local_alloc((BLOCK_M, SUB_N), tl.float32, 2)
    loaded = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)    # a slot's TMA bytes arrived
    consumed = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)  # the MMA reading a slot is done
    acc_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)           # a tile's last MMA is done
    acc_free = tlx.alloc_barriers(num_barriers=2, arrive_count=4)           # its four quarters were read out
    slot_bytes: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(tlx.dtype_of(a_desc))

    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tiles_m * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    with tlx.async_tasks():
        with tlx.async_task("default"):  # the epilogue warp group
            done = 0
            for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
                b, phase = _ring(done, 2)
                tlx.barrier_wait(tlx.local_view(acc_full, b), phase)
                acc = tlx.local_view(accs, b)
                for j in tl.static_range(4):
                    part = tlx.local_load(tlx.local_slice(acc, [0, j * SUB_N], [BLOCK_M, SUB_N]))
                    tlx.barrier_arrive(tlx.local_view(acc_free, b))
                    stage = tlx.local_view(c_stage, j % 2)
                    tlx.async_descriptor_store_wait(tl.constexpr(1))  # this stage's previous store has read it
                    tlx.local_store(stage, part)
                    tlx.fence("async_shared")
                    tlx.async_descriptor_store(c_desc, stage, [tm * BLOCK_M, tn * BLOCK_N + j * SUB_N])
                done += 1
            tlx.async_descriptor_store_wait(tl.constexpr(0))
        with tlx.async_task(num_warps=1):  # the MMA warp
            count = 0
            done = 0
            for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                b, phase = _ring(done, 2)
                tlx.barrier_wait(tlx.local_view(acc_free, b), phase ^ 1)
                acc = tlx.local_view(accs, b)
                for k in range(0, k_steps):
                    s, ring_phase = _ring(count, NUM_STAGES)
                    tlx.barrier_wait(tlx.local_view(loaded, s), ring_phase)
                    tlx.async_dot(tlx.local_view(a_ring, s), tlx.local_view(b_ring, s), acc, use_acc=k > 0,
                                  mBarriers=[tlx.local_view(consumed, s)], out_dtype=tl.float32)
                    count += 1
                tlx.tcgen05_commit(tlx.local_view(acc_full, b))
                done += 1
        with tlx.async_task(num_warps=1):  # the load warp
            count = 0
            for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
                for k in range(0, k_steps):
                    _fill_slot(a_desc, b_desc, a_ring, b_ring, consumed, loaded, count, tm * BLOCK_M, tn * BLOCK_N, k,
                               NUM_STAGES, 1, BLOCK_M, BLOCK_K, slot_bytes)
                    count += 1


@triton.jit
def tlx_matmul_lds(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    tm, tn = _tile_of(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_at = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_at = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    a_lds = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_ptr), 2)
    b_lds = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_ptr), 2)
    k_steps = tl.cdiv(K, BLOCK_K)
    # K step 0 goes into buffer 0 before the loop; step k + 1 is read from global memory while step k's
    # MFMAs run, and lands in the other buffer after them.
    tlx.local_store(tlx.local_view(a_lds, 0), tl.load(a_at, mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0))
    tlx.local_store(tlx.local_view(b_lds, 0), tl.load(b_at, mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, k_steps, num_stages=0):
        left = K - (k + 1) * BLOCK_K  # what remains after the next step's start
        a_next = tl.load(a_at + (k + 1) * BLOCK_K, mask=(rows[:, None] < M) & (ks[None, :] < left), other=0.0)
        b_next = tl.load(b_at + (k + 1) * BLOCK_K * stride_bk, mask=(ks[:, None] < left) & (cols[None, :] < N),
                         other=0.0)
        cur = k % 2
        acc = tl.dot(tlx.local_load(tlx.local_view(a_lds, cur)), tlx.local_load(tlx.local_view(b_lds, cur)), acc)
        tlx.local_store(tlx.local_view(a_lds, 1 - cur), a_next)
        tlx.local_store(tlx.local_view(b_lds, 1 - cur), b_next)
    c_at = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_at, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
