# Records the compilation traces in this folder with the real tritonparse on real Triton compiles of
# user_kernels.py, ahead of time for sm_90 (no GPU and no driver are needed):
#
#     python -m venv /tmp/tp-env && /tmp/tp-env/bin/pip install triton==3.5.1 tritonparse==0.6.0
#     /tmp/tp-env/bin/python make_traces.py OUT_DIR [softmax]
#
# ("softmax": only the two softmax compiles; TRITON_TRACE_COMPRESSION=gzip makes tritonparse write
# .ndjson.gz, one gzip member per event.)
#
# tritonparse.structured_logging.init() installs its compilation listener as
# triton.knobs.compilation.listener, which triton.compile calls after every compile; the listener
# writes one "compilation" event per compile to OUT_DIR/dedicated_log_triton_trace_*.ndjson.
# The listener imports torch (for the PyTorch compile context, the stack trace and type checks);
# torch is not installed here, so a stand-in module with just what the listener touches is put on
# the path (no compile context, the Python stack from the traceback module).
import atexit
import os
import shutil
import sys
import tempfile
import textwrap

TORCH_STUB = {
    "torch/__init__.py": """
        from . import _guards, cuda, distributed, utils, version
        class dtype: pass
        class Tensor: pass
    """,
    "torch/_guards.py": """
        class CompileContext:
            @staticmethod
            def current_trace_id(): return None
    """,
    "torch/cuda.py": "def is_current_stream_capturing(): return False\n",
    "torch/distributed.py": "def is_available(): return False\ndef is_initialized(): return False\n",
    "torch/version.py": "",
    "torch/utils/__init__.py": "",
    "torch/utils/_traceback.py": """
        import traceback
        class CapturedTraceback:
            def __init__(self, s): self._s = s
            @staticmethod
            def extract(skip=0): return CapturedTraceback(traceback.extract_stack()[:-(skip + 1)])
            def summary(self): return self._s
    """,
}


def scratch_dir(prefix):
    """A temp directory removed when the script exits."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def install_torch_stub():
    root = scratch_dir("torch-stub-")
    for rel, text in TORCH_STUB.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
    sys.path.insert(0, root)


def compile_one(fn, args, constexprs, divisible, num_warps, num_stages):
    """triton.compile for sm_90 (3.3+ dialect: every argument in the signature, constexprs by index)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    names = fn.arg_names
    signature = {n: ("constexpr" if n in constexprs else args[n]) for n in names}
    consts = {(i,): constexprs[n] for i, n in enumerate(names) if n in constexprs}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n in divisible}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def main():
    out_dir = os.path.abspath(sys.argv[1])
    os.environ["TRITON_CACHE_DIR"] = scratch_dir("tp-cache-")  # every compile really runs
    install_torch_stub()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tritonparse.structured_logging
    tritonparse.structured_logging.init(out_dir)
    import user_kernels as uk

    soft = {"out_ptr": "*fp16", "in_ptr": "*fp16", "in_row_stride": "i32", "out_row_stride": "i32",
            "n_cols": "i32"}
    soft_div = ["out_ptr", "in_ptr", "in_row_stride", "out_row_stride"]
    compile_one(uk.softmax_kernel, soft, {"BLOCK_SIZE": 1024}, soft_div, 4, 2)
    compile_one(uk.softmax_kernel, soft, {"BLOCK_SIZE": 4096}, soft_div, 8, 2)
    if sys.argv[2:] == ["softmax"]:
        return
    attn = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "sm_scale": "fp32",
            "seq_len": "i32"}
    for s in ["qh", "qm", "kh", "kn", "vh", "vn", "oh", "om"]:
        attn["stride_" + s] = "i32"
    attn_div = [n for n in attn if n.endswith("_ptr") or n.startswith("stride_")]
    compile_one(uk.attn_fwd_kernel, attn, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64}, attn_div, 4, 3)


if __name__ == "__main__":
    main()
