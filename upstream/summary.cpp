// What the text and HTML reports show first: one line per plan step and the top risks.
#include <fmt/format.h>

#include "report/table.h"
#include "upstream/internal.h"

namespace kb::upstream::detail {

using git::short_sha;

std::vector<std::string> plan_overview(const Report& r, size_t max_steps) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r.plan.size() && i < max_steps; ++i) {
    const auto& st = r.plan[i];
    std::string line = fmt::format("{}. {} of {} commit{}{}", i + 1, st.kind, st.commits.size(),
                                   st.commits.size() == 1 ? "" : "s", st.risky ? ", risky" : "");
    if (st.kind != "bundle") line += " from " + short_sha(r.pending[st.commits.front()].commit.sha);
    out.push_back(std::move(line));
  }
  if (r.plan.size() > max_steps) out.push_back(fmt::format("... and {} more steps", r.plan.size() - max_steps));
  return out;
}

std::vector<std::string> top_risks(const Report& r, size_t max) {
  std::vector<std::string> out;
  size_t risky = 0;
  for (const auto& p : r.pending) {
    if (p.risks.empty()) continue;
    if (++risky <= max)
      out.push_back(fmt::format("{} (step {}) {}: {}", short_sha(p.commit.sha), p.step,
                                report::truncate_text(p.commit.subject, 50),
                                report::truncate_text(join(p.risks, "; "), kReasonChars)));
  }
  if (risky > max) out.push_back(fmt::format("... and {} more risky commits", risky - max));
  return out;
}

}  // namespace kb::upstream::detail
