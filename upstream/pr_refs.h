// Upstream PR numbers named by upstream and fork commits (upstream/pr_refs.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "upstream/upstream.h"

namespace kb::upstream::detail {

// The upstream PR numbers one fork commit carries.
struct ForkRefs {
  bool bundle = false;                   // a picked heading, or several upstream numbers in the subject
  std::vector<int> prs;                  // carried upstream PR numbers (skipped sections removed)
  std::vector<int> skipped;              // named under a skip heading (not carried)
  std::vector<std::string> picked_shas;  // sha prefixes listed in picked sections
};
ForkRefs fork_refs(const Config& cfg, const std::string& subject, const std::string& message);

// The trailing "(#N)" of an upstream subject when N lies in the upstream PR number space.
std::optional<int> upstream_pr(const Config& cfg, const std::string& subject);

// The upstream PR numbers a GitHub revert body names ("Reverts owner/name#N").
std::vector<int> revert_targets(const Config& cfg, const std::string& message);

}  // namespace kb::upstream::detail
