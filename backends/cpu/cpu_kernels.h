// The CPU kernels' declarations (names, parameters, constraints, built-in configs).
#pragma once
#include <vector>

#include "backends/kernel.h"

namespace kb {
const std::vector<KernelDecl>& cpu_kernels();
}
