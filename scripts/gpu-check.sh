#!/usr/bin/env bash
# gpu-check.sh — kbisect's whole GPU check in one command that fits one short GPU lease.
#
#   scripts/gpu-check.sh --pack DIR [--build DIR]      here: make the carryable bundle (prints its size)
#   scripts/gpu-check.sh --rehearse [--build DIR]      here, no GPU: pack, unpack, check, run it all
#   scripts/gpu-check.sh --out DIR [--bundle DIR]      on the GPU machine (default bundle: ./gpu-bundle)
#
# The GPU machine is bare: no package registry, no compilers but its CUDA toolkit, no kbisect
# dependencies. So kbisect travels as a bundle made here (--pack): the stripped kbisect, kbisect-worker and
# test_backends_cuda (LLVM linked statically by the build) with their run path set to the bundle's lib/,
# and the few shared libraries they need besides glibc, all xz-compressed. NVRTC, cuBLAS and the driver
# are never carried: the machine's own CUDA toolkit provides them. The bundle must stay within 40 MiB.
#
# The run (--out) takes at most $KBISECT_GPU_CHECK_BUDGET_S seconds (default 420) in all, unpack included.
# Every step runs under its own `timeout`, never longer than what is left of the whole, and prints a
# budget line. Steps: (0) unpack and check the libraries; (a) the environment: nvidia-smi, driver,
# clocks, L2 size and SM count; (b) correctness of every CUDA kernel config on small and odd shapes,
# through nvcc and NVRTC, with the device-side check; (c) the CUDA mutants (each must be reported
# incorrect), the device digest and the GPU tests of test_backends_cuda; (d) a short timed sweep (bf16
# 4096^3, 8192^3 and three LLaMA shapes), cold and hot, with cuBLAS (cublasGemmEx in the same process,
# as the anchor) in it when the kbisect in the bundle has the `cublas` kernel, else through
# backends/cuda/tools/cublas_ref.cu built here with nvcc; (h) the Triton kernels from the bundle's prebuilt
# cubins, correct and timed next to cuBLAS; (i) users' Triton kernels checked against their baseline
# toolchain's outputs, a mutant toolchain that must be called incorrect, and a timed ab of the attention
# kernel; (f) `kbisect ab` of nvcc against NVRTC on one
# kernel, and of NVRTC against itself (A/A); (g) `kbisect tune` of the sm90 (sm80) kernel at bf16 4096^3,
# raced on the device (its table goes to the log); (j) tune's static model against the device: examples/tune's
# GEMM, 48 points ranked, measured one by one and raced (Spearman, the race against the brute force).
# At most 8 files come back from a lease, so DIR receives exactly: gpu-check.log, env.txt, summary.json,
# correctness.json, timed-cold.json, timed-hot.json, ab.json, gtest.txt. Scratch work goes to a
# temporary directory. The last line is `gpu-check: N passed, M failed`.
# It never changes clocks, power limits, persistence or MIG: the card is measured as found.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=run
out=""
bundle=""
pack_dir=""
build_dir="${KBISECT_BUILD_DIR:-$here/build}"
budget_s="${KBISECT_GPU_CHECK_BUDGET_S:-420}"
bundle_limit_mib=40
bundled_bins=(kbisect kbisect-worker tests/test_backends_cuda)

in_run=""  # inside the run, the tally line is printed once, after the run
scratch=()  # temp directories, removed however the script ends
trap 'rm -rf -- "${scratch[@]}"' EXIT
die() { echo "gpu-check: $*" >&2; [[ -n "$in_run" ]] || echo "gpu-check: 0 passed, 1 failed"; exit 1; }
log() { echo "[gpu-check $(date +%H:%M:%S)] $*"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --pack) mode=pack; pack_dir=$2; shift 2 ;;
    --rehearse) mode=rehearse; shift ;;
    --build) build_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$budget_s" =~ ^[0-9]+$ ]] || die "KBISECT_GPU_CHECK_BUDGET_S='$budget_s' is not a whole number of seconds"

# ---------------------------------------------------------------- libraries: what may come from where
# glibc and the loader exist on every Linux host.
is_glibc() {
  case "$1" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libresolv.so*|linux-vdso*|libutil.so*) return 0 ;;
  esac
  return 1
}
# The CUDA driver and toolkit libraries: the host's own, never carried (NVRTC must match its builtins,
# the driver must match the kernel module).
is_cuda_lib() {
  case "$1" in
    libcuda.so*|libnvidia-*|libnvrtc*|libcublas*|libcudart*|libnvJitLink*) return 0 ;;
  esac
  return 1
}

