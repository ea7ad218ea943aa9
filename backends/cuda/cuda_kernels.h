// The CUDA kernels' declarations (names, parameters, constraints, built-in configs) and how each one is
// launched (block size, dynamic shared memory, argument style): the one place that knows both.
#pragma once
#include <string>
#include <vector>

#include "backends/kernel.h"

namespace kb::cuda {

const std::vector<KernelDecl>& cuda_kernels();

// Streaming-multiprocessor limits of a target ("sm_80", "sm_90a", ...), for occupancy and checks.
struct ArchLimits {
  int sm = 0;                       // 80, 86, 89, 90, ...
  bool arch_specific = false;       // the "a" suffix (sm_90a: wgmma, setmaxnreg)
  int max_threads_per_sm = 2048;
  int max_warps_per_sm = 64;
  int max_blocks_per_sm = 32;
  int regs_per_sm = 65536;
  int max_regs_per_thread = 255;
  int smem_per_sm = 0;              // bytes usable by blocks
  int max_smem_per_block = 0;       // opt-in maximum
  int reserved_smem_per_block = 1024;
};
// Throws InputError for a target that is not "sm_<digits>[a|f]".
ArchLimits arch_limits(const std::string& target);

// Theoretical occupancy (active warps / max warps per SM) from registers per thread, threads per
// block and shared memory per block (static + dynamic), as the CUDA occupancy calculator computes it.
double theoretical_occupancy(const ArchLimits& a, int regs_per_thread, int threads_per_block, int64_t smem_bytes);

// Pointers: kb_matmul(A, B, C, M, N, K); TensorMaps: kb_matmul(mapA, mapB, C, M, N, K) (TMA kernels);
// Library: no cubin, the launch is a library call (cuBLAS' cublasGemmEx, backends/cuda/cublas_gemm.h).
// Triton: a Triton cubin, its arguments as its launch.json says (backends/cuda/triton_launch.h).
enum class ArgStyle { Pointers, TensorMaps, Library, Triton };

struct LaunchShape {
  int threads = 0;            // per block (1-D)
  int64_t dynamic_smem = 0;   // bytes
  ArgStyle args = ArgStyle::Pointers;
  bool b_transposed = false;  // B uploaded as Bt (N x K, row-major)
  int block_m = 0, block_n = 0, block_k = 0;  // tile handled by one block (TMA boxes)
  bool persistent = false;
};
// How a kernel instance is launched; params complete. Throws InputError for an unknown kernel.
LaunchShape launch_shape(const std::string& kernel, const Params& p, DType dtype);

// A library kernel (ArgStyle::Library): compiled by no compiler, without static metrics.
bool is_library_kernel(const std::string& kernel);

}  // namespace kb::cuda
