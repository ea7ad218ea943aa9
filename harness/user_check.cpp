#include "harness/user_check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kb {

std::optional<OutputReferences::Ref> OutputReferences::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, r] : items_)
    if (k == key) return r;
  return std::nullopt;
}

void OutputReferences::put(const std::string& key, Ref ref) {
  std::lock_guard<std::mutex> lock(mu_);
  items_.emplace_back(key, std::move(ref));
  int64_t total = 0;
  for (const auto& [k, r] : items_) total += r.outputs ? r.outputs->bytes() : 0;
  while (items_.size() > 1 && total > max_bytes_) {
    total -= items_.front().second.outputs ? items_.front().second.outputs->bytes() : 0;
    items_.pop_front();
  }
}

std::string user_reference_key(const KernelDecl& k, const Params& p, DType d, const Shape& s) {
  Params fixed;
  for (const auto& [name, v] : p.values()) {
    bool tunable = false;
    for (const auto& t : k.space) tunable |= t.name == name;
    if (!tunable) fixed.set(name, v);
  }
  return fmt::format("{}[{}]/{}/{}", k.name, fixed.str(), to_string(d), s.str());
}

Check check_user_outputs(const std::string& key, const Toolchain& tc, const Params& params,
                         const triton::UserKernel& kernel, Executable& exe, OutputReferences& refs) {
  Check c;
  const std::string release = triton_release(tc);
  const auto ref = refs.find(key);
  if (!ref) {  // this build is the case's baseline: its outputs are the reference for the others
    refs.put(key, {exe.snapshot_outputs(), tc.name, release, params.str()});
    c.ok = true;
    c.method = "baseline";
    c.detail = fmt::format("the baseline: {}'s outputs are the reference for the other toolchains", tc.name);
    return c;
  }
  const bool same = !release.empty() && release == ref->release && params.str() == ref->params;
  const OutputCheck oc = exe.compare_outputs(*ref->outputs, [&](const std::string& dtype) {
    return triton::tolerance_for_output(kernel.tolerance, dtype, same);
  });
  const bool bitwise = kernel.tolerance.always_bitwise || (same && kernel.tolerance.by_dtype.empty());
  const std::string who = ref->params == params.str() ? ref->toolchain : fmt::format("{} [{}]", ref->toolchain, ref->params);
  c.method = fmt::format("against {} ({}, on {})", who, bitwise ? "bitwise" : "tolerance", oc.where);
  c.ok = oc.ok();
  for (const auto& [name, d] : oc.outputs) {
    c.checked += d.elements;
    c.max_error = std::max(c.max_error, d.max_abs_error);
    if (!d.mismatches || !c.detail.empty()) continue;
    const triton::OutputTolerance tol = triton::tolerance_for_output(kernel.tolerance, d.dtype, same);
    c.detail = fmt::format("output {} ({}): {} of {} elements differ from {}'s ({}); the first at storage index {}: {} "
                           "against {}", name, d.dtype, d.mismatches, d.elements, who,
                           tol.bitwise ? "bitwise" : fmt::format("beyond atol {:g} + rtol {:g}", tol.atol, tol.rtol),
                           d.first, d.first_got, d.first_ref);
  }
  return c;
}

}  // namespace kb