# `ldd BINARY` resolved against the rule: every library is glibc, the host's CUDA, or in LIBDIR (or the
# host's C++ runtime, when host_cxx=1: see below). Prints one line per offender; non-zero when there is one.
host_cxx=0
check_libs() {
  local bin=$1 libdir bad=0 name path
  libdir=$(cd "$2" && pwd -P)
  while read -r name path; do
    is_glibc "$name" && continue
    if [[ $host_cxx -eq 1 && ( "$name" == libstdc++.so.6 || "$name" == libgcc_s.so.1 ) ]]; then continue; fi
    if [[ "$path" == "not" ]]; then
      echo "  $(basename "$bin"): $name not found"; bad=1; continue
    fi
    path=$(readlink -f "$path")
    if [[ "$path" == "$libdir"/* ]] || is_cuda_lib "$name"; then continue; fi
    echo "  $(basename "$bin"): $name resolves to $path, outside the bundle"; bad=1
  done < <(ldd "$bin" | awk '/=>/ {print $1, $3}')
  return $bad
}

unxz_to() {  # unxz_to FILE.xz DEST: xz when the host has it, else Python's lzma
  if command -v xz > /dev/null; then xz -dc "$1" > "$2"
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}

# unpack BUNDLE DEST: bin/ and lib/ decompressed, binaries executable.
unpack() {
  local src=$1 dst=$2 f sub
  mkdir -p "$dst/bin" "$dst/lib"
  for sub in bin lib; do
    for f in "$src/$sub"/*.xz; do
      [[ -e "$f" ]] || continue
      unxz_to "$f" "$dst/$sub/$(basename "$f" .xz)"
    done
  done
  chmod +x "$dst"/bin/*
}

# The host's CUDA toolkit: nvcc for the nvcc toolchain, its lib folder for NVRTC (and its builtins) and
# cuBLAS. Sets cuda_root and cuda_lib; only kbisect's own processes get cuda_lib on their library path.
find_cuda() {
  local r d
  cuda_root=""
  for r in "${KBISECT_CUDA_ROOT:-}" "${CUDA_HOME:-}" "${CUDA_PATH:-}" \
           "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /nonexistent/bin/nvcc)")")")" \
           /usr/local/cuda /usr/local/cuda-13*; do
    if [[ -n "$r" && -x "$r/bin/ptxas" ]]; then cuda_root=$r; break; fi
  done
  cuda_lib=""
  for d in "$cuda_root/lib64" "$cuda_root/targets/x86_64-linux/lib" "$cuda_root/lib"; do
    if [[ -n "$cuda_root" && -e "$d/libnvrtc.so.13" ]]; then cuda_lib=$d; break; fi
  done
  if [[ -z "$cuda_lib" ]]; then  # a toolkit installed as Python wheels
    cuda_lib=$(timeout 20 find /usr/local /opt /usr/lib -name 'libnvrtc.so.13' -printf '%h\n' 2>/dev/null | head -1 || true)
  fi
  return 0
}

# ---------------------------------------------------------------- the Triton kernels
# The GPU machine has no Triton and no package index: --pack compiles the Triton kernels here with the
# releases scripts/install-deps installs (`kbisect prebuild`), and the run finds those builds through the
# prebuilt toolchains' records, compiling nothing. The same sweep is written here and there.
triton_releases=(3.2.0 3.3.1 3.5.1)
triton_shapes_small='[512, 512, 256], [1024, 2048, 512]'
triton_shapes_big='[4096, 4096, 4096], [8192, 8192, 8192]'
triton_yaml() {  # triton_yaml TOOLCHAINS [cublas]: correctness on small shapes, cold timing on big ones
  echo "name: gpu-triton"
  echo "toolchains: [$1]"
  echo "measure: {mode: cold, warmup_s: 0.02, min_samples: 10, max_samples: 50, min_time_s: 0.05, max_time_s: 0.3, noise: 1%}"
  echo "benchmarks:"
  echo "  - {kernel: triton_matmul_tiled, backend: cuda, config: default, dtypes: [f16, bf16], shapes: [$triton_shapes_small, $triton_shapes_big]}"
  echo "  - {kernel: triton_matmul_tiled, backend: cuda, config: small, dtypes: [f16, bf16, f32], shapes: [$triton_shapes_small]}"
  echo "  - {kernel: triton_matmul_persistent, backend: cuda, dtypes: [f16, bf16], shapes: [$triton_shapes_small, $triton_shapes_big]}"
  if [[ -n "${2:-}" ]]; then
    echo "  - {kernel: cublas, backend: cuda, dtypes: [f16, bf16], shapes: [$triton_shapes_big], toolchains: [nvrtc-sm90a]}"
  fi
}

# Users' own kernels (tests/data/user-kernels): a softmax and an attention forward, checked against the
# baseline toolchain's outputs (3.5.1, the first) under 3.3.1 and 3.2.0, a softmax that the mutant
# toolchain (3.5.1 with KB_MUTANT=1 in its env, see mutant.py) miscompiles: it must be called incorrect, and
# a kernel that takes a host tensor descriptor (tma.py), whose CUtensorMap kbisect encodes at launch.
user_data="$here/tests/data/user-kernels"
mutant_tc=triton-3.5.1-sm90a-mutant
newest_first() {  # "triton-3.2.0-sm90a, triton-3.5.1-sm90a" -> "triton-3.5.1-sm90a, triton-3.2.0-sm90a" (the baseline first)
  tr ',' '\n' <<< "$1" | tr -d ' ' | sort -r | paste -sd, | sed 's/,/, /g'
}
user_yaml() {  # user_yaml TOOLCHAINS MUTANT_TOOLCHAIN (a name, or a file where Triton is)
  echo "name: gpu-user-kernels"
  echo "user_kernels: [$user_data/softmax.yaml, $user_data/attention.yaml, $user_data/mutant.yaml, $user_data/tma.yaml]"
  echo "toolchains: [$1]"
  echo "measure: {mode: cold, warmup_s: 0.02, min_samples: 10, max_samples: 50, min_time_s: 0.05, max_time_s: 0.3, noise: 1%}"
  echo "benchmarks:"
  echo "  - {kernel: user_softmax, backend: cuda}"
  echo "  - {kernel: user_attention_fwd, backend: cuda}"
  echo "  - {kernel: user_softmax_mutant, backend: cuda, toolchains: [triton-3.5.1-sm90a, $2]}"
  echo "  - {kernel: user_scale_tiles, backend: cuda, toolchains: [triton-3.5.1-sm90a]}  # a host TMA descriptor"
}

# The static model of `kbisect tune` against the device (docs/tune.md): the user's GEMM of examples/tune
# (bias and leaky ReLU, f16) at 4096^3 over its whole declared space (the `space:` of its file, 48 points),
# prebuilt here by Triton 3.5.1 for sm_90a. There: the model's order (tune --static-only), every point
# measured alone (a sweep: the brute force) and the race (tune) given a fifth of the brute force's time.
model_tc=triton-3.5.1-sm90a
model_kernel="$here/examples/tune/gemm_bias_leaky_relu.yaml"
model_shape=4096x4096x4096
model_yaml() {  # the brute force: every point of the file's space, measured hot, one at a time
  echo "name: gpu-tune-model"
  echo "user_kernels: [$model_kernel]"
  echo "toolchains: [$model_tc]"
  echo "measure: {mode: hot, warmup_s: 0.01, min_samples: 10, max_samples: 100, min_time_s: 0.05, max_time_s: 0.25, noise: 1%}"
  echo "benchmarks:"
  echo "  - {kernel: gemm_bias_leaky_relu, backend: cuda, shapes: [$model_shape],"
  echo "     params: {BM: [64, 128], BN: [64, 128], BK: [32, 64], opt.num_warps: [4, 8], opt.num_stages: [2, 3, 4]}}"
}

# ---------------------------------------------------------------- --pack
pack() {
  local dest=$1 b r tmp name path size total user_built=no model_built=no
  command -v patchelf > /dev/null || die "--pack needs patchelf (scripts/install-deps installs it)"
  command -v xz > /dev/null || die "--pack needs xz (scripts/install-deps installs it)"
  for b in "${bundled_bins[@]}"; do
    [[ -x "$build_dir/$b" ]] || die "--pack: $build_dir/$b not found (run scripts/build first)"
  done
  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-pack.XXXXXX")
  scratch+=("$tmp")
  for b in "${bundled_bins[@]}"; do
    name=$(basename "$b")
    strip --strip-all -o "$tmp/$name" "$build_dir/$b"
    # The bundle's own lib/ first; only the binaries get a run path, so nothing they start (nvcc,
    # ptxas, python) sees the bundle's libraries.
    patchelf --set-rpath '$ORIGIN/../lib' "$tmp/$name"
    xz -T0 -6 -c "$tmp/$name" > "$dest/bin/$name.xz"
  done
  while read -r name path; do
    is_glibc "$name" && continue
    is_cuda_lib "$name" && continue
    [[ "$path" == "not" ]] && die "--pack: $name is not found here (ldd); cannot bundle it"
    strip --strip-unneeded -o "$tmp/$name" "$(readlink -f "$path")"
    xz -T0 -6 -c "$tmp/$name" > "$dest/lib/$name.xz"
  done < <(for b in "${bundled_bins[@]}"; do ldd "$build_dir/$b"; done | awk '/=>/ {print $1, $3}' | sort -u)
  # The Triton kernels' builds for sm_90a, from every release installed here (none: the run skips them).
  local have tcs=""
  have=$(KBISECT_KERNEL_DIR="$here/kernels" "$build_dir/kbisect" list 2>/dev/null || true)
  for r in "${triton_releases[@]}"; do
    if grep -q "^  triton-$r-sm90a " <<< "$have"; then tcs+="${tcs:+, }triton-$r-sm90a"; fi
  done
  if [[ -n "$tcs" ]]; then
    triton_yaml "$tcs" > "$tmp/triton.yaml"
    KBISECT_KERNEL_DIR="$here/kernels" "$build_dir/kbisect" prebuild "$tmp/triton.yaml" -o "$tmp/triton-prebuilt" \
      > "$tmp/prebuild.txt" 2>&1 || { cat "$tmp/prebuild.txt"; die "--pack: kbisect prebuild of the Triton kernels failed"; }
    grep '^prebuilt ' "$tmp/prebuild.txt"
    # The users' kernels with the same releases, 3.5.1 first (the baseline), and the mutant toolchain.
    local root="${KBISECT_TRITON_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kbisect/triton}" utcs
    utcs=$(newest_first "$tcs")
    if [[ "$tcs" == *triton-3.5.1-sm90a* ]]; then
      printf 'name: %s\nbackend: cuda\nkind: triton\ncompiler: %s\ntarget: sm_90a\nenv: {KB_MUTANT: "1"}\n' \
        "$mutant_tc" "$root/triton-3.5.1/bin/python" > "$tmp/mutant-toolchain.yaml"
      user_yaml "$utcs" "$tmp/mutant-toolchain.yaml" > "$tmp/user.yaml"
      KBISECT_KERNEL_DIR="$here/kernels" "$build_dir/kbisect" prebuild "$tmp/user.yaml" -o "$tmp/triton-prebuilt" \
        > "$tmp/prebuild-user.txt" 2>&1 || { cat "$tmp/prebuild-user.txt"; die "--pack: kbisect prebuild of the users' kernels failed"; }
      grep '^prebuilt ' "$tmp/prebuild-user.txt"
      user_built=yes
      model_yaml > "$tmp/model.yaml"
      KBISECT_KERNEL_DIR="$here/kernels" "$build_dir/kbisect" prebuild "$tmp/model.yaml" -o "$tmp/triton-prebuilt" \
        > "$tmp/prebuild-model.txt" 2>&1 || { cat "$tmp/prebuild-model.txt"; die "--pack: kbisect prebuild of the tune model's GEMM failed"; }
      grep '^prebuilt ' "$tmp/prebuild-model.txt"
      model_built=yes
    fi
    tar -C "$tmp" -cf - triton-prebuilt | xz -T0 -6 > "$dest/triton-prebuilt.tar.xz"
  else
    echo "gpu-bundle: no Triton release here (scripts/install-deps installs them): the run skips the Triton kernels"
  fi
  rm -rf "$tmp"
  {
    echo "kbisect bundle for scripts/gpu-check.sh"
    echo "source: $(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "triton: ${tcs:-none}"
    echo "user-kernels: $user_built"
    echo "tune-model: $model_built"
    (cd "$dest" && find . -type f ! -name MANIFEST -printf '%s %P\n' | sort -k2)
  } > "$dest/MANIFEST"
  total=$(du -sb "$dest" | cut -f1)
  size=$(awk -v b="$total" 'BEGIN {printf "%.1f", b / 1048576}')
  echo "gpu-bundle: $(find "$dest" -type f | wc -l) files, ${size} MiB in $dest (limit ${bundle_limit_mib} MiB)"
  (( total <= bundle_limit_mib * 1048576 )) || die "--pack: the bundle is ${size} MiB, over ${bundle_limit_mib} MiB"
}

if [[ "$mode" == pack ]]; then
  pack "$pack_dir"
  exit 0
fi

# ---------------------------------------------------------------- --rehearse (no GPU, here)
if [[ "$mode" == rehearse ]]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-rehearse.XXXXXX")
  scratch+=("$work")
  # Everything the rehearsal starts (the unpacked run, its compilers) puts its temp files in here too.
  mkdir "$work/tmp"
  export TMPDIR="$work/tmp"
  fails=0
  fail() { echo "rehearse: FAIL $*"; fails=$((fails + 1)); }
  pack "$work/bundle" | tee "$work/pack.txt"
  # The bundle's binaries, unpacked into an empty directory, with nothing of this machine's but glibc
  # and the CUDA toolkit: the same libraries the GPU machine will resolve.
  mkdir -p "$work/empty"
  unpack "$work/bundle" "$work/empty/kb"
  find_cuda
  for b in "$work"/empty/kb/bin/*; do
    if out_libs=$(LD_LIBRARY_PATH="$cuda_lib" check_libs "$b" "$work/empty/kb/lib"); then echo "rehearse: $(basename "$b"): every library is the bundle's, glibc or CUDA"
    else fail "$(basename "$b"): libraries from elsewhere:"; echo "$out_libs"; fi
  done
  (cd "$work/empty" && env LD_LIBRARY_PATH="$cuda_lib" "$work/empty/kb/bin/kbisect" --version > "$work/version.txt" 2>&1) ||
    fail "the unpacked kbisect does not start: $(tail -2 "$work/version.txt")"
  # The whole run as the GPU machine would do it, from a copy of the tracked tree (what a lease carries),
  # with the GPU steps answered 'skipped: no GPU'.
  git -C "$here" ls-files -z --cached --others --exclude-standard |
    (cd "$here" && xargs -0 cp --parents -t "$work/empty" 2>/dev/null) ||
    fail "cannot copy the tracked tree"
  mkdir -p "$work/empty/gpu-bundle" && cp -r "$work/bundle/." "$work/empty/gpu-bundle/"
  mkdir -p "$work/out"
  t0=$(date +%s)
  set +e
  (cd "$work/empty" && env -u LD_LIBRARY_PATH KBISECT_GPU_CHECK_REHEARSAL=1 \
     bash scripts/gpu-check.sh --out "$work/out") > "$work/run.txt" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - t0 ))
  sed 's/^/  | /' "$work/run.txt"
  last=$(tail -1 "$work/run.txt")
  [[ "$last" =~ ^gpu-check:\ [0-9]+\ passed,\ [0-9]+\ failed$ ]] || fail "the run's last line is '$last'"
  [[ "$last" =~ \ 0\ failed$ ]] || fail "the run reported failures ($last, exit $rc)"
  (( wall <= budget_s + 15 )) || fail "the host-side run took ${wall} s, over its ${budget_s} s budget"
  # The $OUT rule of a lease: at most 8 files, each at most 16 MiB, at most two folders down.
  nfiles=$(find "$work/out" -type f | wc -l)
  (( nfiles <= 8 )) || fail "$nfiles files under --out (a lease returns 8)"
  big=$(find "$work/out" -type f -size +16M | head -1)
  [[ -z "$big" ]] || fail "$big is over 16 MiB"
  deep=$(find "$work/out" -mindepth 4 | head -1)
  [[ -z "$deep" ]] || fail "$deep is more than two folders down"
  # Every step ran under a timeout and printed its budget line.
  steps=$(grep -c '^budget: ' "$work/run.txt" || true)
  untimed=$(grep -c '^budget: .* no timeout' "$work/run.txt" || true)
  (( steps >= 7 )) || fail "only $steps budget lines (one per step expected)"
  (( untimed == 0 )) || fail "$untimed steps ran without a timeout"
  grep -q 'skipped: no GPU' "$work/run.txt" || fail "no GPU step was answered 'skipped: no GPU'"
  echo "rehearse: $(cat "$work/pack.txt" | grep '^gpu-bundle:')"
  echo "rehearse: host-side run ${wall} s of ${budget_s} s; $nfiles files under --out; $steps steps, each under a timeout"
  echo "rehearse: $([[ $fails -eq 0 ]] && echo ok || echo "$fails failed")"
  exit $(( fails > 0 ))
fi

# ---------------------------------------------------------------- the run
[[ -n "$out" ]] || die "--out DIR is required (on a lease: --out \"\$OUT\")"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
scratch+=("$work")
run_check() {
in_run=1
exec 3>&1  # the budget lines go here even when a step's own output is redirected
start=$(date +%s)
deadline=$((start + budget_s))
rehearsal=${KBISECT_GPU_CHECK_REHEARSAL:-}
results=()  # "what|status|detail" of the checks made here; the summary adds the rest
note() { results+=("$1|$2|$3"); }

# step NAME LIMIT_S COMMAND...: runs COMMAND under `timeout`, at most LIMIT_S and never past the
# deadline (10 s kept for the summary); prints "budget: NAME used/limit s (exit rc)". Sets step_rc.
# The budget line goes to fd 3 (the run's output), not to wherever the step's output is redirected.
step() {
  local name=$1 limit=$2 left t0 used
  shift 2
  left=$((deadline - 10 - $(date +%s)))
  if (( limit > left )); then limit=$left; fi
  if (( limit < 3 )); then
    echo "budget: $name 0/0 s (skipped: the run's ${budget_s} s are spent)" >&3
    step_rc=124
    return 0
  fi
  t0=$(date +%s)
  set +e
  timeout --kill-after=5 "$limit" "$@"
  step_rc=$?
  set -e
  used=$(( $(date +%s) - t0 ))
  echo "budget: $name ${used}/${limit} s (exit $step_rc$( ( [[ $step_rc -eq 124 || $step_rc -eq 137 ]] && echo ', timed out') || true)); run so far $(( $(date +%s) - start ))/${budget_s} s" >&3
}

# (0) unpack the bundle
[[ -n "$bundle" ]] || bundle="$here/gpu-bundle"
[[ -f "$bundle/MANIFEST" ]] || die "no bundle at $bundle (make one with --pack and carry it; see docs/gpu-check.md)"
log "(0) bundle $(sed -n 2p "$bundle/MANIFEST")"
export -f unpack unxz_to
step unpack 60 bash -c 'unpack "$@"' unpack "$bundle" "$work/kb"
[[ $step_rc -eq 0 ]] || die "cannot unpack $bundle"

# The Triton builds made by --pack: their cache entries seed this run's compile cache, and their records
# stand in for the Triton environments this machine does not have.
triton_dir=""
mkdir -p "$work/cache"
if [[ -f "$bundle/triton-prebuilt.tar.xz" ]]; then
  step triton-unpack 30 bash -c 'unxz_to "$1" "$2/triton.tar" && tar -C "$2" -xf "$2/triton.tar" && rm "$2/triton.tar" &&
    cp -r "$2/triton-prebuilt/compile" "$2/cache/"' unpack "$bundle/triton-prebuilt.tar.xz" "$work"
  if [[ $step_rc -eq 0 ]]; then triton_dir="$work/triton-prebuilt/triton"; fi
  log "Triton: $(sed -n 's/^triton: //p' "$bundle/MANIFEST"), prebuilt ($(ls "$work"/triton-prebuilt/compile 2>/dev/null | wc -l) cache folders)"
fi

find_cuda
log "CUDA toolkit: ${cuda_root:-none} (libraries: ${cuda_lib:-none})"
# The bundle's C++ runtime is the build machine's (GCC 12). A process holds one libstdc++, and the host's
# own libraries that kbisect dlopens (a HIP runtime, say) may need a newer one: a host whose libstdc++ is
# strictly newer keeps its own, a superset of what kbisect needs.
glibcxx() { grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$1" | sort -uV | tail -1; }
sys_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}' || true)
if [[ -n "$sys_cxx" && -f "$work/kb/lib/libstdc++.so.6" ]]; then
  have=$(glibcxx "$sys_cxx"); ours=$(glibcxx "$work/kb/lib/libstdc++.so.6")
  if [[ "$have" != "$ours" && "$(printf '%s\n%s\n' "$ours" "$have" | sort -V | tail -1)" == "$have" ]]; then
    rm -f "$work/kb/lib/libstdc++.so.6" "$work/kb/lib/libgcc_s.so.1"
    host_cxx=1
    log "C++ runtime: the host's $sys_cxx ($have, newer than the bundle's $ours)"
  else
    log "C++ runtime: the bundle's ($ours; the host's is ${have:-absent})"
  fi
fi
# Wrappers (real commands, so that `timeout` can run them): the CUDA library folder, the kernels of this
# tree, a scratch compile cache, and a 30 s deadline per launch.
mkdir -p "$work/cmd"
for b in kbisect test_backends_cuda; do
  cat > "$work/cmd/$b" <<SH
#!/usr/bin/env bash
export LD_LIBRARY_PATH="${cuda_lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" KBISECT_CUDA_ROOT="$cuda_root" \\
  KBISECT_KERNEL_DIR="$here/kernels" KBISECT_CACHE_DIR="$work/cache" KBISECT_CUDA_TIMEOUT_S=30 \\
  KBISECT_TRITON_DIR="${triton_dir:-$work/no-triton}"
exec "$work/kb/bin/$b" "\$@"
SH
  chmod +x "$work/cmd/$b"
done
kbisect=$work/cmd/kbisect
kbtest=$work/cmd/test_backends_cuda
if libs=$(for b in "$work"/kb/bin/*; do LD_LIBRARY_PATH="$cuda_lib" check_libs "$b" "$work/kb/lib"; done); then
  log "libraries: the bundle's, glibc and the host's CUDA"
else
  echo "$libs"; die "the bundle needs libraries this machine does not have"
fi

# (a) the environment
gpu=0
{
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "cuda toolkit: ${cuda_root:-none}; nvcc: $( ("$cuda_root/bin/nvcc" --version 2>/dev/null || true) | tail -2 | head -1)"
  if command -v nvidia-smi > /dev/null; then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw,power.limit,persistence_mode \
      --format=csv 2>&1 || true
    timeout 20 python3 -c 'import torch; p = torch.cuda.get_device_properties(0); print(f"device: {p.name}, {p.multi_processor_count} SMs, L2 {p.L2_cache_size / 2**20:.0f} MiB, {p.total_memory / 2**30:.0f} GiB")' 2>&1 | tail -1 || true
  else
    echo "nvidia-smi: not found"
  fi
  "$kbisect" --version
  "$kbisect" list
} > "$work/env.txt" 2>&1 || true
cp "$work/env.txt" "$out/env.txt"
echo "budget: environment (each query under timeout 20); run so far $(( $(date +%s) - start ))/${budget_s} s"
sed -n '1,12p' "$work/env.txt"
if grep -q '^  cuda   available' "$work/env.txt"; then gpu=1; fi
if [[ $gpu -eq 0 ]]; then
  log "no usable CUDA device: $(grep '^  cuda ' "$work/env.txt" | head -1 | sed 's/^ *//'); the GPU steps are skipped: no GPU"
  [[ -n "$rehearsal" ]] || note environment failed "no usable CUDA device (see env.txt)"
else
  note environment ok "$(grep -m1 '^device:' "$work/env.txt" || true)"
fi

# The device's arch picks the toolchains (sm_90 -> the sm90a presets).
cc=$(timeout 10 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
case "$cc" in
  8*) arch=sm80 ;;
  *) arch=sm90a ;;  # Hopper, and the rehearsal (its compiles are the Hopper ones)
esac
toolchains="nvcc-$arch, nvrtc-$arch"
has_cublas=0
grep -q '^  cuda  cublas ' "$work/env.txt" && has_cublas=1

# (b) correctness of every kernel config, small and odd shapes, minimal timing
{
  echo "name: gpu-correctness"
  echo "tier: l1"
  echo "toolchains: [$toolchains]"
  echo "measure: {warmup_s: 0, min_samples: 1, max_samples: 2, min_time_s: 0, max_time_s: 0.01}"
  echo "benchmarks:"
  for spec in "matmul_tiled:best small deep:f32, bf16, f16" \
              "matmul_ws_sm80:best small wide:bf16, f16" \
              "matmul_ws_sm90:best persistent wide:bf16, f16"; do
    IFS=: read -r kernel configs dtypes <<< "$spec"
    for cfg in $configs; do
      echo "  - {kernel: $kernel, backend: cuda, config: $cfg, dtypes: [$dtypes],"
      echo "     shapes: [[128, 128, 64], [200, 136, 72], [1000, 1024, 520], [64, 512, 2048]]}"
    done
  done
  echo "  - {kernel: matmul_tiled, backend: cuda, config: small, dtypes: [f32], shapes: [[77, 45, 33], [1, 1, 1]]}"
  if [[ $has_cublas -eq 1 ]]; then
    echo "  - {kernel: cublas, backend: cuda, dtypes: [bf16, f32], shapes: [[200, 136, 72], [1000, 1024, 520]], toolchains: [nvrtc-$arch]}"
  fi
} > "$work/correctness.yaml"
log "(b) correctness sweep"
step correctness 150 "$kbisect" sweep "$work/correctness.yaml" -o "$work/correctness" --format json,table > "$work/correctness.txt" 2>&1
tail -4 "$work/correctness.txt" | head -3
if [[ -f "$work/correctness/results.json" ]]; then cp "$work/correctness/results.json" "$out/correctness.json"; fi

# (c) mutants, device digest and the GPU tests
log "(c) CUDA mutants, device digest, GPU tests"
step mutants 150 "$kbtest" --gtest_filter='CudaMutants.*:CudaDigest.*:CudaGpu.*' --gtest_color=no > "$out/gtest.txt" 2>&1
mutants_rc=$step_rc
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  +(OK|FAILED|SKIPPED) +\]' "$out/gtest.txt" | tail -12

# (d)+(e) timed sweep, cold then hot, with cuBLAS as the anchor
shapes='[[4096, 4096, 4096], [8192, 8192, 8192], [2048, 4096, 4096], [2048, 11008, 4096], [2048, 4096, 11008]]'
timed_yaml() {  # timed_yaml MODE
  echo "name: gpu-timed-$1"
  echo "tier: l2"
  echo "toolchains: [$toolchains]"
  echo "measure: {mode: $1, warmup_s: 0.02, min_samples: 10, max_samples: 100, min_time_s: 0.05, max_time_s: 0.4, noise: 1%}"
  echo "benchmarks:"
  echo "  - {kernel: matmul_tiled, backend: cuda, config: best, dtypes: [bf16], shapes: $shapes}"
  echo "  - {kernel: matmul_ws_sm80, backend: cuda, config: best, dtypes: [bf16], shapes: $shapes}"
  if [[ "$arch" == sm90a ]]; then
    echo "  - {kernel: matmul_ws_sm90, backend: cuda, params: {PERSISTENT: [0, 1]}, dtypes: [bf16], shapes: $shapes}"
  fi
  if [[ $has_cublas -eq 1 ]]; then
    echo "  - {kernel: cublas, backend: cuda, dtypes: [bf16], shapes: $shapes, toolchains: [nvrtc-$arch]}"
  fi
}
for m in cold hot; do
  timed_yaml "$m" > "$work/timed-$m.yaml"
  log "(d) timed sweep, $m"
  step "timed-$m" $([[ $m == cold ]] && echo 90 || echo 60) \
    "$kbisect" sweep "$work/timed-$m.yaml" -o "$work/timed-$m" --format json,table > "$work/timed-$m.txt" 2>&1
  if [[ -f "$work/timed-$m/results.json" ]]; then cp "$work/timed-$m/results.json" "$out/timed-$m.json"; fi
done
# cuBLAS outside kbisect when the bundle's kbisect has no cublas kernel (an older bundle).
cublas_jsonl=""
if [[ $has_cublas -eq 0 && -n "$cuda_root" ]]; then
  log "(e) cuBLAS through backends/cuda/tools/cublas_ref.cu (this kbisect has no cublas kernel)"
  step cublas-build 60 "$cuda_root/bin/nvcc" -O2 -arch=native -o "$work/cublas_ref" "$here/backends/cuda/tools/cublas_ref.cu" \
    -L"$cuda_lib" -lcublas > "$work/cublas_build.txt" 2>&1
  if [[ $step_rc -eq 0 && $gpu -eq 1 ]]; then
    step cublas 60 env LD_LIBRARY_PATH="$cuda_lib" "$work/cublas_ref" 4096 4096 4096 8192 8192 8192 2048 4096 4096 \
      2048 11008 4096 2048 4096 11008 > "$work/cublas.jsonl" 2> "$work/cublas.err"
    if [[ $step_rc -eq 0 ]]; then cublas_jsonl="$work/cublas.jsonl"; fi
  fi
fi

# (h) the Triton kernels from their prebuilt cubins: correctness on small shapes (the device digest against
# the reference), cold timing on big ones next to cuBLAS. Without a GPU: static metrics from the bundle's
# builds, every case a cache hit (nothing is compiled here: this machine has no Triton).
triton_tcs=""
if [[ -n "$triton_dir" ]]; then
  triton_tcs=$(sed -n 's/^triton: //p' "$bundle/MANIFEST")
  [[ "$triton_tcs" != none ]] || triton_tcs=""
fi
if [[ -z "$triton_tcs" ]]; then
  note "Triton kernels" skipped "skipped: the bundle has no Triton builds (--pack found no Triton release)"
elif [[ "$arch" != sm90a ]]; then
  note "Triton kernels" skipped "skipped: the bundle's Triton builds are for sm_90a, this device is $cc"
else
  triton_yaml "$triton_tcs" $([[ $has_cublas -eq 1 ]] && echo cublas) > "$work/triton.yaml"
  log "(h) Triton kernels ($triton_tcs): prebuilt cubins, correctness and cold timing next to cuBLAS"
  step triton 100 "$kbisect" sweep "$work/triton.yaml" -o "$work/triton" --format json,table > "$work/triton.txt" 2>&1
  grep -E '^[0-9]+ cases' "$work/triton.txt" || tail -3 "$work/triton.txt"
fi

# (i) users' kernels from the bundle's builds: each case checked against the baseline toolchain's outputs
# (3.5.1) on the same inputs, the mutant toolchain's softmax must be called incorrect, and a timed A/B of the
# attention kernel, 3.3.1 against 3.5.1. Without a GPU: static metrics, and the mutant's code must differ.
user_ran=""
user_ab_rc=""
if [[ -z "$triton_tcs" || "$arch" != sm90a ]] || ! grep -q '^user-kernels: yes' "$bundle/MANIFEST"; then
  note "users' kernels" skipped "skipped: the bundle has no builds of them for this device ($cc)"
else
  user_tcs=$(newest_first "$triton_tcs")
  user_yaml "$user_tcs" "$mutant_tc" > "$work/user.yaml"
  log "(i) users' kernels ($user_tcs; the first is the baseline) and the mutant toolchain"
  step user 90 "$kbisect" sweep "$work/user.yaml" -o "$work/user" --format json,table > "$work/user.txt" 2>&1
  grep -E '^[0-9]+ cases' "$work/user.txt" || tail -3 "$work/user.txt"
  user_ran=1
  if [[ "$user_tcs" == *triton-3.3.1-sm90a* ]]; then
    step user-ab 60 "$kbisect" ab "$work/user.yaml" --toolchain triton-3.3.1-sm90a --toolchain triton-3.5.1-sm90a \
      --filter user_attention_fwd --budget-s 15 --threshold 1% -o "$work/user-ab" > "$work/user-ab.txt" 2>&1
    user_ab_rc=$step_rc
    grep -E '^(cuda/|[0-9]+ worse)' "$work/user-ab.txt" || tail -3 "$work/user-ab.txt"
  fi
fi

# (f) kbisect ab: nvcc against NVRTC (A/B) and NVRTC against itself (A/A), one kernel, one shape.
log "(f) ab: nvcc vs NVRTC and NVRTC vs NVRTC"
ab_kernel=$([[ "$arch" == sm90a ]] && echo matmul_ws_sm90 || echo matmul_ws_sm80)
cat > "$work/ab.yaml" <<YAML
name: gpu-ab
toolchains: [nvrtc-$arch]
measure: {mode: cold}
benchmarks:
  - {kernel: $ab_kernel, backend: cuda, config: best, dtypes: [bf16], shapes: [[4096, 4096, 4096]]}
YAML
step ab-nvcc-nvrtc 45 "$kbisect" ab "$work/ab.yaml" --toolchain "nvcc-$arch" --toolchain "nvrtc-$arch" --budget-s 15 \
  --threshold 1% -o "$work/ab-ab" > "$work/ab-ab.txt" 2>&1
ab_rc=$step_rc
step ab-aa 45 "$kbisect" ab "$work/ab.yaml" --toolchain "nvrtc-$arch" --toolchain "nvrtc-$arch" --budget-s 15 \
  --threshold 1% -o "$work/ab-aa" > "$work/ab-aa.txt" 2>&1
aa_rc=$step_rc
# Does placement matter on the GPU? The same A/A with the random gaps before the device operands turned
# off: every block's operands then land where the previous block's were.
step ab-aa-fixed 45 env KBISECT_CUDA_GAPS=0 "$kbisect" ab "$work/ab.yaml" --toolchain "nvrtc-$arch" \
  --toolchain "nvrtc-$arch" --budget-s 15 --threshold 1% -o "$work/ab-aa-fixed" > "$work/ab-aa-fixed.txt" 2>&1
fixed_rc=$step_rc
cat "$work/ab-ab.txt" "$work/ab-aa.txt" "$work/ab-aa-fixed.txt" | grep -E '^(cuda/|geomean|[0-9]+ worse)'
python3 - "$work" "$out/ab.json" <<'PY'
import json, os, sys
work, dest = sys.argv[1], sys.argv[2]
every = {}
for name in ("ab-ab", "ab-aa", "ab-aa-fixed"):
    p = os.path.join(work, name, "ab.json")
    try:
        with open(p) as f: every[name] = json.load(f)
    except Exception as e:
        every[name] = {"error": f"no {p}: {e}"}
        continue
    # Did the device operands move between blocks? Distinct placements per side, against blocks.
    for pair in every[name].get("extra", {}).get("pairs", []):
        pl = pair.get("placements", {})
        a, b = pl.get("a", []), pl.get("b", [])
        dec = next((c.get("decision", {}) for c in every[name]["extra"].get("comparison", {}).get("cases", [])), {})
        ci = dec.get("ci_pct") or [float("nan")] * 2
        print(f"placement {name}: {len(a)} blocks, {len(set(a))} distinct for A and {len(set(b))} for B; "
              f"effect {dec.get('effect_pct', float('nan')):+.3f}% CI [{ci[0]:+.3f}%, {ci[1]:+.3f}%] {dec.get('verdict')}")
with open(dest, "w") as f: json.dump(every, f, indent=1)
PY

# (g) kbisect tune on the device: the kernel's declared space compiled in parallel, pruned on static
# metrics, the survivors checked and raced on the GPU, the winner confirmed against the built-in default.
# Without a GPU it ranks on static metrics only and says so. Its table goes to the log.
log "(g) tune: $ab_kernel bf16 4096^3 through nvrtc-$arch"
# The rehearsal (2 cores, no GPU) compiles a part of the space: 8 points instead of 40.
tune_space=()
[[ -z "$rehearsal" ]] || tune_space=(--space BN=128,256 --space STAGES=3,4)
step tune 120 "$kbisect" tune "$ab_kernel" --toolchain "nvrtc-$arch" --shape 4096x4096x4096 --dtype bf16 \
  --budget-s 40 --jobs "$(nproc)" "${tune_space[@]}" > "$work/tune.txt" 2>&1
tune_rc=$step_rc
grep -v -E '^(racing|compiled) ' "$work/tune.txt" | tail -70

# (j) the static model against the device: the example GEMM's 48 points ranked by the model, measured one by
# one (the brute force), and raced by kbisect tune with a fifth of the brute force's measuring time; prints
# the rank correlation (Spearman) of the model's order with the measured one, where the measured best is in
# the model's order, and the race against the brute force. Without a GPU: the model's order from the bundle's
# builds (nothing compiled here), none pruned but for a hard limit.
model_summary=""
if [[ -z "$triton_tcs" || "$arch" != sm90a ]] || ! grep -q '^tune-model: yes' "$bundle/MANIFEST"; then
  note "tune model" skipped "skipped: the bundle has no builds of examples/tune's GEMM for this device ($cc)"
else
  log "(j) tune model: examples/tune GEMM f16 $model_shape, 48 points: model order, brute force, race"
  model_yaml > "$work/model.yaml"
  step model-rank 30 "$kbisect" tune "$model_kernel" --toolchain "$model_tc" --shape "$model_shape" --dtype f16 \
    --static-only --json "$work/model-rank.json" > "$work/model-rank.txt" 2>&1
  model_rank_rc=$step_rc
  step model-brute 90 "$kbisect" sweep "$work/model.yaml" -o "$work/model-brute" --format json > "$work/model-brute.txt" 2>&1
  model_brute_rc=$step_rc
  race_budget=$(python3 -c 'import json, sys
try: cases = json.load(open(sys.argv[1])).get("cases", [])
except Exception: cases = []
print("%.1f" % max(1.0, 0.2 * sum(c.get("measure_s", 0) for c in cases)))' "$work/model-brute/results.json")
  step model-race 90 "$kbisect" tune "$model_kernel" --toolchain "$model_tc" --shape "$model_shape" --dtype f16 \
    --budget-s "$race_budget" --json "$work/model-race.json" > "$work/model-race.txt" 2>&1
  model_race_rc=$step_rc
  model_summary="$work/model-summary.json"
  python3 - "$work" "$gpu" "$model_rank_rc" "$model_brute_rc" "$model_race_rc" "$race_budget" "$model_summary" <<'PY'
import json, os, sys
work, gpu, rank_rc, brute_rc, race_rc, budget, dest = sys.argv[1:8]
gpu = gpu == "1"
def load(name):
    try:
        with open(os.path.join(work, name)) as f: return json.load(f)
    except Exception: return None
def key(params): return ",".join(f"{k}={params[k]}" for k in sorted(params))
def ranks(xs):  # 1-based, ties averaged
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]: j += 1
        for t in range(i, j + 1): r[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return r
def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a); ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra); vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va and vb else float("nan")
s = {"rank_rc": rank_rc, "brute_rc": brute_rc, "race_rc": race_rc, "race_budget_s": float(budget), "problems": []}
model = load("model-rank.json")
order = []  # the model's order of the points (keys), first = its estimate of the fastest
if model:
    cands = model["shapes"][0]["candidates"]
    order = [key(c["params"]) for c in cands if c["status"] == "ranked"]
    est = {key(c["params"]): c["estimate"]["time_s"] for c in cands if (c.get("estimate") or {}).get("model") == "gemm"}
    soft = [c for c in cands if c["status"] != "ranked" and "cannot launch" not in c["reason"]]
    first = cands[0]["params"] if order else {}
    s.update(points=len(cands), ranked=len(order), model_first=first)
    for c in soft: s["problems"].append(f"{key(c['params'])}: {c['status']}: {c['reason'][:200]}")
    if len(est) != len(order): s["problems"].append(f"{len(order) - len(est)} points not estimated by the GEMM model")
    if not first or first.get("BM", 0) * first.get("BN", 0) < 128 * 128:
        s["problems"].append(f"the model's first is not a tile of at least 128x128: {first}")
