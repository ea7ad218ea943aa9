#include "tune/space.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::tune {

namespace {

// Registers the MRxNR micro-tile needs against those the CPU has: 0 when it uses them all, growing as it
// uses fewer (idle registers) and faster when it needs more (spills).
double register_prior(const Params& p, const CpuVectorInfo& cpu) {
  if (!p.has("MR") || !p.has("NR")) return 0;
  const double lanes = std::max(1, cpu.f32_lanes);
  const double cols = std::ceil(double(p.get_int("NR")) / lanes);
  const double need = double(p.get_int("MR")) * cols + cols + 1;
  const double have = cpu.vector_registers;
  return need <= have ? (have - need) / have : 2 * (need - have) / have;
}

std::vector<Params> combinations(const KernelDecl& k) {
  std::vector<Params> out{k.complete({})};
  for (const auto& t : k.space) {
    std::vector<Params> next;
    for (const auto& base : out)
      for (const auto& v : t.values) {
        Params p = base;
        p.set(t.name, v);
        next.push_back(std::move(p));
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<SpacePoint> enumerate_space(const KernelDecl& k, DType dtype, const std::string& target, const Shape& shape,
                                        const CpuVectorInfo& cpu) {
  if (k.space.empty()) throw InputError(fmt::format("space: kernel {}/{} declares no tunable space", k.backend, k.name));
  std::vector<SpacePoint> out;
  size_t valid = 0;
  for (auto& p : combinations(k)) {
    SpacePoint sp{std::move(p), "", 0};
    if (k.check_params)
      if (auto why = k.check_params(sp.params, dtype, target)) sp.invalid = *why;
    if (sp.invalid.empty() && k.check_shape)
      if (auto why = k.check_shape(sp.params, dtype, shape)) sp.invalid = *why;
    if (k.backend == "cpu") sp.prior = register_prior(sp.params, cpu);
    valid += sp.invalid.empty();
    out.push_back(std::move(sp));
  }
  if (valid == 0)
    throw InputError(fmt::format("space: none of the {} points of {}/{} is valid for {} {} (first: {})", out.size(),
                                 k.backend, k.name, to_string(dtype), shape.str(), out.front().invalid));
  std::stable_sort(out.begin(), out.end(), [](const SpacePoint& a, const SpacePoint& b) { return a.prior < b.prior; });
  return out;
}

}  // namespace kb::tune
