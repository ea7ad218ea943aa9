// One portability header for kernel spellings across GPU compile paths. Each toolchain family has its
// own part; kernels include only this file.
#pragma once
#if defined(__HIP__) || defined(__HIPCC__) || defined(__HIP_DEVICE_COMPILE__) || defined(KB_HIP)
#include "kb_portability_hip.h"
#elif defined(__CUDACC__) || defined(__CUDA__) || defined(__NVCC__) || defined(KB_CUDA)
#include "kb_portability_cuda.h"
#endif
