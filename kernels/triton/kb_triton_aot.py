# kbisect's ahead-of-time Triton compile driver. kbisect ships it as data and runs it with the Python of
# the Triton toolchain under test:
#
#     python kb_triton_aot.py SPEC.json
#
# SPEC names a kernel (source file + function), every argument's value, the target and the compile options
# (docs/triton.md). The driver compiles the way a user's own Triton does: through the release's JIT
# (`fn.warmup(*args, grid=...)`), which specializes the arguments as it would at a launch (an integer equal
# to 1 becomes a constant, integers and pointers divisible by 16 get tt.divisibility, do_not_specialize,
# constexpr defaults, the AMD pointer range), told the explicit target instead of asking a GPU. Tensors are
# objects that answer what the JIT asks of one (data_ptr, dtype, ptr_range). It writes every stage into
# SPEC.out_dir (kernel.ttir, .ttgir, .llir, .ptx or .amdgcn, .cubin or .hsaco, kernel.json: the metadata,
# specialization.json: how the JIT specialized each argument) and prints one JSON line last on stdout:
# {"status": "ok" | "skipped" | "failed" | "broken", "reason": ..., ...}. Exit status: 0 ok, 3 skipped (the
# release or target cannot take the kernel), 1 failed (the compiler rejected it), 2 broken (Triton cannot be
# imported, or the spec is bad).
import contextlib
import importlib.util
import inspect
import io
import json
import os
import sys
import time
import traceback

STAGE_FILES = {  # compiled.asm key -> file name in out_dir
    "ttir": "kernel.ttir", "ttgir": "kernel.ttgir", "llir": "kernel.llir", "ptx": "kernel.ptx",
    "cubin": "kernel.cubin", "amdgcn": "kernel.amdgcn", "hsaco": "kernel.hsaco",
}


