// Typed parameter values (backends/kernel.h): every kind a Triton constexpr can have is read, printed, written
// to JSON and read back with its kind and its exact value; what cannot be carried exactly is refused.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/kernel.h"
#include "backends/param_yaml.h"
#include "core/error.h"

namespace kb {
namespace {

TEST(ParamValues, ReadEveryKindWithItsType) {
  EXPECT_EQ(parse_param_value("64"), ParamValue(int64_t(64)));
  EXPECT_EQ(parse_param_value("-9223372036854775808"), ParamValue(INT64_MIN));
  EXPECT_EQ(parse_param_value("0x10"), ParamValue(int64_t(16)));
  EXPECT_EQ(parse_param_value("010"), ParamValue(int64_t(10)));  // decimal, never octal
  EXPECT_EQ(parse_param_value("1.0"), ParamValue(1.0));
  EXPECT_TRUE(std::holds_alternative<double>(parse_param_value("1.0")));
  EXPECT_EQ(parse_param_value("True"), ParamValue(true));
  EXPECT_EQ(parse_param_value("false"), ParamValue(false));
  EXPECT_EQ(parse_param_value("None"), ParamValue(NoneValue{}));
  EXPECT_EQ(parse_param_value("null"), ParamValue(NoneValue{}));
  EXPECT_EQ(parse_param_value("tl.float16"), ParamValue(DtypeValue{"float16"}));
  EXPECT_EQ(parse_param_value("leaky_relu"), ParamValue(std::string("leaky_relu")));
  EXPECT_EQ(parse_param_value("\"1\""), ParamValue(std::string("1")));
  EXPECT_EQ(parse_param_value("'None'"), ParamValue(std::string("None")));
}

// 0.01 is Python's 0.01 bit for bit: the nearest double, not a float, not a rounded print.
TEST(ParamValues, FloatsAreTheSameDoubleAsPythons) {
  const double want = 0.01;
  const ParamValue v = parse_param_value("0.01");
  ASSERT_TRUE(std::holds_alternative<double>(v));
  EXPECT_EQ(std::memcmp(&std::get<double>(v), &want, sizeof want), 0);
  for (const char* text : {"0.01", "1.0", "1e-05", "0.1", "123456.789", "-0.0", "1e+16", "2.5e-308", "inf", "-inf", "nan"}) {
    const ParamValue a = parse_param_value(text);
    ASSERT_TRUE(std::holds_alternative<double>(a)) << text;
    const ParamValue b = parse_param_value(to_string(a));
    ASSERT_TRUE(std::holds_alternative<double>(b)) << text << " -> " << to_string(a);
    const double x = std::get<double>(a), y = std::get<double>(b);
    EXPECT_TRUE(std::isnan(x) ? std::isnan(y) : std::memcmp(&x, &y, sizeof x) == 0) << text << " -> " << to_string(a);
  }
  EXPECT_EQ(to_string(parse_param_value("1.0")), "1.0");  // never "1", which would read back as an int
  EXPECT_EQ(to_string(parse_param_value("0.01")), "0.01");
}

TEST(ParamValues, RefusesWhatCannotBeCarriedExactly) {
  for (const char* text : {"9223372036854775808", "-9223372036854775809", "18446744073709551615", "1e400", "1e-400"}) {
    try {
      parse_param_value(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

// Printed text reads back to the same value and kind: a string that spells another kind is quoted.
TEST(ParamValues, TextRoundTripsEveryKind) {
  const std::vector<ParamValue> values = {int64_t(-1099511627773), 0.01, true, NoneValue{}, DtypeValue{"bfloat16"},
                                          std::string("leaky_relu"), std::string("1"), std::string("None"),
                                          std::string("a,b=c"), std::string("tl.float16"), std::string("say \"hi\"")};
  for (const auto& v : values) {
    const std::string text = to_string(v);
    EXPECT_EQ(parse_param_value(text), v) << text;
  }
  EXPECT_EQ(to_string(ParamValue(std::string("1"))), "\"1\"");
  EXPECT_EQ(to_string(ParamValue(std::string("leaky_relu"))), "leaky_relu");
  EXPECT_EQ(value_kind(ParamValue(DtypeValue{"float16"})), "dtype");
}

TEST(ParamValues, JsonKeepsTheKind) {
  Params p{{"I", int64_t(-3)}, {"F", 1.0}, {"S", std::string("leaky_relu")}, {"B", false}, {"N", NoneValue{}},
           {"D", DtypeValue{"float16"}}, {"INF", HUGE_VAL}, {"NUM", std::string("1")}};
  const nlohmann::json j = params_to_json(p);
  EXPECT_EQ(j.dump(), R"({"B":false,"D":{"dtype":"float16"},"F":1.0,"I":-3,"INF":{"float":"inf"},"N":null,"NUM":"1","S":"leaky_relu"})");
  EXPECT_EQ(params_from_json(nlohmann::json::parse(j.dump())), p);
  EXPECT_THROW(params_from_json(nlohmann::json::parse(R"({"X": [1]})")), InputError);
}

TEST(ParamValues, YamlQuotedScalarsAreStrings) {
  const YAML::Node n = YAML::Load("{a: 1, b: '1', c: \"None\", d: None, e: 0.01, f: tl.float16, g: [1], h: 99999999999999999999}");
  YamlCtx cx{"t.yaml"};
  EXPECT_EQ(yaml_param_value(cx, n["a"], "a"), ParamValue(int64_t(1)));
  EXPECT_EQ(yaml_param_value(cx, n["b"], "b"), ParamValue(std::string("1")));
  EXPECT_EQ(yaml_param_value(cx, n["c"], "c"), ParamValue(std::string("None")));
  EXPECT_EQ(yaml_param_value(cx, n["d"], "d"), ParamValue(NoneValue{}));
  EXPECT_EQ(yaml_param_value(cx, n["e"], "e"), ParamValue(0.01));
  EXPECT_EQ(yaml_param_value(cx, n["f"], "f"), ParamValue(DtypeValue{"float16"}));
  EXPECT_THROW(yaml_param_value(cx, n["g"], "g"), InputError);
  try {
    yaml_param_value(cx, n["h"], "constexprs.h");
    ADD_FAILURE() << "a 20-digit integer was accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("t.yaml:1:"), std::string::npos) << m;  // file:line:column
    EXPECT_NE(m.find("constexprs.h"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kb
