#include "backends/half_bits.h"

#include <cmath>
#include <cstring>

namespace kb {

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}

uint16_t f16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t au = u & 0x7fffffff;
  if (au > 0x7f800000) return uint16_t(sign | 0x7e00);           // NaN
  if (au >= 0x477ff000) return uint16_t(sign | 0x7c00);          // overflow (>= 65520) -> inf
  if (au < 0x38800000) {                                         // below the smallest normal 2^-14
    if (au < 0x33000000) return uint16_t(sign);                  // < 2^-25: rounds to zero
    const uint32_t mant = (au & 0x7fffff) | 0x800000;
    const int shift = 126 - int(au >> 23);                       // 14..24 for 2^-25 .. 2^-15
    uint32_t v = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return uint16_t(sign | v);
  }
  uint32_t v = ((au >> 13) - (112u << 10));                      // rebias exponent 127 -> 15
  const uint32_t rem = au & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) ++v;
  return uint16_t(sign | v);
}

std::vector<uint16_t> to_16bit(const std::vector<float>& x, DType d) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = d == DType::bf16 ? bf16_bits(x[i]) : f16_bits(x[i]);
  return out;
}

}  // namespace kb
