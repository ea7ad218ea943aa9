#include <regex>

#include <gtest/gtest.h>

#include "report/svg.h"
#include "report/table.h"
#include "core/text.h"
#include "tests/common/svg_checks.h"

using namespace kb::report;

TEST(Svg, TicksAreRoundSteps) {
  EXPECT_EQ(svg::nice_ticks(0, 339.26, 6), (std::vector<double>{0, 100, 200, 300, 400}));
  EXPECT_EQ(svg::nice_ticks(0, 10, 6), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(svg::nice_ticks(-3, 12, 5), (std::vector<double>{-5, 0, 5, 10, 15}));
  EXPECT_EQ(svg::tick_label(5, 5, true, "%"), "+5%");
  EXPECT_EQ(svg::tick_label(0, 5, true, "%"), "+0%");
  EXPECT_EQ(svg::tick_label(-10, 5, true, "%"), "-10%");
  EXPECT_EQ(svg::tick_label(0.25, 0.05), "0.25");
}

TEST(Svg, PlotHasRoundTickLabelsAxisLabelsTooltipsAndEscapes) {
  svg::Plot p;
  p.aria_label = "a<b";
  p.y.label = "change & more";
  p.y.sign = true;
  p.y.suffix = "%";
  p.x.label = "commit";
  svg::Series s{"A/B \"x\""};
  s.points = {{0, 0.0}, {1, 3.1}, {2, 7.4}, {3, 11.2}};
  s.titles = {"p0", "p1", "<p2>", "p3"};
  p.series = {s};
  p.markers = {{true, 2, "#c00", "first bad"}};
  std::string o = svg::render(p);
  EXPECT_NE(o.find("<svg"), std::string::npos);
  EXPECT_NE(o.find("<polyline"), std::string::npos);
  EXPECT_NE(o.find(">+0%</text>"), std::string::npos) << o;
  EXPECT_NE(o.find(">+5%</text>"), std::string::npos) << o;
  EXPECT_NE(o.find(">+10%</text>"), std::string::npos) << o;
  EXPECT_EQ(o.find("+11.2"), std::string::npos);
  std::smatch m;
  std::string rest = o;
  static const std::regex tick(R"(>([+-]?[0-9.]+)%</text>)");
  while (std::regex_search(rest, m, tick)) {
    double v = std::stod(m[1].str());
    EXPECT_DOUBLE_EQ(v, double(long(v / 5)) * 5) << m[1];
    rest = m.suffix();
  }
  EXPECT_NE(o.find("change &amp; more"), std::string::npos);
  EXPECT_NE(o.find("aria-label=\"a&lt;b\""), std::string::npos);
  EXPECT_NE(o.find("<title>&lt;p2&gt;</title>"), std::string::npos);
  EXPECT_NE(o.find("<title>first bad</title>"), std::string::npos);
  EXPECT_NE(o.find("A/B &quot;x&quot;"), std::string::npos);
  EXPECT_EQ(o.find("<script"), std::string::npos);
}

TEST(Svg, YAxisLabelLeftOfTickLabels) {
  svg::Plot p;
  p.y.label = "ms";
  svg::Series s;
  s.points = {{0, 12345.0}, {1, 99999.0}};
  p.series = {s};
  std::string o = svg::render(p);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o, m, std::regex(R"re(<text x="([0-9.]+)"[^>]*text-anchor="middle" transform="rotate)re")));
  double label_x = std::stod(m[1].str());
  ASSERT_TRUE(std::regex_search(o, m, std::regex(R"re(<text x="([0-9.]+)"[^>]*text-anchor="end">100000<)re")));
  double tick_right = std::stod(m[1].str());
  EXPECT_LT(label_x + 3, tick_right - 6 * 6.6);  // the rotated label (baseline at x) ends left of the widest tick
}

// Seen in Chromium (scripts/render-reports): the last date of a nightly trend was cut off at the picture's
// right border, and a culprit marker's text at the last commit ran past it.
TEST(Svg, EdgeLabelsAndMarkerTextsStayInsideThePicture) {
  svg::Plot p;
  p.width = 640;
  p.x.label = "night";
  svg::Series s;
  for (int i = 0; i < 6; ++i) {
    s.points.push_back({double(i), i < 5 ? 1.0 : 3.0});
    p.x_labels.push_back({double(i), "2026-01-0" + std::to_string(i + 1)});
  }
  p.series = {s};
  p.markers = {svg::vertical_marker(4.5, "#c33", "culprit", "culprit 0123456789ab")};
  const std::string o = svg::render(p);
  std::smatch m;
  std::string rest = o;
  int dates = 0;
  static const std::regex date(R"re(<text x="([0-9.]+)"[^>]*font-size="10" text-anchor="middle">(2026-[0-9-]+)<)re");
  for (; std::regex_search(rest, m, date); rest = m.suffix(), ++dates) {
    const double x = std::stod(m[1].str()), half = 6.0 * double(m[2].length()) / 2;  // 10 px text
    EXPECT_GE(x - half, 0) << m[2];
    EXPECT_LE(x + half, p.width) << m[2];
  }
  EXPECT_EQ(dates, 6) << o;
  ASSERT_TRUE(std::regex_search(o, m, std::regex(R"re(<text x="([0-9.]+)"[^>]*>culprit 0123456789ab<)re"))) << o;
  EXPECT_GE(std::stod(m[1].str()), 0);
  EXPECT_LE(std::stod(m[1].str()) + 6.6 * 20, p.width) << o;
}

TEST(Table, AlignmentHeaderSeparator) {
  TextTable t({{"name"}, {"n", true}, {"note"}}, "  ");
  t.add_row({"a", "1", "x"});
  t.add_row({"bbb", "100", "yy"});
  EXPECT_EQ(t.render('-'), "  name   n note\n  ---- --- ----\n  a      1 x\n  bbb  100 yy\n");
  TextTable fixed({{"k", false, 5}, {"v", true, 4, 0, 2}});
  fixed.add_row({"ab", "7"});
  EXPECT_EQ(fixed.render(), "k         v\nab        7\n");
}

TEST(Table, Utf8WidthAndTruncation) {
  EXPECT_EQ(text_width("héllo"), 5u);
  EXPECT_EQ(text_width("日本語"), 3u);
  EXPECT_EQ(truncate_text("short", 10), "short");
  EXPECT_EQ(truncate_text("ééééééé", 6), "ééé...");
  EXPECT_EQ(truncate_text("abcdefgh", 6), "abc...");
  TextTable t({{"s", false, 0, 6}, {"x"}});
  t.add_row({"ünïcödé text", "1"});
  t.add_row({"äb", "2"});
  EXPECT_EQ(t.render(), "s      x\nünï... 1\näb     2\n");
}

TEST(Text, Utf8OrLatin1KeepsUtf8AndReadsStrayBytesAsLatin1) {
  size_t bad = 9;
  EXPECT_EQ(kb::utf8_or_latin1("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80", &bad), "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(kb::utf8_or_latin1("na\xefve caf\xe9", &bad), "na\xc3\xafve caf\xc3\xa9");
  EXPECT_EQ(bad, 2u);
  // Mixed: the valid sequence stays, the stray byte is converted; a truncated sequence at the end too.
  EXPECT_EQ(kb::utf8_or_latin1("\xc3\xa9\xe9\xc3", &bad), "\xc3\xa9\xc3\xa9\xc3\x83");
  EXPECT_EQ(bad, 2u);
  // Overlong encodings and UTF-16 surrogates are not well-formed UTF-8.
  EXPECT_EQ(kb::utf8_or_latin1("\xc0\xaf", &bad), "\xc3\x80\xc2\xaf");
  EXPECT_EQ(bad, 2u);
  kb::utf8_or_latin1("\xed\xa0\x80", &bad);
  EXPECT_EQ(bad, 3u);
  // Beyond U+10FFFF.
  kb::utf8_or_latin1("\xf4\x90\x80\x80", &bad);
  EXPECT_EQ(bad, 4u);
}

// The plot checks the report tests use reject what the old plots drew, and accept report/svg's ticks.
TEST(SvgChecks, RejectUnroundTicksAndAcceptNiceTicks) {
  EXPECT_FALSE(kbtest::round_ticks({"+339.26%", "+82.0%", "-175.39%"}));
  EXPECT_FALSE(kbtest::round_ticks({"0", "3", "6"}));
  EXPECT_FALSE(kbtest::round_ticks({"0.1", "0.3", "0.5"}));  // step 0.2, but 0.1 is no multiple of it
  std::vector<std::string> labels;
  const auto t = kb::report::svg::nice_ticks(-175.39, 339.26);
  for (double v : t) labels.push_back(kb::report::svg::tick_label(v, t[1] - t[0], true, "%"));
  EXPECT_TRUE(kbtest::round_ticks(labels)) << labels.front() << " .. " << labels.back();
  EXPECT_EQ(kbtest::tooltips_with("<circle><title>abc123 fix</title></circle><title>x</title>", "abc123"), 1u);
}