def emit(status, code, **fields):
    fields["status"] = status
    sys.stdout.write("\n" + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def version_tuple(v):
    out = []
    for part in v.split("+")[0].split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def release_features(triton, tl):
    """What this release offers that a kernel may require (SPEC.requires)."""
    feats = set()
    try:
        if "warp_specialize" in inspect.signature(tl.range.__init__).parameters:
            feats.add("warp_specialize")
    except (TypeError, ValueError):
        pass
    if hasattr(tl, "make_tensor_descriptor") or hasattr(tl, "_experimental_make_tensor_descriptor"):
        feats.add("device_tensor_descriptor")
    return feats


FEATURE_TEXT = {
    "warp_specialize": "tl.range(..., warp_specialize=True)",
    "device_tensor_descriptor": "device-side tensor descriptors (tl.make_tensor_descriptor)",
}


def load_function(path, name):
    # The module's name shows in Triton's IR (function names, locations): the file's stem, the same in every
    # run (Python's hash() of a string is not).
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(stem or "kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        raise LookupError(f"{path}: no function '{name}'")
    return getattr(module, name)


class _DType:
    """An element type as a tensor's `dtype` shows it to the JIT: str() gives Triton's name (fp16, bf16, fp32,
    i32, ...), which the JIT canonicalizes; itemsize and is_floating_point for host tensor descriptors."""

    def __init__(self, name):
        self.name = name
        bits = 8 if name.startswith("fp8") or name == "i1" else int("".join(c for c in name if c.isdigit()) or 32)
        self.itemsize = max(1, bits // 8)
        self.is_floating_point = name.startswith(("fp", "bf"))

    def __str__(self):
        return self.name

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, _DType) and other.name == self.name

    def __hash__(self):
        return hash(("kb_dtype", self.name))


class _Tensor:
    """What the JIT reads of a tensor argument: its address (for the 16-byte divisibility), its dtype and, on
    AMD with buffer ops, the size of its storage (the 32-bit pointer range)."""

    def __init__(self, dtype, aligned, nbytes):
        self.dtype = _DType(dtype)
        self._aligned = aligned
        self._bytes = nbytes

    def data_ptr(self):
        return (1 << 20) if self._aligned else (1 << 20) + 2

    def ptr_range(self):
        return self._bytes


def typed_value(v, tl):
    """A constexpr's value from the spec's JSON: ints, floats, bools, None and strings as themselves, a dtype
    as {"dtype": "float16"} (tl.float16 of this release), a non-finite float as {"float": "inf"}."""
    if isinstance(v, dict) and set(v) == {"dtype"}:
        d = getattr(tl, v["dtype"], None)
        if not isinstance(d, tl.dtype):
            raise ValueError(f"tl.{v['dtype']} is not a dtype of this Triton")
        return d
    if isinstance(v, dict) and set(v) == {"float"}:
        return float(v["float"])
    return v


def jit_value(arg, tl):
    """The Python value the kernel is called with for one argument of the spec."""
    v = arg["value"]
    if "constexpr" in v:
        return typed_value(v["constexpr"], tl)
    if "tensor" in v:
        return _Tensor(v["tensor"], v.get("aligned", True), v.get("bytes", 1 << 20))
    if "tensordesc" in v:
        from triton.tools.tensor_descriptor import TensorDescriptor  # 3.4+
        d = v["tensordesc"]
        base = _Tensor(d["dtype"], True, d.get("bytes", 1 << 20))
        return TensorDescriptor(base, list(d["shape"]), list(d["strides"]), list(d["block"]), d.get("padding", "zero"))
    if "int" in v:
        return int(v["int"])
    if "float" in v:
        return float(v["float"])
    if "bool" in v:
        return bool(v["bool"])
    raise ValueError(f"argument {arg['name']}: no value kbisect knows ({v})")


class _TargetDriver:
    """The JIT asks its active driver for the device, the stream and the target; kbisect answers with the
    toolchain's target, so no GPU and no driver library are needed. Nothing is launched (warmup)."""

    def __init__(self, target):
        self._target = target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self._target

    def is_active(self):
        return True


def torch_importable():
    """Triton's AMD backend imports torch before it asks an argument for its ptr_range() (which it consults
    first); where the toolchain's Python has no torch, an empty module of that name lets the import succeed.
    No torch code runs: the arguments here are never torch tensors."""
    try:
        import torch  # noqa: F401
    except ImportError:
        import types
        shim = types.ModuleType("torch")
        shim.Tensor = type("Tensor", (), {})
        sys.modules["torch"] = shim


def jit_view(src, fn):
    """How the JIT specialized each argument: {name: {"type", "constant"?, "attrs"?}} from its ASTSource."""
    names = list(fn.arg_names)
    consts = {}
    for k, val in dict(getattr(src, "constants", {}) or {}).items():
        if isinstance(k, tuple) and len(k) == 1 and isinstance(k[0], int):
            k = names[k[0]]
        consts[k] = val
    attrs = getattr(src, "attrs", None)
    per_arg = {}
    if isinstance(attrs, dict):
        for k, val in attrs.items():
            if isinstance(k, tuple) and len(k) == 1:
                per_arg[names[k[0]]] = val
    elif attrs is not None:  # 3.0-3.2: an AttrsDescriptor
        props = getattr(attrs, "arg_properties", {}) or {}
        for prop, idxs in props.items():
            for i in idxs:
                per_arg.setdefault(names[i], []).append([prop, 16 if "divisib" in prop else 1])
    view = {}
    for n in names:
        t = src.signature.get(n, "constexpr") if isinstance(src.signature, dict) else "constexpr"
        e = {"type": str(t)}
        if n in consts:
            c = consts[n]
            e["constant"] = c if isinstance(c, (int, float, str, bool)) or c is None else str(c)
        if n in per_arg:
            e["attrs"] = [list(x) for x in per_arg[n]]
        view[n] = e
    return view


def same_type(declared, jit):
    if declared == jit:
        return True
    norm = lambda t: t.replace("*k", "*").replace("u1", "i1")
    return norm(declared) == norm(jit)


def check_view(spec_args, view, fn_name):
    """The declared signature against the JIT's: a refusal naming the argument when they differ."""
    for a in spec_args:
        v = view.get(a["name"], {})
        jit_const = "constant" in v or v.get("type") == "constexpr"
        if a["type"] == "constexpr" and not jit_const:
            return (f"{fn_name}: '{a['name']}' is declared constexpr, but Triton's JIT compiled it as "
                    f"{v.get('type')}: it is not a tl.constexpr of the function, and the JIT makes an integer "
                    f"argument a constant only when it is 1")
        if a["type"] != "constexpr" and not jit_const and not same_type(a["type"], v.get("type", "")):
            return (f"{fn_name}: '{a['name']}' is declared {a['type']}, but Triton's JIT types its value "
                    f"{jit_value_text(a)} as {v.get('type')}")
    return None


def jit_value_text(arg):
    v = arg["value"]
    return json.dumps(next(iter(v.values()))) if isinstance(v, dict) and v else "?"


@contextlib.contextmanager
def capture_ptxas(log):
    """Keeps what the release's own `ptxas -v` printed (Triton runs it with -v and discards the log)."""
    import subprocess
    real = subprocess.run

    def run(cmd, *a, **kw):
        result = real(cmd, *a, **kw)
        exe = os.path.basename(str(cmd[0])) if isinstance(cmd, (list, tuple)) and cmd else ""
        if exe.startswith("ptxas"):
            log["argv"] = [str(c) for c in cmd]
            err = kw.get("stderr")
            if hasattr(err, "name") and os.path.exists(err.name):
                with open(err.name, errors="replace") as f:
                    log["text"] = f.read()
        return result

    subprocess.run = run
    try:
        yield
    finally:
        subprocess.run = real


def identify():
    """--identify: what a toolchain's identity covers, without compiling."""
    try:
        import triton
    except Exception as e:  # noqa: BLE001
        emit("broken", 2, reason=f"cannot import triton with {sys.executable}: {type(e).__name__}: {e}")
    root = os.path.dirname(os.path.abspath(triton.__file__))
    lib = os.path.join(root, "_C", "libtriton.so")
    ptxas = os.environ.get("TRITON_PTXAS_PATH") or os.path.join(root, "backends", "nvidia", "bin", "ptxas")
    git = getattr(triton, "__git_version__", None) or getattr(triton, "git_version", None)
    emit("ok", 0, version=triton.__version__, git=git if isinstance(git, str) else "", root=root,
         libtriton=lib if os.path.exists(lib) else "", ptxas=ptxas if os.path.exists(ptxas) else "")


def load_spec(path):
    with open(path) as f:
        spec = json.load(f)
    os.makedirs(spec["out_dir"], exist_ok=True)
    # A private Triton cache: every compile really runs, and nothing is left in ~/.triton.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(spec["out_dir"], "triton-cache")
    return spec


@contextlib.contextmanager
def explicit_options(compiler, explicit, seen):
    """The JIT compiles with the options its call was given (the keyword arguments that are not parameters).
    An option whose name is also a parameter's (a constexpr named num_stages) cannot be given so: the JIT
    would take the keyword for the parameter. Those are set here on the options the JIT hands to compile,
    so the constexpr and the option keep their own values, as triton.compile takes them. `seen` gets the
    ASTSource the JIT built (its specialization)."""
    real = compiler.compile

    def compile_with(src, target=None, options=None, **kw):
        seen["src"] = src
        options = dict(options or {})
        options.update(explicit)
        return real(src, target=target, options=options, **kw)

    compiler.compile = compile_with
    try:
        yield
    finally:
        compiler.compile = real


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--identify":
        identify()
    if len(sys.argv) != 2:
        emit("broken", 2, reason="usage: kb_triton_aot.py SPEC.json | --identify")
    spec = load_spec(sys.argv[1])
    out_dir = spec["out_dir"]
    try:
        import triton
        import triton.language as tl
        from triton import compiler
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver
    except Exception as e:  # noqa: BLE001 - any import failure means this Triton is unusable
        emit("broken", 2, reason=f"cannot import triton with {sys.executable}: {type(e).__name__}: {e}")
    version = triton.__version__
    ident = {"version": version, "python": sys.executable}
    git = getattr(triton, "__git_version__", None) or getattr(triton, "git_version", None)
    if isinstance(git, str):
        ident["git"] = git

    t = spec["target"]
    target = GPUTarget(t["backend"], t["arch"], t["warp_size"])
    arch = t["arch"] if t["backend"] == "hip" else f"sm_{t['arch']}"
    missing = [r for r in spec.get("requires", []) if r not in release_features(triton, tl)]
    if missing:
        emit("skipped", 3, reason=f"triton {version} has no {FEATURE_TEXT.get(missing[0], missing[0])}", **ident)
    for rule in spec.get("unsupported", []):  # [{"backend", "arch", "below"?, "reason"}] from the declaration
        if rule.get("backend") == t["backend"] and rule.get("arch", arch) == arch:
            if "below" not in rule or version_tuple(version) < version_tuple(rule["below"]):
                emit("skipped", 3, reason=f"triton {version} on {arch}: {rule['reason']}", **ident)

    try:
        fn = load_function(spec["source"], spec["function"])
    except Exception as e:  # noqa: BLE001
        emit("failed", 1, reason=f"{spec['source']}: {type(e).__name__}: {e}", **ident)
    args = spec["signature"]
    names = [a["name"] for a in args]
    if getattr(fn, "arg_names", names) != names:
        emit("broken", 2, reason=f"{spec['function']}: signature {names} does not match the kernel's "
             f"arguments {list(fn.arg_names)}", **ident)
    try:
        values = [jit_value(a, tl) for a in args]
    except Exception as e:  # noqa: BLE001 - a value this release cannot take (tl.float8e4b8 on an old one)
        emit("failed", 1, reason=f"triton {version}: {spec['function']}: {type(e).__name__}: {e}", **ident)
    options = dict(spec.get("options", {}))
    by_keyword = {k: v for k, v in options.items() if k not in names}
    explicit = {k: v for k, v in options.items() if k in names}
    driver.set_active(_TargetDriver(target))
    if t["backend"] == "hip":
        torch_importable()

    ptxas, seen = {}, {}
    captured = io.StringIO()
    t0 = time.monotonic()
    try:
        with capture_ptxas(ptxas), explicit_options(compiler, explicit, seen), contextlib.redirect_stdout(captured):
            compiled = fn.warmup(*values, grid=(1,), **by_keyword)
    except Exception as e:  # noqa: BLE001 - the compiler's own error is the case's reason
        text = f"{type(e).__name__}: {e}"
        first = next((line.strip() for line in text.splitlines() if line.strip()), text)
        with open(os.path.join(out_dir, "compile-error.txt"), "w") as f:
            f.write(traceback.format_exc())
        emit("failed", 1, reason=f"triton {version} for {arch}: {first[:400]}", **ident)
    compile_s = time.monotonic() - t0
    if hasattr(compiled, "result"):  # an asynchronous compile's future
        compiled = compiled.result()
    view = jit_view(seen.get("src") or compiled.src, fn)
    with open(os.path.join(out_dir, "specialization.json"), "w") as f:
        json.dump(view, f, default=str, sort_keys=True, indent=1)
    refusal = check_view(args, view, spec["function"])
    if refusal:
        emit("broken", 2, reason=refusal, **ident)

    written = {}
    for key, name in STAGE_FILES.items():
        if key in compiled.asm:
            data = compiled.asm[key]
            with open(os.path.join(out_dir, name), "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)
            written[key] = name
    md = compiled.metadata
    meta = md._asdict() if hasattr(md, "_asdict") else dict(md)
    with open(os.path.join(out_dir, "kernel.json"), "w") as f:
        json.dump(meta, f, default=str, sort_keys=True, indent=1)
    if ptxas:
        with open(os.path.join(out_dir, "ptxas.log"), "w") as f:
            f.write(ptxas.get("text", ""))
        with open(os.path.join(out_dir, "ptxas.argv"), "w") as f:
            json.dump(ptxas.get("argv", []), f)
    # The kernel parameters the binary takes, in order: the arguments the JIT left as arguments (not
    # constexprs, not integers specialized to the constant 1); the launcher appends the hidden scratch ones.
    params = [n for n in names if "constant" not in view[n] and view[n]["type"] != "constexpr"]
    emit("ok", 0, name=meta.get("name", spec["function"]), compile_s=compile_s, files=written, params=params,
         **ident)


if __name__ == "__main__":
    main()
