# kbisect's ahead-of-time Triton compile driver. kbisect ships it as data and runs it with the Python of
# the Triton toolchain under test:
#
#     python kb_triton_aot.py SPEC.json
#
# SPEC names a kernel (source file + function), the signature it is compiled with, its constexpr
# values, the arguments assumed divisible by 16, the target and the options (docs/triton.md). The driver
# compiles with triton.compile for that explicit target (no GPU, no driver), writes every stage into
# SPEC.out_dir (kernel.ttir, .ttgir, .llir, .ptx or .amdgcn, .cubin or .hsaco, kernel.json: the
# metadata) and prints one JSON line last on stdout: {"status": "ok" | "skipped" | "failed" | "broken",
# "reason": ..., ...}. Exit status: 0 ok, 3 skipped (the release or target cannot take the kernel),
# 1 failed (the compiler rejected it), 2 broken (Triton cannot be imported, or the spec is bad).
#
# The releases differ in how a kernel is specialized, and the driver speaks each dialect:
#   3.0-3.2   ASTSource(fn, signature={non-constexpr args}, constants={name: value}, attrs=AttrsDescriptor)
#   3.3+      ASTSource(fn, signature={every arg, constexprs typed "constexpr"}, constexprs={(i,): value},
#             attrs={(i,): [["tt.divisibility", 16], ...]})
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
    try:  # TLX: the triton-utlx plugin (3.8+) registers this module
        if importlib.util.find_spec("triton.language.extra.tlx") is not None:
            feats.add("tlx")
    except ImportError:
        pass
    return feats


FEATURE_TEXT = {
    "warp_specialize": "tl.range(..., warp_specialize=True)",
    "device_tensor_descriptor": "device-side tensor descriptors (tl.make_tensor_descriptor)",
    "tlx": "TLX (triton.language.extra.tlx: the triton-utlx plugin, `pip install triton-utlx`, for Triton 3.8)",
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


class _Pointer:
    """What the 3.0-3.2 attribute deduction sees of a tensor argument: its address and its range."""

    def __init__(self, aligned):
        self._aligned = aligned

    def data_ptr(self):
        return 1 << 20 if self._aligned else (1 << 20) + 2

    def ptr_range(self):
        return 1 << 20


def make_source_old(compiler, backend, fn, args, divisible):
    """3.0-3.2: signature without constexprs, constants by name, an AttrsDescriptor of the backend."""
    signature = {a["name"]: a["type"] for a in args if a["type"] != "constexpr"}
    constants = {a["name"]: a["value"] for a in args if a["type"] == "constexpr"}
    values = []
    for a in args:
        if a["type"] == "constexpr":
            values.append(a["value"])
        elif a["type"].startswith("*"):
            values.append(_Pointer(a["name"] in divisible))
        else:  # a scalar: 16 stands for "divisible by 16", 17 for a value with no property (never 1)
            values.append(16 if a["name"] in divisible else 17)
    attrs = backend.get_attrs_descriptor(fn.params, values)
    return compiler.ASTSource(fn, signature, constants, attrs)


def make_source_new(compiler, backend, fn, args, divisible, target_backend):
    """3.3+: every argument in the signature, constexprs by index, attributes as parsed specialisations."""
    signature = {a["name"]: a["type"] for a in args}
    constexprs = {(i,): a["value"] for i, a in enumerate(args) if a["type"] == "constexpr"}
    buffer_ops = False
    if target_backend == "hip":
        try:
            from triton import knobs  # 3.4+
            buffer_ops = bool(knobs.amd.use_buffer_ops)
        except (ImportError, AttributeError):
            use = getattr(type(backend), "use_buffer_ops", None)
            buffer_ops = bool(use()) if callable(use) else False
    attrs = {}
    for i, a in enumerate(args):
        if a["type"] == "constexpr":
            continue
        desc = "D" if a["name"] in divisible else ""
        if buffer_ops and a["type"].startswith("*"):
            desc += "S"
        if desc:
            attrs[(i,)] = backend.parse_attr(desc)
    return compiler.ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)


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
    # Releases from 3.3 on assemble sm_100 and later with a ptxas of their own.
    ptxas_bw = os.environ.get("TRITON_PTXAS_BLACKWELL_PATH") or os.path.join(root, "backends", "nvidia", "bin",
                                                                             "ptxas-blackwell")
    git = getattr(triton, "__git_version__", None) or getattr(triton, "git_version", None)
    # Compiler plugins: every library TRITON_PLUGIN_PATHS names (the triton-utlx wheel's .pth sets it to its
    # libutlx.so at start-up), and the plugin package's version when it is the TLX one.
    plugins = [p for p in os.environ.get("TRITON_PLUGIN_PATHS", "").split(os.pathsep) if p]
    try:
        import importlib.metadata
        utlx = importlib.metadata.version("triton-utlx")
    except Exception:  # noqa: BLE001 - not installed
        utlx = ""
    emit("ok", 0, version=triton.__version__, git=git if isinstance(git, str) else "", root=root,
         libtriton=lib if os.path.exists(lib) else "", ptxas=ptxas if os.path.exists(ptxas) else "",
         ptxas_blackwell=ptxas_bw if os.path.exists(ptxas_bw) else "", plugins=plugins, utlx=utlx)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--identify":
        identify()
    if len(sys.argv) != 2:
        emit("broken", 2, reason="usage: kb_triton_aot.py SPEC.json | --identify")
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    out_dir = spec["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    # A private Triton cache: every compile really runs, and nothing is left in ~/.triton.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(out_dir, "triton-cache")
    try:
        import triton
        import triton.language as tl
        from triton import compiler
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
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
    divisible = set(spec.get("divisible", []))
    names = [a["name"] for a in args]
    if getattr(fn, "arg_names", names) != names:
        emit("broken", 2, reason=f"{spec['function']}: signature {names} does not match the kernel's "
             f"arguments {list(fn.arg_names)}", **ident)
    try:
        backend = make_backend(target)
        if version_tuple(version) < (3, 3):
            src = make_source_old(compiler, backend, fn, args, divisible)
        else:
            src = make_source_new(compiler, backend, fn, args, divisible, t["backend"])
    except Exception as e:  # noqa: BLE001
        emit("failed", 1, reason=f"cannot specialize {spec['function']} on triton {version}: "
             f"{type(e).__name__}: {e}", **ident)

    ptxas = {}
    captured = io.StringIO()
    t0 = time.monotonic()
    try:
        with capture_ptxas(ptxas), contextlib.redirect_stdout(captured):
            compiled = triton.compile(src, target=target, options=dict(spec.get("options", {})))
    except Exception as e:  # noqa: BLE001 - the compiler's own error is the case's reason
        text = f"{type(e).__name__}: {e}"
        first = next((line.strip() for line in text.splitlines() if line.strip()), text)
        with open(os.path.join(out_dir, "compile-error.txt"), "w") as f:
            f.write(traceback.format_exc())
        emit("failed", 1, reason=f"triton {version} for {arch}: {first[:400]}", **ident)
    compile_s = time.monotonic() - t0

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
    # The kernel parameters the binary takes, in order: the non-constexpr user arguments that were not
    # specialized away, then the hidden scratch pointers this release appends.
    params = [a["name"] for a in args if a["type"] != "constexpr"]
    emit("ok", 0, name=meta.get("name", spec["function"]), compile_s=compile_s, files=written, params=params,
         **ident)


if __name__ == "__main__":
    main()