else:
    s["problems"].append(f"no model ranking (tune --static-only exit {rank_rc})")
brute = load("model-brute/results.json")
meas = {}
if brute:
    cases = brute.get("cases", [])
    fresh = [c for c in cases if (c.get("static") or {}).get("code_bytes") and not (c.get("static") or {}).get("cache_hit")]
    if fresh: s["problems"].append(f"{len(fresh)} points compiled here, not from the bundle's builds")
    bad = [c for c in cases if c.get("status") in ("failed", "incorrect")]
    for c in bad: s["problems"].append(f"{key(c.get('params', {}))}: {c.get('status')}: {str(c.get('reason', ''))[:200]}")
    meas = {key(c["params"]): c["summary"]["median_s"] for c in cases if c.get("status") == "ok"}
    s["brute_measure_s"] = sum(c.get("measure_s", 0) for c in cases)
    s["brute_points"] = len(cases)
else:
    s["problems"].append(f"no brute-force results (sweep exit {brute_rc})")
if gpu and meas and order:
    both = [k for k in order if k in meas and k in est]
    s["spearman"] = spearman([est[k] for k in both], [meas[k] for k in both])
    best = min(meas, key=meas.get)
    s["measured_best"], s["measured_best_tflops"] = best, 2 * 4096 ** 3 / meas[best] * 1e-12
    s["measured_best_model_rank"] = order.index(best) + 1 if best in order else None
    s["model_first_measured_gap_pct"] = 100 * (meas.get(order[0], float("nan")) / meas[best] - 1)
    race = load("model-race.json")
    if race and race["shapes"][0].get("winner"):
        w = key(race["shapes"][0]["winner"])
        s["race_winner"], s["race_measuring_s"] = w, race["shapes"][0]["measuring_s"]
        s["race_gap_pct"] = 100 * (meas.get(w, float("nan")) / meas[best] - 1)
        s["race_time_ratio"] = s["race_measuring_s"] / s["brute_measure_s"] if s.get("brute_measure_s") else None
    else:
        s["problems"].append(f"no race result (tune exit {race_rc})")
    goal = lambda ok: "goal met" if ok else "goal MISSED"
    print(f"tune model: Spearman(model order, measured order) = {s['spearman']:.3f} over {len(both)} points "
          f"({goal(s['spearman'] >= 0.6)}: >= 0.6)")
    print(f"tune model: measured best {best} ({s['measured_best_tflops']:.0f} TFLOP/s) is the model's "
          f"#{s['measured_best_model_rank']} ({goal((s['measured_best_model_rank'] or 99) <= 5)}: top 5); the model's "
          f"first measures {s['model_first_measured_gap_pct']:+.1f}% slower")
    if "race_gap_pct" in s:
        print(f"tune model: the race picked {s['race_winner']}, {s['race_gap_pct']:+.2f}% from the best "
              f"({goal(s['race_gap_pct'] <= 3)}: within 3%), in {s['race_measuring_s']:.1f} s against the brute "
              f"force's {s['brute_measure_s']:.1f} s ({s['race_time_ratio']:.2f}; {goal((s['race_time_ratio'] or 9) <= 0.25)}: <= 0.25)")
