// fp32 -> 16-bit float bit patterns (bf16, IEEE f16) for uploading operands to a kernel. Inputs arrive
// already rounded to the dtype by the harness, so the conversions are exact there; other values round
// to nearest even.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/kernel.h"

namespace kb {

uint16_t bf16_bits(float f);
uint16_t f16_bits(float f);
// Each value as the bit pattern of `d` (bf16 or f16).
std::vector<uint16_t> to_16bit(const std::vector<float>& x, DType d);

}  // namespace kb
