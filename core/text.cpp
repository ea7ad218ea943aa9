#include "core/text.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace kb {

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') {
      o += ' ';
      continue;
    }
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' || c == '[' || c == ']') o += '\\';
    o += c;
  }
  return o;
}

std::string utc_time(int64_t t, const char* format) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

YAML::Node yaml_load(const std::string& text, const std::string& origin) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

std::string YamlCtx::at(const YAML::Node& n) const {
  const auto& m = n.Mark();
  if (m.line < 0) return origin;
  return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
}

void YamlCtx::fail(const YAML::Node& n, const std::string& msg) const { throw InputError(at(n) + ": " + msg); }

void check_yaml_keys(const YamlCtx& cx, const YAML::Node& n, const std::string& what,
                     const std::vector<std::string>& known) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string ks;
      for (const auto& s : known) ks += (ks.empty() ? "" : ", ") + s;
      cx.fail(it->first, fmt::format("unknown field '{}' in {} (known: {})", k, what, ks));
    }
  }
}

std::string yaml_scalar(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) cx.fail(n, fmt::format("'{}' must be a scalar", field));
  return n.Scalar();
}

double yaml_number(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  const std::string s = yaml_scalar(cx, n, field);
  try {
    size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  cx.fail(n, fmt::format("'{}' = '{}' is not a number", field, s));
}

}  // namespace kb
