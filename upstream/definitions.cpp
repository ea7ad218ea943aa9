// The definitions every upstream output carries, and the small wording helpers the printers share.
#include <fmt/format.h>

#include "core/text.h"
#include "upstream/internal.h"

namespace kb::upstream {

const char* const kDefinitionDaysBehind =
    "days behind = committer date of the upstream head minus committer date of the integration point, "
    "in days of 86400 s (never negative); the integration point is the last upstream commit, in "
    "topological order, that the fork has (or the config excludes) together with all of its ancestors (by ancestry or "
    "cherry-pick), or the merge base when there is none";
const char* const kDefinitionBacklog =
    "backlog = pending upstream commits that are ancestors of the newest integrated upstream commit "
    "(older commits skipped while cherry-picking ahead)";
const char* const kDefinitionPending =
    "pending = non-merge upstream commits that are neither ancestors of the fork nor integrated";
const char* const kDefinitionIntegrated =
    "integrated = an upstream commit that is an ancestor of the fork, or whose change a fork commit "
    "carries, by the first rule that matches: same `git patch-id --stable`; a pick trailer naming it "
    "(\"(cherry picked from commit <sha>)\" or a configured regex); its upstream PR number (#N) named by "
    "the fork commit; a bundle commit listing it as picked (skipped sections excluded); (match_by_author) "
    "the same author, author date and subject, unique on both sides; or, as weaker evidence, most of its "
    "added lines added by fork commits";

std::string format_time(int64_t t) { return utc_time(t, "%Y-%m-%d %H:%M UTC"); }

namespace detail {

using git::short_sha;

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string quote_subject(const std::string& s) { return "\"" + s + "\""; }

CommitRef to_ref(const git::CommitInfo& c) {
  return CommitRef{c.sha, c.subject, c.author_name, c.author_time, c.commit_time};
}

const char* how_name(int how) {
  switch (how) {
    case kByPatchId: return "patch-id";
    case kByTrailer: return "cherry-pick trailer";
    case kByPr: return "PR number";
    case kByBundle: return "bundle";
    case kByAuthor: return "author, author date and subject";
    case kByContent: return "content";
    default: return "not integrated";
  }
}

// One list of reasons per pending commit, for tables.
std::vector<std::string> commit_reasons(const Report& r, size_t k) {
  const auto& p = r.pending[k];
  std::vector<std::string> out;
  for (const auto& d : p.depends_on)
    out.push_back(fmt::format("depends on {}: {}", short_sha(r.pending[d.on].commit.sha), join(d.reasons, "; ")));
  for (const auto& x : p.risks) out.push_back(x);
  for (const auto& x : p.notes) out.push_back(x);
  if (p.step != 0 && r.plan[p.step - 1].kind == "skip") out.push_back(r.plan[p.step - 1].reasons.front());
  if (out.empty()) {
    if (r.plan.empty() || p.step == 0 || r.plan[p.step - 1].kind == "bundle")
      out.push_back("independent, low-risk");
    else if (!p.needed_by.empty())
      out.push_back(fmt::format("needed by {}", short_sha(r.pending[p.needed_by.front()].commit.sha)));
  }
  if (p.backlog) out.push_back("backlog");
  return out;
}

}  // namespace detail
}  // namespace kb::upstream
