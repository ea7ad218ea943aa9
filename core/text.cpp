#include "core/text.h"

#include <algorithm>
#include <charconv>
#include <cctype>
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

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates, at most
// U+10FFFF), or 0 when the bytes there are not one.
size_t utf8_sequence(const std::string& s, size_t i) {
  auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  unsigned b0 = at(0);
  if (b0 < 0x80) return 1;
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string utf8_or_latin1(const std::string& s, size_t* bad) {
  size_t n_bad = 0, i = 0;
  std::string o;
  while (i < s.size()) {
    size_t len = utf8_sequence(s, i);
    if (len) {
      o.append(s, i, len);
      i += len;
      continue;
    }
    auto b = static_cast<unsigned char>(s[i++]);
    o += static_cast<char>(0xC0 | (b >> 6));
    o += static_cast<char>(0x80 | (b & 0x3F));
    ++n_bad;
  }
  if (bad) *bad = n_bad;
  return n_bad ? o : s;
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
  if (!n.IsDefined()) return origin;  // a missing key has no position (and its Mark() throws)
  const auto& m = n.Mark();
  if (m.line < 0) return origin;
  return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
}

void YamlCtx::fail(const YAML::Node& n, const std::string& msg) const { throw InputError(at(n) + ": " + msg); }

void check_yaml_keys(const YamlCtx& cx, const YAML::Node& n, const std::string& what,
                     const std::vector<std::string>& known) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = yaml_scalar(cx, it->first, "a key of " + what);
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string ks;
      for (const auto& s : known) ks += (ks.empty() ? "" : ", ") + s;
      cx.fail(it->first, fmt::format("unknown field '{}' in {} (known: {})", k, what, ks));
    }
  }
}

int64_t decimal_int64(const std::string& digits, const std::string& what) {
  int64_t v = 0;
  const char* end = digits.data() + digits.size();
  auto r = std::from_chars(digits.data(), end, v);
  if (r.ec == std::errc::result_out_of_range)
    throw InputError(
        fmt::format("{}: '{}' is out of range", what, digits.size() > 40 ? digits.substr(0, 40) + "..." : digits));
  if (r.ec != std::errc() || r.ptr != end)
    throw InputError(fmt::format("{}: '{}' is not a decimal number", what, digits));
  return v;
}

namespace {

class RegexLimit : public std::regex_error {
 public:
  explicit RegexLimit(std::string why) : std::regex_error(std::regex_constants::error_badbrace), why_(std::move(why)) {}
  const char* what() const noexcept override { return why_.c_str(); }

 private:
  std::string why_;
};

}  // namespace

std::regex checked_regex(const std::string& pattern, std::regex::flag_type flags) {
  constexpr size_t kMaxCount = 1000;
  auto number_at = [&](size_t i, const char* kind) {
    size_t j = i;
    while (j < pattern.size() && j - i < 8 && std::isdigit((unsigned char)pattern[j])) ++j;
    const bool long_run = j < pattern.size() && std::isdigit((unsigned char)pattern[j]);
    if (j > i && (long_run || std::stoul(pattern.substr(i, j - i)) > kMaxCount))
      throw RegexLimit(fmt::format("{} '{}{}' is above {}", kind, pattern.substr(i, j - i), long_run ? "..." : "",
                                   kMaxCount));
    return j;
  };
  // Character classes are not told apart: "[{5000]" is refused too, a false alarm no real pattern raises.
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      if (i + 1 < pattern.size() && std::isdigit((unsigned char)pattern[i + 1]))
        i = number_at(i + 1, "back-reference") - 1;
      else
        ++i;  // an escaped character, an escaped backslash included
    } else if (pattern[i] == '{') {
      const size_t j = number_at(i + 1, "repeat count");
      if (j < pattern.size() && pattern[j] == ',') number_at(j + 1, "repeat count");
    }
  }
  return std::regex(pattern, flags);
}

std::string yaml_scalar(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsDefined()) cx.fail(n, fmt::format("'{}' is missing", field));
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
