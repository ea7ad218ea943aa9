// The terminal table and Markdown forms of an upstream report.
#include <fmt/format.h>

#include "core/text.h"
#include "report/table.h"
#include "upstream/internal.h"

namespace kb::upstream {

using namespace detail;
using git::short_sha;
using report::truncate_text;

namespace {

std::string plan_table(const Report& r) {
  report::TextTable t({{"step", true, 4, 0, 0}, {"kind", false, 6, 0, 2}, {"risk", false, 5}, {"commit", false, 10},
                       {"date", false, 17}, {"subject", false, 44, 44}, {"reasons"}},
                      "  ");
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    for (size_t n = 0; n < st.commits.size() && n < kDetailRowsPerStep; ++n) {
      const auto& p = r.pending[st.commits[n]];
      bool first = n == 0;
      t.add_row({first ? std::to_string(i + 1) : "", first ? st.kind : "", first ? (st.risky ? "yes" : "no") : "",
                 short_sha(p.commit.sha), format_time(p.commit.commit_time).substr(0, 16), p.commit.subject,
                 truncate_text(join(commit_reasons(r, st.commits[n]), "; "), kReasonChars)});
    }
    if (st.commits.size() > kDetailRowsPerStep)
      t.add_row({"", "", "", "", "", fmt::format("... and {} more (complete in the JSON)",
                                                 st.commits.size() - kDetailRowsPerStep), ""});
  }
  return t.render();
}

std::string history_table(const Report& r) {
  report::TextTable t({{"as of", false, 20}, {"fork", false, 10}, {"upstream", false, 10}, {"days_behind", true, 11},
                       {"backlog", true, 8}, {"pending", true, 8}},
                      "  ");
  for (const auto& h : r.history)
    t.add_row({format_time(h.as_of), short_sha(h.fork_sha), short_sha(h.upstream_sha),
               fmt::format("{:.2f}", h.metrics.days_behind), std::to_string(h.metrics.backlog_commits),
               std::to_string(h.metrics.pending_commits)});
  return t.render();
}

}  // namespace

namespace {

// Figures, both integration points, the plan in one line per step and the top risks.
std::string text_summary(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o = "summary\n";
  o += fmt::format("  days behind         {:.2f}   upstream head {} minus integration point {} ({}{})\n", m.days_behind,
                   format_time(m.upstream_head.commit_time), short_sha(m.integration_point.sha),
                   format_time(m.integration_point.commit_time), m.integration_point_is_merge_base ? ", the merge base" : "");
  o += fmt::format("  integration point   {}  {}  (contiguous: everything older integrated or excluded)\n",
                   short_sha(m.integration_point.sha), truncate_text(m.integration_point.subject, 60));
  o += fmt::format("  frontier            {:.2f} days behind", m.days_behind_frontier);
  if (m.newest_integrated)
    o += fmt::format(" the newest integrated commit {} ({})  {}", short_sha(m.newest_integrated->sha),
                     format_time(m.newest_integrated->commit_time), truncate_text(m.newest_integrated->subject, 60));
  o += "\n";
  o += fmt::format("  backlog commits     {}", m.backlog_commits);
  if (m.newest_integrated) o += fmt::format("   missing commits older than newest integrated {}", short_sha(m.newest_integrated->sha));
  o += "\n";
  o += fmt::format("  pending commits     {}   of {} upstream commits the fork lacks by ancestry ({} integrated by "
                   "cherry-pick, {} excluded: won't port / deferred)\n",
                   m.pending_commits, m.upstream_commits, m.integrated_commits, m.excluded_commits);
  if (r.plan.empty()) return o + "  nothing pending: the fork has every upstream commit\n";
  o += fmt::format("  plan                {} step{} (bundles first, then each chain alone)\n", r.plan.size(),
                   r.plan.size() == 1 ? "" : "s");
  for (const auto& l : plan_overview(r, kSummarySteps)) o += "    " + l + "\n";
  auto risks = top_risks(r, kSummaryRisks);
  if (!risks.empty()) o += "  top risks\n";
  for (const auto& l : risks) o += "    " + l + "\n";
  return o;
}

}  // namespace

