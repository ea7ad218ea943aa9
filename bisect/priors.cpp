#include "bisect/priors.h"

#include <algorithm>
#include <map>
#include <optional>

#include "git/glob.h"

namespace kb::bisect {

double file_weight(const std::string& path, const Priors& priors) {
  bool matched = false;
  double w = 0;
  for (const auto& [glob, weight] : priors)
    if (glob_match(glob, path)) {
      w = matched ? std::max(w, weight) : weight;
      matched = true;
    }
  return matched ? w : 1.0;
}

double commit_weight(const std::vector<std::string>& files, const Priors& priors) {
  if (files.empty()) return 1.0;
  double w = 0;
  for (const auto& f : files) w = std::max(w, file_weight(f, priors));
  return w;
}

std::vector<std::vector<std::string>> touched_files(const git::Repo& repo, const std::vector<std::string>& shas) {
  std::vector<std::vector<std::string>> out(shas.size());
  if (shas.empty()) return out;
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < shas.size(); ++i) at.emplace(shas[i], i);
  std::string in;
  for (const auto& s : shas) in += s + "\n";
  // -z: NUL-separated, paths unquoted. Each commit's block starts with its sha; a merge (-m) prints one
  // block per parent, the first parent's first: later blocks of the same commit are ignored.
  const std::string text = repo.check({"diff-tree", "--stdin", "-r", "--name-only", "--root", "-m", "-z"}, in);
  std::vector<bool> seen(shas.size(), false);
  std::optional<size_t> cur;
  bool take = false;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find('\0', i);
    if (j == std::string::npos) j = text.size();
    std::string tok = text.substr(i, j - i);
    i = j + 1;
    while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r')) tok.pop_back();
    while (!tok.empty() && tok.front() == '\n') tok.erase(tok.begin());
    if (tok.empty()) continue;
    if (auto it = at.find(tok); it != at.end()) {
      cur = it->second;
      take = !seen[*cur];
      seen[*cur] = true;
      continue;
    }
    if (cur && take) out[*cur].push_back(tok);
  }
  return out;
}

std::vector<double> prior_weights(const git::Repo& repo, const std::vector<std::string>& shas, const Priors& priors) {
  if (priors.empty()) return {};
  auto files = touched_files(repo, shas);
  std::vector<double> w(shas.size(), 1.0);
  for (size_t i = 1; i < shas.size(); ++i) w[i] = commit_weight(files[i], priors);
  return w;
}

}  // namespace kb::bisect
