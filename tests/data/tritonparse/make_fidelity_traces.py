# Records the fidelity traces in this folder (fidelity-<release>.ndjson.gz) with the real tritonparse on real
# compiles of fidelity_kernels.py by a release's own JIT, ahead of time (no GPU and no driver are needed):
#
#     python -m venv /tmp/tp && /tmp/tp/bin/pip install triton==3.5.1 tritonparse==0.6.0
#     /tmp/tp/bin/python make_fidelity_traces.py OUT_DIR
#
# (tritonparse needs Triton 3.4 or later: it listens through triton.knobs.compilation.listener.) Each kernel
# is compiled the way a user compiles one ahead of time: `kernel.warmup(*args, grid=..., **options)`, the
# JIT's own entry, which specializes every argument as it would at a launch (an integer equal to 1 becomes a
# constant, values divisible by 16 get tt.divisibility, do_not_specialize is honoured). With no GPU, the
# JIT's active driver is one that answers the target (it is asked for the device, the stream and the target,
# nothing else); a tensor is an object with the address and dtype the JIT reads. tritonparse's listener
# imports torch; torch is not installed, so make_traces.py's stand-in module (what the listener touches,
# nothing of the compile) is put on the path. The traces are gzip (TRITON_TRACE_COMPRESSION=gzip: one member
# per event) and keep the whole source file (enable_full_python_source).
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_traces import install_torch_stub, scratch_dir  # noqa: E402


class Target:
    def __init__(self, target):
        self.target = target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target

    def is_active(self):
        return True


class Tensor:
    def __init__(self, dtype, nbytes=1 << 24):
        self.dtype = dtype
        self.nbytes = nbytes

    def data_ptr(self):
        return 1 << 20

    def ptr_range(self):
        return self.nbytes


def record(fk, tl, target_of):
    f16 = "fp16"
    cuda, hip = target_of("cuda", 90, 32), target_of("hip", "gfx942", 64)
    gemm = [Tensor(f16), Tensor(f16), Tensor(f16), Tensor(f16)]
    for target in (cuda, hip):
        set_target(target, fk.matmul_kernel)
        # The clash: a constexpr NUM_STAGES=3 with the compile option num_stages=1 (TLX-style); float,
        # string, bool and dtype constexprs; the inner strides 1 (specialized away by the JIT).
        fk.matmul_kernel.warmup(*gemm, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1, 0.01, "leaky_relu", True,
                                tl.float16, 3, grid=(1,), num_warps=8, num_stages=1)
    set_target(cuda, fk.matmul_kernel)
    # None and another dtype; M not divisible by 16; a smaller tile given by keyword; the option defaults.
    fk.matmul_kernel.warmup(*gemm, 1000, 4096, 4096, 4096, 1, 4096, 1, 4096, 1, 0.1, None, False, tl.bfloat16, 4,
                            grid=(1,), BLOCK_M=64, num_warps=4)
    # do_not_specialize (n_cols 1024 stays a plain i32), a constexpr named num_stages given by keyword (the JIT
    # then compiles with the option num_stages=2 as well), a 64-bit negative constexpr.
    fk.scale_rows.warmup(Tensor(f16), Tensor(f16), 1024, 1024, 0.5, BLOCK=256, num_stages=2, SALT=-(2**40) + 3,
                         num_warps=4, grid=(1,))


def set_target(target, kernel):
    """The JIT keeps a binder and compiled kernels per device: forget them when the target changes."""
    from triton.runtime.driver import driver
    driver.set_active(Target(target))
    kernel.device_caches.clear()


def main():
    out_dir = os.path.abspath(sys.argv[1])
    os.environ["TRITON_CACHE_DIR"] = scratch_dir("tp-cache-")  # every compile really runs
    install_torch_stub()
    import tritonparse.structured_logging
    tritonparse.structured_logging.init(out_dir, compression="gzip", enable_full_python_source=True)
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    import fidelity_kernels as fk
    record(fk, tl, GPUTarget)


if __name__ == "__main__":
    main()
