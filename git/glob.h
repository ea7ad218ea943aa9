// Path globs for configuration files (risky paths in `kbisect upstream`, and any other place that
// selects repository paths).
//
// Semantics: fnmatch(3) with FNM_PATHNAME on each '/'-separated segment — '*' and '?' and '[...]'
// never match '/' — plus '**':
//   - a segment that is exactly "**" matches zero or more whole segments:
//       "lib/Target/**"  matches lib/Target/X86/isel.cpp and lib/Target (nothing below is required)
//       "**/codegen/**"  matches codegen/a.c and src/x/codegen/b.c
//       "**/*.td"        matches any .td file at any depth; "*.td" only at the top level
//   - '**' inside a segment ("foo**") behaves like '*'.
// A leading "/" is ignored (paths are relative to the repository root) and a trailing "/" means
// "this directory and everything below it" ("lib/Target/" == "lib/Target/**").
#pragma once
#include <string>

namespace kb {

bool glob_match(const std::string& pattern, const std::string& path);

}  // namespace kb
