#include "tune/prune.h"

#include <algorithm>
#include <limits>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/text.h"

namespace kb::tune {

namespace {

int count_before(const std::string& line, const std::string& what) {
  // "<n> spills", "<n> reloads"; "<n> folded reloads" does not match (a folded reload is a memory operand).
  static const std::regex spill(R"((\d+) spills)"), reload(R"((\d+) reloads)");
  std::smatch m;
  if (std::regex_search(line, m, what == "spills" ? spill : reload))
    return int(std::min<int64_t>(decimal_int64(m[1], "regalloc remark"), std::numeric_limits<int>::max()));
  return 0;
}

}  // namespace

std::optional<LoopSpills> parse_regalloc_remarks(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  LoopSpills s;
  bool any = false, loop_found = false;
  while (std::getline(in, line)) {
    if (line.find("[-Rpass-missed=regalloc]") == std::string::npos) continue;
    any = true;
    const int sp = count_before(line, "spills"), re = count_before(line, "reloads");
    if (line.find("generated in function") != std::string::npos) {
      if (sp + re > s.fn_spills + s.fn_reloads) s.fn_spills = sp, s.fn_reloads = re;
    } else if (!loop_found && sp > 0) {
      s.spills = sp, s.reloads = re, loop_found = true;
    }
  }
  if (!any) return std::nullopt;
  return s;
}

std::vector<std::string> cpu_spill_reasons(const std::vector<std::optional<LoopSpills>>& spills, const PruneRule& rule) {
  int fewest = std::numeric_limits<int>::max();
  for (const auto& s : spills)
    if (s) fewest = std::min(fewest, s->spills + s->reloads);
  std::vector<std::string> out(spills.size());
  if (fewest == std::numeric_limits<int>::max()) return out;
  const double limit = rule.spill_factor * fewest + rule.spill_slack;
  for (size_t i = 0; i < spills.size(); ++i)
    if (spills[i] && spills[i]->spills + spills[i]->reloads > limit)
      out[i] = fmt::format("static: {} spills + {} reloads in the innermost spilling loop (limit {:.0f} = {} x {} + {})",
                           spills[i]->spills, spills[i]->reloads, limit, rule.spill_factor, fewest, rule.spill_slack);
  return out;
}

double spill_bytes(const Metrics& m, bool amd) {
  return amd ? 8 * metric(m, "vgpr_spills") : metric(m, "spill_stores") + metric(m, "spill_loads");
}

// A Triton compile's smem_bytes already holds its dynamic shared memory (the backend adds it, and marks a
// Triton build with num_warps); a CUDA C++ kernel's dynamic shared memory is reported apart.
double block_smem_bytes(const Metrics& m, bool amd) {
  if (amd) return metric(m, "lds_bytes");
  return metric(m, "smem_bytes") + (m.count("num_warps") ? 0 : metric(m, "dynamic_smem_bytes"));
}

std::string gpu_static_reason(const Metrics& m, const PruneRule& rule, const DeviceFacts* d) {
  const bool amd = d ? d->amd : m.count("vgprs") != 0;
  if (d) {
    const int regs = int(amd ? metric(m, "vgprs") + metric(m, "agprs") : metric(m, "registers"));
    auto why = launch_limit_reason(*d, int(metric(m, "threads_per_block")), int64_t(block_smem_bytes(m, amd)), regs);
    if (!why.empty()) return "static: " + why;
  }
  const double spilled = spill_bytes(m, amd);
  if (spilled > rule.max_spill_bytes)
    return fmt::format("static: {:g} B spilled per thread (stores + loads), above the bound {:g} B (--max-spill-bytes)",
                       spilled, rule.max_spill_bytes);
  return "";
}

}  // namespace kb::tune
