// What a sweep measures: one case = a kernel instance (backends/kernel.h) on a shape, dtype and toolchain.
#pragma once
#include <string>

#include "backends/kernel.h"

namespace kb {

// One unit of work in a sweep.
struct Case {
  const KernelDecl* kernel = nullptr;
  Params params;
  Shape shape;
  DType dtype = DType::f32;
  std::string toolchain;  // toolchain name
  std::string tier = "l1";
  std::string id() const;  // "matmul_tiled[BM=64,...]/f32/512x512x512/clang-19"
};

}  // namespace kb
