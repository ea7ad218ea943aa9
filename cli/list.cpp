// kbisect list: kernels, toolchains found, backends and, when unavailable, why.
#include <iostream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/command.h"
#include "harness/tuned_table.h"

namespace kb::cli {
namespace {

// The tuned entries of this machine for a kernel, from $KBISECT_TUNED_TABLE (none without it).
std::vector<std::string> tuned_lines(const KernelDecl& k) {
  const std::string path = default_tuned_table_path();
  if (path.empty()) return {};
  std::vector<std::string> out;
  const TunedTable table = TunedTable::load(path);
  for (const auto& e : table.entries())
    if (e.backend == k.backend && e.kernel == k.name)
      out.push_back(fmt::format("tuned: {} {} on {} ({}) [{}] {}", to_string(e.dtype), e.shape.str(), e.toolchain,
                                e.machine, e.params.str(), e.method));
  return out;
}

int run_list() {
  std::cout << "backends:\n";
  for (auto* b : backends()) {
    auto av = b->available();
    std::cout << fmt::format("  {:<6} {}\n", b->name(), av.ok ? "available" : "unavailable: " + av.reason);
  }
  std::cout << "kernels:\n";
  for (const auto* k : all_kernels()) {
    std::string ps, ds;
    for (const auto& p : k->params) ps += (ps.empty() ? "" : " ") + p.name + "=" + to_string(p.default_value);
    for (auto d : k->dtypes) ds += (ds.empty() ? "" : ",") + to_string(d);
    std::cout << fmt::format("  {:<5} {:<18} [{}] dtypes={}\n", k->backend, k->name, ps, ds);
    std::cout << fmt::format("        {}\n", k->description);
    for (const auto& line : tuned_lines(*k)) std::cout << "        " << line << "\n";
  }
  std::cout << "toolchains:\n";
  for (const auto& t : preset_toolchains()) {
    std::string flags;
    for (const auto& f : t.flags) flags += (flags.empty() ? "" : " ") + f;
    // A preset that knows its version without running anything says it (Triton: from its dist-info).
    std::cout << fmt::format("  {:<16} {:<5} {:<10} {} {}{}{}\n", t.name, t.backend, t.kind,
                             !t.prebuilt.empty() ? "(prebuilt)" : t.compiler.empty() ? "(in-process)" : t.compiler, flags,
                             t.target.empty() ? "" : " target=" + t.target,
                             t.version_text.empty() ? "" : "  (" + t.version_text + ")");
  }
  return 0;
}

Registrar reg("list", "List kernels, toolchains found on this machine and backends (with why one is unavailable)",
              [](CLI::App*) { return [] { return run_list(); }; });

}  // namespace
}  // namespace kb::cli
