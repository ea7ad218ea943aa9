#include "backends/triton/pysource.h"

#include "core/error.h"

namespace kb::triton {
namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Where the parameter list of `def NAME(` starts (after the parenthesis), or npos.
size_t params_start(const std::string& src, const std::string& fn) {
  for (size_t p = src.find("def " + fn); p != std::string::npos; p = src.find("def " + fn, p + 1)) {
    size_t q = p + 4 + fn.size();
    while (q < src.size() && src[q] == ' ') ++q;
    if (q < src.size() && src[q] == '(') return q + 1;
  }
  return std::string::npos;
}

PyParam split_param(const std::string& text) {
  // name[: annotation][= default], with ':' and '=' at the top level only.
  int depth = 0;
  size_t colon = std::string::npos, eq = std::string::npos;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else if (depth == 0 && c == ':' && colon == std::string::npos && eq == std::string::npos) colon = i;
    else if (depth == 0 && c == '=' && eq == std::string::npos) eq = i;
  }
  PyParam p;
  const size_t name_end = std::min(colon, eq);
  p.name = trimmed(text.substr(0, name_end));
  while (!p.name.empty() && p.name[0] == '*') p.name.erase(0, 1);
  if (colon != std::string::npos) p.annotation = trimmed(text.substr(colon + 1, eq == std::string::npos ? std::string::npos : eq - colon - 1));
  if (eq != std::string::npos) p.default_text = trimmed(text.substr(eq + 1));
  return p;
}

}  // namespace

std::vector<PyParam> python_signature(const std::string& src, const std::string& fn) {
  std::vector<PyParam> out;
  const size_t at = params_start(src, fn);
  if (at == std::string::npos) return out;
  int depth = 0;
  char quote = 0;
  std::string cur;
  for (size_t i = at; i < src.size(); ++i) {
    const char c = src[i];
    if (quote) {
      cur += c;
      if (c == '\\' && i + 1 < src.size()) cur += src[++i];
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '#') {  // a comment runs to the end of its line
      while (i < src.size() && src[i] != '\n') ++i;
      continue;
    }
    if (depth == 0 && (c == ',' || c == ')')) {
      if (!trimmed(cur).empty() && trimmed(cur) != "/" && trimmed(cur) != "*") out.push_back(split_param(cur));
      cur.clear();
      if (c == ')') break;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    cur += c;
  }
  return out;
}

std::optional<ParamValue> python_literal(const std::string& raw) {
  std::string t = trimmed(raw);
  if (t.empty()) return std::nullopt;
  if (t.rfind("triton.language.", 0) == 0) t = "tl." + t.substr(16);
  const bool quoted = t.size() >= 2 && (t[0] == '"' || t[0] == '\'') && t.back() == t[0];
  const bool word = t == "True" || t == "False" || t == "None";
  const bool number = t.find_first_not_of("0123456789+-.eExXoObBabcdefABCDF_") == std::string::npos &&
                      t.find_first_of("0123456789") != std::string::npos && t.find('_') == std::string::npos;
  const bool dtype = t.rfind("tl.", 0) == 0 && t.find_first_of("()[] +*") == std::string::npos;
  if (!quoted && !word && !number && !dtype) return std::nullopt;
  try {
    ParamValue v = parse_param_value(t);
    if (number && std::holds_alternative<std::string>(v)) return std::nullopt;
    return v;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace kb::triton
