// The compile request the backend tests build: the kernel's params completed with its defaults, the
// source tree's kernels; out_dir and the timeout are left to the test.
#pragma once
#include "backends/backend.h"

namespace kb::test {

inline CompileRequest compile_request(const KernelDecl& k, const Toolchain& tc, const Params& p = {},
                                      DType d = DType::f32) {
  CompileRequest r;
  r.kernel = &k;
  r.params = k.complete(p);
  r.dtype = d;
  r.toolchain = &tc;
  r.kernel_dir = kernel_dir();
  return r;
}

}  // namespace kb::test
