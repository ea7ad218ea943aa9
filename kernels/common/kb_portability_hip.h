// HIP part of the portability header (included through kb_portability.h). Every spelling here works in
// all three HIP compile paths kbisect uses:
//   - hipcc / clang -x hip with the ROCm headers (hip_runtime.h already defines __global__ & co.),
//   - clang -x hip -nogpuinc -nogpulib (no HIP headers, no device libraries: gfx942, new clangs),
//   - hiprtc (the runtime compiler's own preamble).
// So kernels use only the KB_* macros and kb_* functions below, which are built from clang attributes and
// __builtin_amdgcn_* builtins, never from the HIP headers' macros.
#pragma once

#define KB_KERNEL extern "C" __attribute__((global))
#define KB_DEVICE static __attribute__((device)) inline __attribute__((always_inline))
#define KB_DEVICE_MEMBER __attribute__((device)) inline __attribute__((always_inline))  // class members
#define KB_SHARED __attribute__((shared))
// The HIP headers spell __launch_bounds__ this way; clang ignores a plain launch_bounds attribute in HIP
// mode (the kernel then keeps the default 1..1024 threads and a 128-VGPR budget on CDNA).
#define KB_LAUNCH_BOUNDS(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))
// Asks for at least `waves` waves per SIMD (caps registers at 512/waves per lane); 0 = compiler's choice.
#define KB_MIN_WAVES_PER_SIMD(waves) __attribute__((amdgpu_waves_per_eu((waves) > 0 ? (waves) : 1)))
#define KB_RESTRICT __restrict__
#define KB_UNROLL _Pragma("unroll")

// Fixed-width integer names without <stdint.h> (unavailable with -nogpuinc).
typedef unsigned short kb_u16;
typedef unsigned int kb_u32;
typedef long long kb_i64;

// Vector types (clang ext_vector_type; MFMA builtins take these).
typedef _Float16 kb_half4 __attribute__((ext_vector_type(4)));
typedef short kb_short4 __attribute__((ext_vector_type(4)));
typedef float kb_float4 __attribute__((ext_vector_type(4)));
typedef float kb_float16 __attribute__((ext_vector_type(16)));
typedef kb_u32 kb_uint4 __attribute__((ext_vector_type(4)));  // 16 bytes: one global/LDS vector access

#define KB_WAVE_SIZE 64  // CDNA (gfx9): wave64

KB_DEVICE kb_u32 kb_thread_x() { return __builtin_amdgcn_workitem_id_x(); }
KB_DEVICE kb_u32 kb_block_x() { return __builtin_amdgcn_workgroup_id_x(); }
KB_DEVICE kb_u32 kb_block_y() { return __builtin_amdgcn_workgroup_id_y(); }
// A value every lane of the wave holds alike, moved to a scalar register (branches on it are uniform).
KB_DEVICE int kb_wave_uniform(int v) { return __builtin_amdgcn_readfirstlane(v); }

// __syncthreads: make this thread's LDS/global writes visible to the workgroup, meet, then acquire.
KB_DEVICE void kb_syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// LDS flags for producer/consumer hand-off inside one workgroup (all its waves are resident on one CU,
// so spinning on a flag another wave sets cannot deadlock).
KB_DEVICE kb_u32 kb_flag_load(const kb_u32* flag) { return __atomic_load_n(flag, __ATOMIC_RELAXED); }
// Waits until *flag >= target, then acquires what the setter released.
KB_DEVICE void kb_flag_wait_geq(const kb_u32* flag, kb_u32 target) {
  while (kb_flag_load(flag) < target) __builtin_amdgcn_s_sleep(1);
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// Releases this wave's earlier LDS reads and writes (the fence waits for them), then one lane bumps the
// flag. The fence is executed by the whole wave, so every lane's accesses complete before the add.
KB_DEVICE void kb_flag_arrive(kb_u32* flag, kb_u32 lane) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  if (lane == 0) __atomic_fetch_add(flag, 1u, __ATOMIC_RELAXED);
}

// MFMA (CDNA2 gfx90a, CDNA3 gfx940/941/942). Operand layouts, per wave of 64 lanes:
//   32x32x8:  A lane l holds A[l%32][4*(l/32) + 0..3];  B lane l holds B[4*(l/32) + 0..3][l%32];
//             D register r of lane l is D[8*(r/4) + 4*(l/32) + r%4][l%32].
//   16x16x16: A lane l holds A[l%16][4*(l/16) + 0..3];  B lane l holds B[4*(l/16) + 0..3][l%16];
//             D register r of lane l is D[4*(l/16) + r][l%16].
// Operands arrive as 4 x 16-bit bit patterns (kb_short4) for both f16 and bf16.
KB_DEVICE kb_float16 kb_mfma_32x32x8_f16(kb_short4 a, kb_short4 b, kb_float16 c) {
  return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(kb_half4, a), __builtin_bit_cast(kb_half4, b), c,
                                              0, 0, 0);
}
KB_DEVICE kb_float4 kb_mfma_16x16x16_f16(kb_short4 a, kb_short4 b, kb_float4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(kb_half4, a), __builtin_bit_cast(kb_half4, b), c,
                                               0, 0, 0);
}
KB_DEVICE kb_float16 kb_mfma_32x32x8_bf16(kb_short4 a, kb_short4 b, kb_float16 c) {
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
}
KB_DEVICE kb_float4 kb_mfma_16x16x16_bf16(kb_short4 a, kb_short4 b, kb_float4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
}