elif model:
    print(f"tune model: {s.get('ranked')} of {s.get('points')} points ranked, the model's first {s.get('model_first')}; "
          f"not measured: no GPU")
for p in s["problems"]: print(f"FAIL tune model: {p}")
with open(dest, "w") as f: json.dump(s, f, indent=1)
PY
fi

# ---------------------------------------------------------------- summary
python3 - "$out" "$gpu" "$mutants_rc" "$ab_rc" "$aa_rc" "$fixed_rc" "$cublas_jsonl" "$(printf '%s\n' "${results[@]}")" "$tune_rc" \
  "$([[ -n "$triton_tcs" && "$arch" == sm90a ]] && echo "$work/triton/results.json")" \
  "$([[ -n "$user_ran" ]] && echo "$work/user/results.json")" "$user_ab_rc" "$work/user-ab/ab.json" "$mutant_tc" \
  "$model_summary" <<'PY'
import json, os, sys
out, gpu, mutants_rc, ab_rc, aa_rc, fixed_rc, cublas_jsonl, noted, tune_rc, triton_json = sys.argv[1:11]
user_json, user_ab_rc, user_ab_json, mutant_tc, model_json = sys.argv[11:16]
gpu = gpu == "1"
checks = [tuple(l.split("|", 2)) for l in noted.splitlines() if l]  # (what, status, detail)
def load(name):
    try:
        with open(os.path.join(out, name)) as f: return json.load(f).get("cases", [])
    except Exception:
        return None
