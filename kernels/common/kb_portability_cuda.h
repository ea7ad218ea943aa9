/* CUDA part of the kernel portability header (included through kb_portability.h).
 *
 * Kernels are compiled by three paths: nvcc, NVRTC and clang (device-only, then ptxas). clang is run
 * with -nocudainc -nocudalib (the toolkit headers need NVCC-only builtins): CUDA 13's headers do not work with
 * clang <= 19, so this header supplies the few spellings the kernels need. Everything below is spelled
 * so that all three paths produce the same PTX instructions: special registers, barriers, shared
 * addresses and all tensor-core / async-copy operations go through inline PTX, never through CUDA
 * header functions. Kernels therefore include no CUDA header at all.
 */
#ifndef KB_PORTABILITY_CUDA_H
#define KB_PORTABILITY_CUDA_H

#define KB_CUDA 1

#if defined(__clang__) && !defined(__NVCC__) && !defined(__CUDACC_RTC__) && \
    !defined(__CLANG_CUDA_RUNTIME_WRAPPER_H__)
/* clang -nocudainc: nothing is predefined beyond the attributes. */
#define KB_CLANG_NOCUDAINC 1
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#endif

/* Fixed-width integers without <stdint.h> (NVRTC and -nocudainc have no C library headers). */
typedef unsigned int kb_u32;
typedef int kb_i32;
typedef unsigned long long kb_u64;
typedef unsigned short kb_u16;

#define KB_DEV static __device__ __forceinline__  /* free device functions */
#define KB_INL __device__ __forceinline__         /* member functions */
#define KB_HD __host__ __device__                 /* constexpr helpers used on both sides */

/* Thread/block indices through PTX special registers (same instructions on every path). */
#define KB_SREG2(fn, reg)                                               \
  KB_DEV kb_u32 kb_##fn() {                                             \
    kb_u32 r;                                                           \
    asm("mov.u32 %0, %%" reg ";" : "=r"(r));                            \
    return r;                                                           \
  }
KB_SREG2(tid_x, "tid.x")
KB_SREG2(ctaid_x, "ctaid.x")
KB_SREG2(ctaid_y, "ctaid.y")
KB_SREG2(nctaid_x, "nctaid.x")
KB_SREG2(ntid_x, "ntid.x")
KB_SREG2(laneid, "laneid")
#undef KB_SREG2

/* Barriers. bar.sync 0 is __syncthreads(); named barriers take an id and a thread count. */
KB_DEV void kb_sync_block() { asm volatile("bar.sync 0;" ::: "memory"); }
KB_DEV void kb_named_sync(kb_u32 id, kb_u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
KB_DEV void kb_named_arrive(kb_u32 id, kb_u32 count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* 32-bit shared-window address of a generic pointer into shared memory. */
KB_DEV kb_u32 kb_smem_addr(const void* p) {
  kb_u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

/* A CUtensorMap-compatible opaque block (128 bytes, 64-byte aligned), so that kernels need no cuda.h.
 * nvcc and NVRTC pass it by value as a __grid_constant__ parameter; clang (<= 19 has no grid_constant
 * attribute) gets a pointer to a copy in global memory. KB_TMAP_PARAM / KB_TMAP_PTR hide the difference;
 * the backend picks the matching launch ABI from the compile path. */
struct __attribute__((aligned(64))) kb_tensor_map {
  kb_u64 opaque[16];
};
#if defined(KB_CLANG_NOCUDAINC) || defined(__clang__) && !defined(__NVCC__) && !defined(__CUDACC_RTC__)
#define KB_TMAP_BY_VALUE 0
#define KB_TMAP_PARAM(name) const kb_tensor_map* __restrict__ name
#define KB_TMAP_PTR(name) (name)
#else
#define KB_TMAP_BY_VALUE 1
#define KB_TMAP_PARAM(name) const __grid_constant__ kb_tensor_map name
#define KB_TMAP_PTR(name) (&(name))
#endif

#endif /* KB_PORTABILITY_CUDA_H */
