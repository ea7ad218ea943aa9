#!/usr/bin/env bash
# gpu-check.sh — one non-interactive GPU check for kbisect's CUDA backend (NVIDIA GPU, CUDA 13 toolkit).
#
#   scripts/gpu-check.sh [--out DIR] [--bundle DIR] [--deps PREFIX] [--jobs N]
#   scripts/gpu-check.sh --pack DIR [--build DIR]        (run on the build machine, not on the GPU host)
#
# On the GPU host (no package registry there): uses a carried build when one runs, else builds here.
#   --bundle DIR  a directory made by --pack: kbisect plus the non-system shared libraries it links
#                 (found with ldd; large ones xz-compressed). Default: ./gpu-bundle if it exists.
#   --deps PREFIX .deb packages unpacked with `dpkg -x` into PREFIX (for the fallback build).
# Then: (1) correctness of every CUDA kernel config on small shapes (odd M, edge tiles), through every
# sm_90 toolchain found; (2) a short timed sweep (bf16, 4096^3 and LLaMA shapes); (3) cuBLAS
# (cublasGemmEx, bf16 in, fp32 out) on the same shapes as the reference, built here with nvcc;
# (4) the CUDA mutants and the device digest (test_backends_cuda, carried in the bundle when --pack
# found it in the build): every mutant must be reported incorrect on the GPU.
# Everything goes under --out (default ./gpu-check-out); the last line is `gpu-check: N passed, M failed`.
# It never changes clocks, power limits, persistence or MIG: the card is measured as found.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=./gpu-check-out
bundle=""
deps=""
pack=""
build_dir="$here/build-cuda"
jobs=$(nproc 2>/dev/null || echo 4)

die() { echo "gpu-check: $*" >&2; echo "gpu-check: 0 passed, 1 failed"; exit 1; }
log() { echo "[gpu-check $(date +%H:%M:%S)] $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --deps) deps=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --build) build_dir=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

# ---------------------------------------------------------------- --pack: make a carryable bundle
is_system_lib() {
  # glibc and the loader exist on every Linux host; everything else travels.
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libresolv.so*|linux-vdso*) return 0 ;;
    libcuda.so*|libnvidia-ml.so*) return 0 ;;  # the driver's own libraries: never carried
  esac
  return 1
}

