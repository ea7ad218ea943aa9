#include "git/glob.h"

#include <fnmatch.h>

#include <vector>

namespace kb {

namespace {

std::vector<std::string> segments(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find('/', pos);
    if (e == std::string::npos) e = s.size();
    if (e > pos) out.push_back(s.substr(pos, e - pos));  // empty segments ("a//b") are dropped
    pos = e + 1;
  }
  return out;
}

bool match_from(const std::vector<std::string>& pat, size_t pi, const std::vector<std::string>& path, size_t si) {
  while (pi < pat.size()) {
    if (pat[pi] == "**") {
      // Collapse consecutive "**" and try every number of consumed segments.
      while (pi + 1 < pat.size() && pat[pi + 1] == "**") ++pi;
      if (pi + 1 == pat.size()) return true;
      for (size_t k = si; k <= path.size(); ++k)
        if (match_from(pat, pi + 1, path, k)) return true;
      return false;
    }
    if (si >= path.size()) return false;
    if (fnmatch(pat[pi].c_str(), path[si].c_str(), FNM_PATHNAME) != 0) return false;
    ++pi;
    ++si;
  }
  return si == path.size();
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& path) {
  std::string p = pattern;
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  if (!p.empty() && p.back() == '/') p += "**";
  if (p.empty()) return false;
  return match_from(segments(p), 0, segments(path), 0);
}

}  // namespace kb
