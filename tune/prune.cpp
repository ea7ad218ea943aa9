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

namespace {
double metric(const std::map<std::string, double>& m, const char* name) {
  auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}
}  // namespace

std::string gpu_static_reason(const std::map<std::string, double>& m, const PruneRule& rule, double best_occupancy) {
  const double spills = metric(m, "spill_stores") + metric(m, "spill_loads");
  if (spills > 0) return fmt::format("static: {} spill stores/loads", spills);
  const double local = std::max(metric(m, "stack_bytes"), metric(m, "scratch_bytes"));
  if (local > 0) return fmt::format("static: {} bytes of local memory", local);
  const double floor = std::min(rule.min_occupancy, rule.occupancy_ratio * best_occupancy);
  if (m.count("occupancy") && metric(m, "occupancy") < floor)
    return fmt::format("static: occupancy {:.2f} below the floor {:.2f} (the lower of {:g} and {:g} x the best "
                       "candidate's {:.2f})",
                       metric(m, "occupancy"), floor, rule.min_occupancy, rule.occupancy_ratio, best_occupancy);
  return "";
}

double gpu_static_score(const std::map<std::string, double>& m) {
  const double occ = m.count("occupancy") ? metric(m, "occupancy") : 0.5;
  const double regs = std::max(metric(m, "registers"), metric(m, "vgprs"));
  return -occ + regs / 1024.0 + (metric(m, "spill_stores") + metric(m, "spill_loads")) / 64.0;
}

}  // namespace kb::tune
