/* The fixed C entry every CPU kernel exports (kbisect loads it with dlopen + dlsym).
 * Row-major C[MxN] = A[MxK] * B[KxN]; fp32 accumulation. Parameters come in as -DKB_<NAME>=<value>;
 * the dtype as -DKB_DTYPE_F32 or -DKB_DTYPE_BF16 (inputs then hold bf16 bit patterns in uint16_t). */
#ifndef KB_CPU_KERNEL_H
#define KB_CPU_KERNEL_H
#include <stdint.h>

typedef struct kb_gemm_args {
  const void* A;
  const void* B;
  float* C;
  int64_t M, N, K;
} kb_gemm_args;

#ifdef __cplusplus
extern "C" {
#endif
/* Returns 0 on success, non-zero for arguments the kernel cannot take. */
int kb_gemm(const kb_gemm_args* args);
#ifdef __cplusplus
}
#endif

#endif