def tc_name(c):
    t = c.get("toolchain")
    return t.get("name") if isinstance(t, dict) else (t or "")
def cid(c):
    p = ",".join(f"{k}={v}" for k, v in sorted(c.get("params", {}).items()))
    s = c.get("shape", {})
    return f"{c.get('kernel')}[{p}]/{c.get('dtype')}/{s.get('M')}x{s.get('N')}x{s.get('K')}/{tc_name(c)}"
for name in ("correctness.json", "timed-cold.json", "timed-hot.json"):
    cases = load(name)
    if cases is None:
        checks.append((name, "failed", "no results"))
        continue
    bad = [c for c in cases if c.get("status") in ("failed", "incorrect")]
    ok = [c for c in cases if c.get("status") == "ok"]
    sk = [c for c in cases if c.get("status") == "skipped"]
    for c in bad:
        print(f"FAIL {name}: {cid(c)}: {c.get('status')}: {str(c.get('reason', ''))[:300]}")
    if bad: checks.append((name, "failed", f"{len(bad)} of {len(cases)} cases failed or incorrect"))
    elif not gpu: checks.append((name, "skipped", f"skipped: no GPU ({len(sk)} cases compiled, then skipped)"))
    elif not ok: checks.append((name, "failed", "no case ran"))
    else: checks.append((name, "ok", f"{len(ok)} ok, {len(sk)} skipped with a reason"))