if [[ -n "$pack" ]]; then
  [[ -x "$build_dir/kbisect" ]] || die "--pack: $build_dir/kbisect not found (build it first)"
  mkdir -p "$pack/lib"
  cp "$build_dir/kbisect" "$pack/kbisect"
  bins=("$build_dir/kbisect")
  if [[ -x "$build_dir/tests/test_backends_cuda" ]]; then
    cp "$build_dir/tests/test_backends_cuda" "$pack/test_backends_cuda"
    bins+=("$build_dir/tests/test_backends_cuda")
  else
    log "no $build_dir/tests/test_backends_cuda: the bundle runs without the mutant step"
  fi
  while read -r lib; do
    [[ -n "$lib" && -f "$lib" ]] || continue
    is_system_lib "$lib" && continue
    name=$(basename "$lib")
    size=$(stat -L -c %s "$lib")
    if (( size > 8 * 1024 * 1024 )); then
      log "compressing $name ($((size / 1048576)) MiB)"
      xz -T0 -6 -c "$lib" > "$pack/lib/$name.xz"
    else
      cp -L "$lib" "$pack/lib/$name"
    fi
  done < <(for b in "${bins[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u)
  du -sh "$pack" >&2
  log "bundle ready in $pack (carry it with the source tree; run scripts/gpu-check.sh --bundle $pack)"
  exit 0
fi

# ---------------------------------------------------------------- the check
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/gpu-check.log") 2>&1
start=$(date +%s)
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
    > "$out/gpu.csv" 2>&1 || true
fi
[[ -f "$out/gpu.csv" ]] && cat "$out/gpu.csv"

kbisect=""
if [[ -z "$bundle" && -d ./gpu-bundle ]]; then bundle=./gpu-bundle; fi
if [[ -n "$bundle" ]]; then
  [[ -x "$bundle/kbisect" ]] || die "--bundle $bundle has no kbisect"
  libdir="$out/.lib"
  mkdir -p "$libdir"
  for f in "$bundle"/lib/*; do
    [[ -e "$f" ]] || continue
    case "$f" in
      *.xz) xz -d -c "$f" > "$libdir/$(basename "$f" .xz)" ;;
      *) cp "$f" "$libdir/" ;;
    esac
  done
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if "$bundle/kbisect" list > "$out/list.txt" 2>&1; then
    kbisect="$bundle/kbisect"
    log "using the carried build ($bundle)"
  else
    log "the carried build does not run here:"; tail -5 "$out/list.txt" >&2
  fi
fi
if [[ -z "$kbisect" ]]; then
  log "building kbisect here (fallback)"
  generator=(-G Ninja)
  command -v ninja > /dev/null || generator=()
  cmake_args=(-S "$here" -B "$out/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKBISECT_WITH_CUDA=ON
              -DKBISECT_WITH_HIP=OFF -DKBISECT_BUILD_TESTS=OFF -DKBISECT_BUILD_BENCH=OFF)
  if [[ -n "$deps" ]]; then
    cmake_args+=("-DCMAKE_PREFIX_PATH=$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake;$deps/usr/lib/llvm-19")
    export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/llvm-19/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  cmake "${cmake_args[@]}" > "$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; die "cmake failed (see $out/cmake.log)"; }
  cmake --build "$out/build" --target kbisect -j "$jobs" > "$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log"; die "build failed (see $out/build.log)"; }
  kbisect="$out/build/kbisect"
  "$kbisect" list > "$out/list.txt" 2>&1 || die "the fresh build does not run"
fi
export KBISECT_KERNEL_DIR="$here/kernels"
export KBISECT_CACHE_DIR="$out/cache"
cat "$out/list.txt"
grep -q "cuda   available" "$out/list.txt" || die "CUDA backend not available here (see $out/list.txt)"

# Toolchains that can run on this GPU: sm_90a presets (Hopper). clang's is used when present.
toolchains="nvcc-sm90a nvrtc-sm90a"
grep -q "clang19-cuda-sm90a" "$out/list.txt" && toolchains="$toolchains clang19-cuda-sm90a"
tc_yaml=${toolchains// /, }

# (1) correctness of every kernel config on small shapes, minimal timing
cat > "$out/correctness.yaml" <<YAML
name: gpu-correctness
tier: l1
toolchains: [$tc_yaml]
measure: {warmup_s: 0, min_samples: 1, max_samples: 2, min_time_s: 0, max_time_s: 0.01}
benchmarks:
YAML
for spec in "matmul_tiled:best small deep:f32, bf16, f16" \
            "matmul_ws_sm80:best small wide:bf16, f16" \
            "matmul_ws_sm90:best persistent wide:bf16, f16"; do
  IFS=: read -r kernel configs dtypes <<< "$spec"
  for cfg in $configs; do
    cat >> "$out/correctness.yaml" <<YAML
  - kernel: $kernel
    backend: cuda
    config: $cfg
    dtypes: [$dtypes]
    shapes: [[128, 128, 64], [200, 136, 72], [1000, 1024, 520], [64, 512, 2048]]
YAML
  done
done
cat >> "$out/correctness.yaml" <<YAML
  - kernel: matmul_tiled
    backend: cuda
    config: small
    dtypes: [f32]
    shapes: [[77, 45, 33], [1, 1, 1]]
YAML
log "correctness sweep"
set +e
"$kbisect" sweep "$out/correctness.yaml" -o "$out/correctness" --format table,json,csv > "$out/correctness.txt" 2>&1
rc_corr=$?
"$kbisect" sweep "$here/sweeps/cuda-h100.yaml" -o "$out/timed" --format table,json,csv,md \
  --toolchain nvcc-sm90a --toolchain nvrtc-sm90a > "$out/timed.txt" 2>&1
rc_timed=$?
set -e
log "sweeps done (exit codes: correctness $rc_corr, timed $rc_timed)"

# (3) cuBLAS reference on the timed shapes
cublas_ok=0
shapes="4096 4096 4096 2048 4096 4096 2048 11008 4096 2048 4096 11008 8192 8192 8192"
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if "$nvcc_bin" -O2 -arch=native -o "$out/cublas_ref" "$here/backends/cuda/tools/cublas_ref.cu" -lcublas \
     > "$out/cublas_build.log" 2>&1; then
  # shellcheck disable=SC2086  # the shape list is meant to split into arguments
  if "$out/cublas_ref" $shapes > "$out/cublas.jsonl" 2> "$out/cublas.err"; then cublas_ok=1; fi
else
  log "cuBLAS reference did not build (see $out/cublas_build.log)"
fi

# (4) mutants: each classic GEMM bug of matmul_tiled must fail the full and the fast (device) check
mutants_rc=skipped
if [[ -n "$bundle" && -x "$bundle/test_backends_cuda" ]]; then
  log "CUDA mutants and device digest"
  set +e
  "$bundle/test_backends_cuda" --gtest_filter='CudaMutants.*:CudaDigest.*' > "$out/mutants.txt" 2>&1
  mutants_rc=$?
  set -e
  tail -3 "$out/mutants.txt"
else
  log "no test_backends_cuda in the bundle: the mutant step is skipped"
fi

log "total $(( $(date +%s) - start )) s so far; summary follows"
# Summary table (last lines): per case status, and timed figures next to cuBLAS.
python3 - "$out" "$cublas_ok" "$mutants_rc" <<'PY'
import json, os, sys
out, cublas_ok, mutants_rc = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
passed = failed = skipped = 0
def load(p):
    try:
        with open(p) as f: return json.load(f).get("cases", [])
    except Exception as e:
        print(f"cannot read {p}: {e}"); return None
corr = load(os.path.join(out, "correctness", "results.json"))
timed = load(os.path.join(out, "timed", "results.json"))
for name, cases in (("correctness", corr), ("timed", timed)):
    if cases is None:
        failed += 1; continue
    for c in cases:
        s = c.get("status")
        if s == "ok": passed += 1
        elif s == "skipped": skipped += 1
        else:
            failed += 1
            p = ",".join(f"{k}={v}" for k, v in sorted(c.get("params", {}).items()))
            sh = c.get("shape", {})
            print(f"FAIL {name}: {c.get('kernel')}[{p}]/{c.get('dtype')}/{sh.get('M')}x{sh.get('N')}x{sh.get('K')}/"
                  f"{c.get('toolchain', {}).get('name')}: {s}: {str(c.get('reason', ''))[:300]}")
ref = {}
if cublas_ok:
    with open(os.path.join(out, "cublas.jsonl")) as f:
        for line in f:
            r = json.loads(line); ref[(r["M"], r["N"], r["K"])] = r
    passed += 1
else:
    failed += 1
    print("FAIL cuBLAS reference did not run")
if mutants_rc == "skipped":
    skipped += 1
    print("SKIP mutants: test_backends_cuda was not in the bundle")
elif mutants_rc == "0":
    passed += 1
else:
    failed += 1
    print(f"FAIL mutants: test_backends_cuda exited {mutants_rc} (see {out}/mutants.txt)")
rows = []
for c in timed or []:
    if c.get("status") != "ok": continue
    sh = c["shape"]; key = (sh["M"], sh["N"], sh["K"])
    med = c.get("summary", {}).get("median_s") or 0
    tf = 2.0 * key[0] * key[1] * key[2] / med * 1e-12 if med else 0
    p = ",".join(f"{k}={v}" for k, v in sorted(c.get("params", {}).items()))
    cb = ref.get(key, {}).get("tflops")
    rows.append((f"{c['kernel']}[{p}]", c["toolchain"]["name"], "x".join(map(str, key)), tf, cb))
if rows:
    print(f"{'kernel':<48} {'toolchain':<12} {'shape':<17} {'TFLOP/s':>8} {'cuBLAS':>8} {'ratio':>6}")
    for k, t, s, tf, cb in rows:
        print(f"{k:<48} {t:<12} {s:<17} {tf:8.1f} {(cb or 0):8.1f} {(tf / cb if cb else 0):6.2f}")
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump({"passed": passed, "failed": failed, "skipped": skipped, "cublas": list(ref.values())}, f, indent=2)
print(f"(skipped: {skipped}; details under {out})")
print(f"gpu-check: {passed} passed, {failed} failed")
PY