std::string render_table(const Report& r) {
  std::string o;
  o += fmt::format("kbisect upstream: fork {} ({}) vs upstream {} ({})\n\n", r.fork_ref, short_sha(r.fork_head.sha),
                   r.upstream_ref, short_sha(r.metrics.upstream_head.sha));
  o += text_summary(r);
  o += "\ndetails\n";
  o += fmt::format("  merge base          {} {}  {}\n", short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time),
                   truncate_text(r.merge_base.subject, 60));
  o += fmt::format("  dependencies        {} level\n", r.dependency_level);
  for (const auto& w : r.warnings) o += "  warning: " + w + "\n";
  for (const auto& n : r.notes) o += "  note: " + n + "\n";
  if (!r.plan.empty()) o += "\ningestion plan (bundles first, then each chain alone, in this order):\n" + plan_table(r);
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("\nemergency pick of {} ({}): pick {} commit{} alone, in this order:\n", short_sha(e.target.sha),
                     truncate_text(e.target.subject, 60), e.closure.size(), e.closure.size() == 1 ? "" : "s");
    for (size_t k : e.closure)
      o += fmt::format("  {}  {}\n", short_sha(r.pending[k].commit.sha), truncate_text(r.pending[k].commit.subject, 70));
    for (const auto& x : e.effect) o += "  effect: " + x + "\n";
  }
  if (!r.history.empty())
    o += "\nhistory (one row per week, fork and upstream first-parent lines as of each time):\n" + history_table(r);
  o += "\n" + std::string(kDefinitionDaysBehind) + ".\n" + kDefinitionBacklog + ".\n";
  return o;
}

std::string render_markdown(const Report& r) {
  const Metrics& m = r.metrics;
  std::string o;
  o += fmt::format("# Upstream sync: `{}` vs `{}`\n\n", r.fork_ref, r.upstream_ref);
  o += "| metric | value | detail |\n|---|---:|---|\n";
  o += fmt::format("| days behind | {:.2f} | upstream head `{}` ({}) minus integration point `{}` ({}){} |\n", m.days_behind,
                   short_sha(m.upstream_head.sha), format_time(m.upstream_head.commit_time),
                   short_sha(m.integration_point.sha), format_time(m.integration_point.commit_time),
                   m.integration_point_is_merge_base ? ", the merge base" : "");
  o += fmt::format("| backlog commits | {} | {} |\n", m.backlog_commits,
                   m.newest_integrated ? fmt::format("older than newest integrated `{}`", short_sha(m.newest_integrated->sha))
                                       : std::string("nothing picked ahead"));
  o += fmt::format("| pending commits | {} | of {} upstream commits not in the fork's ancestry |\n", m.pending_commits,
                   m.upstream_commits);
  o += fmt::format("| integrated by cherry-pick | {} | patch-id, -x trailer or author+date+subject |\n", m.integrated_commits);
  o += fmt::format("| merge base | `{}` | {} |\n\n", short_sha(r.merge_base.sha), format_time(r.merge_base.commit_time));
  for (const auto& n : r.notes) o += "> note: " + md_escape(n) + "\n\n";
  o += "## Ingestion plan\n\nBundles first, then each chain alone, in this order.\n\n";
  o += "| step | kind | risky | commit | date | subject | reasons |\n|---:|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < r.plan.size(); ++i) {
    const auto& st = r.plan[i];
    for (size_t k : st.commits) {
      const auto& p = r.pending[k];
      o += fmt::format("| {} | {} | {} | `{}` | {} | {} | {} |\n", i + 1, st.kind, st.risky ? "yes" : "no",
                       short_sha(p.commit.sha), format_time(p.commit.commit_time).substr(0, 10), md_escape(p.commit.subject),
                       md_escape(join(commit_reasons(r, k), "; ")));
    }
  }
  if (r.plan.empty()) o += "| | | | | | nothing pending | |\n";
  if (r.emergency) {
    const auto& e = *r.emergency;
    o += fmt::format("\n## Emergency pick `{}`\n\n{}\n\n", short_sha(e.target.sha), md_escape(e.target.subject));
    for (size_t k : e.closure)
      o += fmt::format("1. `{}` {}\n", short_sha(r.pending[k].commit.sha), md_escape(r.pending[k].commit.subject));
    o += "\n";
    for (const auto& x : e.effect) o += "- " + md_escape(x) + "\n";
  }
  if (!r.history.empty()) {
    o += "\n## History (per week)\n\n| as of | fork | upstream | days behind | backlog | pending |\n|---|---|---|---:|---:|---:|\n";
    for (const auto& h : r.history)
      o += fmt::format("| {} | `{}` | `{}` | {:.2f} | {} | {} |\n", format_time(h.as_of), short_sha(h.fork_sha),
                       short_sha(h.upstream_sha), h.metrics.days_behind, h.metrics.backlog_commits, h.metrics.pending_commits);
  }
  o += "\n## Definitions\n\n";
  for (const char* d : {kDefinitionDaysBehind, kDefinitionBacklog, kDefinitionPending, kDefinitionIntegrated})
    o += "- " + md_escape(d) + ".\n";
  return o;
}

}  // namespace kb::upstream