# The Triton kernels: from the bundle's builds only (a case compiled here would mean this machine had a
# Triton after all, or the builds did not match the tree); on a GPU, correct and timed; their table goes to
# the log and a compact record of every case into summary.json (a lease returns 8 files).
def load_run(path, what):  # a run's cases, or None once its missing results are noted as a failure
    try:
        with open(path) as f: return json.load(f).get("cases", [])
    except Exception as e:
        checks.append((what, "failed", f"no results ({e})"))
        return None
def compiled_here(cases):  # built, but not from the bundle's prebuilt builds
    return [c for c in cases if (c.get("static") or {}).get("code_bytes") and not (c.get("static") or {}).get("cache_hit")]
def case_record(c, name, **more):  # what summary.json keeps of a case
    st = c.get("static") or {}
    return {"case": name, "status": c.get("status"), "reason": str(c.get("reason", ""))[:300],
            "median_s": (c.get("summary") or {}).get("median_s"), "cache_hit": st.get("cache_hit"), **more,
            **{m: st[m] for m in ("registers", "spill_stores", "smem_bytes", "code_bytes") if m in st}}
ref, rows = {}, []  # cuBLAS TFLOP/s by (mode, shape); the table's rows
triton_rows, triton_record = [], []
if triton_json:
    tcases = load_run(triton_json, "Triton kernels")
    if tcases is not None:
        tri = [c for c in tcases if str(c.get("kernel", "")).startswith("triton_")]
        built = [c for c in tri if (c.get("static") or {}).get("code_bytes")]
        fresh = compiled_here(built)
        bad = [c for c in tcases if c.get("status") in ("failed", "incorrect")]
        for c in bad + fresh:
            print(f"FAIL triton: {cid(c)}: {c.get('status')}{' (compiled here, not prebuilt)' if c in fresh else ''}: "
                  f"{str(c.get('reason', ''))[:300]}")
        ok = [c for c in tri if c.get("status") == "ok"]
        if bad or fresh or not built:
            checks.append(("Triton kernels", "failed", f"{len(bad)} failed or incorrect, {len(fresh)} compiled here, "
                           f"{len(built)} of {len(tri)} from prebuilt builds"))
        elif not gpu:
            checks.append(("Triton kernels", "ok", f"{len(built)} of {len(tri)} cases from the prebuilt builds with their "
                           f"static metrics, nothing compiled; timing skipped: no GPU"))
        elif not ok:
            checks.append(("Triton kernels", "failed", "no Triton case ran"))
        else:
            checks.append(("Triton kernels", "ok", f"{len(ok)} correct and timed, {len(tri) - len(ok)} skipped with a reason"))
        for c in tcases:
            s = c.get("shape", {}); key = (s.get("M"), s.get("N"), s.get("K"))
            med = (c.get("summary") or {}).get("median_s") or 0
            tf = 2.0 * key[0] * key[1] * key[2] / med * 1e-12 if med else 0.0
            mode = f"t-{c.get('dtype')}"  # the Triton sweep is cold, per dtype
            if c.get("kernel") == "cublas" and c.get("status") == "ok": ref[(mode, key)] = tf
            triton_rows.append((mode, c, key, tf))
            triton_record.append(case_record(c, cid(c), tflops=tf))
