// Small text helpers shared by the report printers (HTML, Markdown, CSV) and YAML readers.
#pragma once
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace kb {

std::string html_escape(const std::string& s);  // & < > " '
// Escapes Markdown table/emphasis characters; newlines become spaces (one table cell per line).
std::string md_escape(const std::string& s);
// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF; quotes doubled.
std::string csv_field(const std::string& s);

// `s` as valid UTF-8: well-formed UTF-8 sequences are kept and every other byte is read as Latin-1
// (0xE9 becomes "é"), the usual encoding of old non-UTF-8 commit messages. `*bad` (when given) is set to
// the number of bytes so read; 0 means `s` was valid UTF-8 and is returned unchanged.
std::string utf8_or_latin1(const std::string& s, size_t* bad = nullptr);

// A run of decimal digits (as a regex `\d+` matched it in a tool's output) as a number; InputError
// "<what>: 'digits' is out of range" when it does not fit in int64_t, instead of std::stoll's
// std::out_of_range, which no reader catches.
int64_t decimal_int64(const std::string& digits, const std::string& what);

// A regular expression from the user (a filter, a parse pattern, a config list). std::regex's compiler reads
// a repeat count or a back-reference number into an int without a bound (signed overflow for "\\9999999999"
// or "a{99999999999}") and expands "a{N}" into N states, so a number above 1000 there is refused first, as
// a std::regex_error whose what() says so; callers catch std::regex_error and name their field.
std::regex checked_regex(const std::string& pattern, std::regex::flag_type flags = std::regex::ECMAScript);

// Seconds since the epoch as UTC text, strftime format (e.g. "%Y-%m-%dT%H:%M:%SZ").
std::string utc_time(int64_t t, const char* format);

// Where a YAML node is, for errors: "file:line:col" (file alone when the node has no mark).
struct YamlCtx {
  std::string origin;
  std::string at(const YAML::Node& n) const;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const;  // throws InputError
};
// Parses YAML text; a syntax error is an InputError "origin:line:col: YAML syntax error: ...".
YAML::Node yaml_load(const std::string& text, const std::string& origin);
// A scalar field's text / a finite number; InputError "'field' must be a scalar" / "'field' = 'x' is not a
// number" at the node's file:line:col.
std::string yaml_scalar(const YamlCtx& cx, const YAML::Node& n, const std::string& field);
double yaml_number(const YamlCtx& cx, const YAML::Node& n, const std::string& field);
// Throws InputError naming the first key of mapping `n` that is not in `known`.
void check_yaml_keys(const YamlCtx& cx, const YAML::Node& n, const std::string& what,
                     const std::vector<std::string>& known);

}  // namespace kb
