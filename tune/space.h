// The candidates of a kernel's tunable space (KernelDecl::space): every combination of the listed values,
// the kernel's other parameters at their defaults, each either valid or invalid with the kernel's own
// reason (check_params / check_shape), and an order to try them in.
#pragma once
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "harness/tuned_table.h"

namespace kb::tune {

struct SpacePoint {
  Params params;            // complete
  std::string invalid;      // why the kernel's checks refuse it ("" = valid)
  double prior = 0;         // machine prior: lower = try first (never used to drop a point)
};

// Every combination of the space (values in declared order), checked against dtype/target/shape and
// ordered by the prior: for CPU kernels with MR/NR, the distance of the micro-tile's register need
// (MR*NR/lanes accumulators + NR/lanes B vectors + 1 broadcast) from the registers the CPU has, preferring
// tiles that fit. Throws InputError when the kernel declares no space or none of its points is valid.
std::vector<SpacePoint> enumerate_space(const KernelDecl& k, DType dtype, const std::string& target, const Shape& shape,
                                        const CpuVectorInfo& cpu);

}  // namespace kb::tune