# Users' kernels: from the bundle's builds only; on a GPU every case correct against the baseline but the
# mutant toolchain's, which must be incorrect; without one, the mutant's code must differ from the baseline's.
user_record, user_ab = [], None
if user_json:
    ucases = load_run(user_json, "users' kernels")
    if ucases is not None:
        fresh = compiled_here(ucases)
        mut = [c for c in ucases if tc_name(c) == mutant_tc]
        base = [c for c in ucases if c.get("kernel") == "user_softmax_mutant" and tc_name(c) != mutant_tc]
        rest = [c for c in ucases if c not in mut]
        for c in ucases:
            corr, summ = c.get("correctness") or {}, c.get("summary") or {}
            user_record.append(case_record(c, f"{c.get('kernel')}/{(c.get('shape') or {}).get('label')}/{tc_name(c)}",
                                           check=corr.get("method"), max_abs_error=corr.get("max_error"),
                                           tflops=summ.get("tflops"), gbps=summ.get("gbps")))
        if fresh or not mut or not base:
            checks.append(("users' kernels", "failed", f"{len(fresh)} compiled here (not prebuilt), {len(mut)} mutant cases, "
                           f"{len(base)} baseline cases of the mutant kernel"))
        elif not gpu:
            same = (mut[0].get("static") or {}).get("code_hash") == (base[0].get("static") or {}).get("code_hash")
            checks.append(("users' kernels", "failed" if same else "ok",
                           f"{len(ucases)} cases from the prebuilt builds, nothing compiled; the mutant's code "
                           f"{'is the same as' if same else 'differs from'} the baseline's; not run: no GPU"))
        else:
            bad = [c for c in rest if c.get("status") != "ok"]
            caught = [c for c in mut if c.get("status") == "incorrect"]
            for c in bad: print(f"FAIL users' kernels: {cid(c)}: {c.get('status')}: {str(c.get('reason', ''))[:300]}")
            ok = not bad and len(caught) == len(mut)
            checks.append(("users' kernels", "ok" if ok else "failed",
                           f"{len(rest) - len(bad)} of {len(rest)} correct against the baseline; the mutant "
                           f"{'called incorrect: ' + str(caught[0].get('reason', ''))[:200] if caught else 'NOT caught: ' + str(mut[0].get('status'))}"))
    if gpu and user_ab_rc:
        try:
            with open(user_ab_json) as f: user_ab = json.load(f)
            dec = next((c.get("decision", {}) for c in user_ab.get("extra", {}).get("comparison", {}).get("cases", [])), {})
            ci = dec.get("ci_pct") or [float("nan")] * 2
            detail = f"attention 3.3.1 vs 3.5.1: {dec.get('effect_pct', float('nan')):+.2f}% CI [{ci[0]:+.2f}%, {ci[1]:+.2f}%] {dec.get('verdict')}"
        except Exception as e:
            detail = f"no ab.json ({e})"
        checks.append(("users' kernels: timed ab", "ok" if user_ab_rc in ("0", "1") else "failed", f"exit {user_ab_rc}; {detail}"))
