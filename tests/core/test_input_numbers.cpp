// Numbers and patterns read from files a user or another tool wrote: out-of-range digits, huge JSON
// numbers and regex repeat counts are InputErrors (or std::regex_error) naming the place, never a
// std::out_of_range, a silent truncation or undefined behaviour (each case below was found by a fuzzer).
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "core/text.h"

using namespace kb;
using nlohmann::json;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::regex_error& e) {
    return std::string("regex_error: ") + e.what();
  }
  return "";
}

}  // namespace

TEST(InputNumbers, DecimalDigitsInAndOutOfRange) {
  EXPECT_EQ(decimal_int64("0", "x"), 0);
  EXPECT_EQ(decimal_int64("9223372036854775807", "x"), INT64_MAX);
  const std::string e = error_of([] { decimal_int64("9223372036854775808", "ptxas log: registers"); });
  EXPECT_NE(e.find("ptxas log: registers: '9223372036854775808' is out of range"), std::string::npos) << e;
  EXPECT_NE(error_of([] { decimal_int64("12a", "x"); }).find("not a decimal number"), std::string::npos);
  EXPECT_NE(error_of([] { decimal_int64("", "x"); }).find("not a decimal number"), std::string::npos);
}

TEST(InputNumbers, RegexRepeatCountsAndBackReferencesAreBounded) {
  // What libstdc++ would overflow on (signed int arithmetic while reading the number) or expand into
  // a state per repeat.
  for (const char* bad : {"\\99999999999999999999", "a{99999999999}", "a{5000}", "a{2,5000}", "(x)\\1001"}) {
    const std::string e = error_of([&] { (void)checked_regex(bad); });
    EXPECT_NE(e.find("regex_error: "), std::string::npos) << bad;
    EXPECT_NE(e.find("is above 1000"), std::string::npos) << bad << ": " << e;
  }
  // Ordinary patterns, an escaped backslash before digits and a literal brace still compile and match.
  EXPECT_TRUE(std::regex_search("time: 12.5 ms", checked_regex(R"(time: ([0-9.]+) ms)")));
  EXPECT_TRUE(std::regex_search("aaa", checked_regex("a{2,1000}")));
  EXPECT_TRUE(std::regex_search("xx", checked_regex(R"((x)\1)")));
  EXPECT_TRUE(std::regex_search("\\12345678901", checked_regex(R"(\\12345678901)")));
  EXPECT_TRUE(std::regex_search("{x}", checked_regex(R"(\{x\})")));
  // A syntax error is still std::regex's own.
  EXPECT_THROW((void)checked_regex("(a"), std::regex_error);
}

TEST(InputNumbers, JsonIntegersAreCheckedNotConverted) {
  EXPECT_EQ(json_int<int64_t>(json(96), "BM"), 96);
  EXPECT_EQ(json_int<int64_t>(json::parse("96.0"), "BM"), 96);
  EXPECT_EQ(json_int<size_t>(json(uint64_t(1) << 63), "n"), size_t(1) << 63);
  std::string e = error_of([] { json_int<int64_t>(json::parse("2.5e20"), "case shape: field 'N'"); });
  EXPECT_NE(e.find("case shape: field 'N' = 2.5e+20 is out of range"), std::string::npos) << e;
  e = error_of([] { json_int<int>(json(int64_t(3000000000)), "index"); });
  EXPECT_NE(e.find("index = 3000000000 is out of range"), std::string::npos) << e;
  EXPECT_NE(error_of([] { json_int<int>(json(1.5), "batch"); }).find("batch = 1.5 is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { json_int<int>(json("4"), "batch"); }).find("is not an integer"), std::string::npos);
  EXPECT_NE(error_of([] { json_int<size_t>(json(-1), "total"); }).find("out of range"), std::string::npos);
  const json cond = {{"batch", 4}};
  EXPECT_EQ(json_int_or<int>(cond, "batch", 1, "conditions"), 4);
  EXPECT_EQ(json_int_or<int>(cond, "max_samples", 7, "conditions"), 7);
  EXPECT_NE(error_of([] { json_int_or<int>(json{{"batch", 1e10}}, "batch", 1, "conditions"); })
                .find("conditions.batch = 10000000000.0 is out of range"),
            std::string::npos);
}
