// Prior weights of commits for the bisection strategy (`priors:` in the bisect config): a commit's weight
// is its prior probability (up to a constant) of being the culprit, from the files it touches.
//
//   file weight   = the largest weight among the globs (git/glob.h) that match the path, or 1 when none
//                   matches;
//   commit weight = the largest file weight over the files it changes against its first parent
//                   (`git diff-tree -r --name-only`), or 1 when it changes no file.
// So `llvm/lib/Target/NVPTX/**: 5` makes a commit touching an NVPTX file 5x as likely as an ordinary
// one, and `**/docs/**: 0.05` makes a commit that touches only documentation 20x less likely; a commit that
// touches docs and any other file keeps that other file's weight.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "git/git.h"

namespace kb::bisect {

using Priors = std::vector<std::pair<std::string, double>>;  // glob -> weight, in config order

double file_weight(const std::string& path, const Priors& priors);
double commit_weight(const std::vector<std::string>& files, const Priors& priors);

// Files each commit changes against its first parent (merges: against the first parent only), in one
// git process; same order as `shas`.
std::vector<std::vector<std::string>> touched_files(const git::Repo& repo, const std::vector<std::string>& shas);

// One weight per commit (walk order; [0], the good endpoint, gets 1). Empty when `priors` is empty.
std::vector<double> prior_weights(const git::Repo& repo, const std::vector<std::string>& shas, const Priors& priors);

}  // namespace kb::bisect