# The static model of kbisect tune (step j): its figures in summary.json; failed on a problem (a point pruned
# but for a hard limit, compiled here, incorrect; no result), the goals are reported, not enforced.
tune_model = None
if model_json:
    try:
        with open(model_json) as f: tune_model = json.load(f)
    except Exception as e:
        tune_model = {"problems": [f"no summary ({e})"]}
    probs = tune_model.get("problems", [])
    if probs: detail = f"{len(probs)} problems: {probs[0]}"
    elif gpu and "spearman" in tune_model:
        detail = (f"Spearman {tune_model['spearman']:.3f}, measured best is the model's #{tune_model.get('measured_best_model_rank')}, "
                  f"race {tune_model.get('race_gap_pct', float('nan')):+.2f}% from the best in "
                  f"{tune_model.get('race_time_ratio') or float('nan'):.2f} of the brute force's time")
    else:
        detail = f"{tune_model.get('ranked')} of {tune_model.get('points')} points ranked from the bundle's builds; not measured: no GPU"
    checks.append(("tune model", "failed" if probs or (gpu and "spearman" not in tune_model) else "ok", detail))
if gpu:
    checks.append(("mutants, digest, GPU tests", "ok" if mutants_rc == "0" else "failed", f"test_backends_cuda exit {mutants_rc}"))
    checks.append(("ab nvcc vs NVRTC", "ok" if ab_rc in ("0", "1") else "failed", f"exit {ab_rc} (0: same or better, 1: worse)"))
    checks.append(("ab A/A", "ok" if aa_rc == "0" else "failed", f"exit {aa_rc} (identical code must not be called worse)"))
    checks.append(("ab A/A, fixed placement", "ok" if fixed_rc == "0" else "failed", f"exit {fixed_rc}"))
    checks.append(("tune on the device", "ok" if tune_rc == "0" else "failed", f"kbisect tune exit {tune_rc}"))
else:
    checks.append(("mutants, digest, GPU tests", "ok" if mutants_rc == "0" else "failed",
                   f"compiled; GPU tests skipped: no GPU (exit {mutants_rc})"))
    checks.append(("ab", "skipped", "skipped: no GPU"))
    checks.append(("tune", "ok" if tune_rc == "0" else "failed", f"static metrics only: no GPU (kbisect tune exit {tune_rc})"))
# The table: kernel, path, correct?, TFLOP/s and the ratio to cuBLAS on the same shape and mode.
for mode in ("cold", "hot"):
    for c in load(f"timed-{mode}.json") or []:
        s = c.get("shape", {}); key = (s.get("M"), s.get("N"), s.get("K"))
        med = (c.get("summary") or {}).get("median_s") or 0
        tf = 2.0 * key[0] * key[1] * key[2] / med * 1e-12 if med else 0.0
        if c.get("kernel") == "cublas" and c.get("status") == "ok": ref[(mode, key)] = tf
        rows.append((mode, c, key, tf))
if cublas_jsonl:
    for line in open(cublas_jsonl):
        r = json.loads(line); ref[("cold", (r["M"], r["N"], r["K"]))] = r["tflops"]
rows += triton_rows
if gpu: checks.append(("cuBLAS anchor", "ok" if ref else "failed", f"{len(ref)} mode x shape figures"))
if rows and gpu:
    print(f"{'mode':<6} {'kernel':<34} {'path':<18} {'shape':<16} {'correct?':<9} {'TFLOP/s':>8} {'/cuBLAS':>7}")
    for mode, c, key, tf in rows:
        p = ",".join(f"{k}={v}" for k, v in sorted(c.get("params", {}).items())) if c.get("kernel") == "matmul_ws_sm90" else ""
        kern = f"{c.get('kernel')}[{p}]" if p else c.get("kernel")
        st = c.get("status")
        corr = {"ok": "yes", "incorrect": "NO"}.get(st, st)
        r = ref.get((mode, key))
        ratio = f"{tf / r:7.2f}" if r and tf and c.get("kernel") != "cublas" else "      -"
        print(f"{mode:<6} {kern:<34} {tc_name(c):<18} {'x'.join(map(str, key)):<16} {corr:<9} {tf:8.1f} {ratio}")
passed = sum(1 for _, st, _ in checks if st == "ok")
failed = sum(1 for _, st, _ in checks if st == "failed")
for what, st, detail in checks: print(f"{st:<8} {what}: {detail}")
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump({"gpu": gpu, "passed": passed, "failed": failed,
               "checks": [{"what": w, "status": s, "detail": d} for w, s, d in checks],
               "cublas_tflops": {f"{m}:{k[0]}x{k[1]}x{k[2]}": v for (m, k), v in ref.items()},
               "triton_cases": triton_record, "user_cases": user_record,
               "user_ab": (user_ab or {}).get("extra", {}).get("comparison"), "tune_model": tune_model}, f, indent=1)
print(f"TALLY {passed} {failed}")
PY
echo "budget: total $(( $(date +%s) - start ))/${budget_s} s"
}
run_check 2>&1 | tee "$out/gpu-check.log.tmp" | grep -v '^TALLY '
tally=$(grep '^TALLY ' "$out/gpu-check.log.tmp" | tail -1)
grep -v '^TALLY ' "$out/gpu-check.log.tmp" > "$out/gpu-check.log"
rm -f "$out/gpu-check.log.tmp"
read -r _ passed failed <<< "${tally:-TALLY 0 1}"
echo "gpu-check: $passed passed, $failed failed" | tee -a "$out/gpu-check.log"
[[ "$failed" -eq 0 ]]
