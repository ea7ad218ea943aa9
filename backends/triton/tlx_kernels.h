// kbisect's TLX kernels (kernels/triton/tlx_matmul.py, docs/triton.md "TLX"): warp-specialized matmuls
// written with Triton's low-level language extensions, which a stock Triton gets from the triton-utlx
// plugin. Declared like the other Triton kernels (a KernelDecl and a TritonSpec each), compiled by the same
// path; a toolchain without TLX skips them, naming its release and the missing plugin.
//
//   tlx_matmul_ws  (cuda) sm_90a: producer warp group + two wgmma consumer warp groups;
//                         sm_100a: load, tcgen05 MMA and epilogue partitions, accumulators in tensor memory
//   tlx_matmul     (hip)  gfx942: LDS double buffering with MFMA
#pragma once
#include <string>
#include <vector>

#include "backends/triton/triton_kernels.h"

namespace kb::triton {

std::vector<KernelDecl> tlx_kernel_decls(const std::string& backend);
// The spec of a TLX kernel by name; nullptr for any other name.
const TritonSpec* find_tlx_spec(const std::string& kernel);

}  // namespace kb::triton
