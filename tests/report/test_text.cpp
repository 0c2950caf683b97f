#include "platform/report/text.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace kagent::report {
namespace {

using nlohmann::json;

TEST(ReportText, NumbersThatAreNotFiniteOrMissingReadNa) {
  const json j = {{"a", 1.5}, {"b", nullptr}, {"c", "2"}, {"d", -1}, {"e", std::numeric_limits<double>::infinity()}};
  EXPECT_EQ(finite_number(j, "a"), 1.5);
  EXPECT_FALSE(finite_number(j, "b"));
  EXPECT_FALSE(finite_number(j, "c"));
  EXPECT_FALSE(finite_number(j, "missing"));
  EXPECT_FALSE(finite_number(j, "e"));
  EXPECT_EQ(finite_number(j, "d"), -1.0);
  EXPECT_FALSE(positive_ms(j, "d"));
  EXPECT_FALSE(finite_number(json::array({1}), "a"));
  EXPECT_EQ(format_ms(std::nullopt), "n/a");
  EXPECT_EQ(format_ms(std::numeric_limits<double>::quiet_NaN()), "n/a");
  EXPECT_EQ(format_ms(-1.0), "n/a");
  EXPECT_EQ(format_speedup(2.0, 0.0), "n/a");
  EXPECT_EQ(format_speedup(std::numeric_limits<double>::infinity(), 1.0), "n/a");
  EXPECT_EQ(format_speedup(std::nullopt, 1.0), "n/a");
  EXPECT_EQ(format_usd(std::nullopt), "n/a");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::quiet_NaN()), "n/a");
}

TEST(ReportText, FormatsTimesCountsAndDurations) {
  EXPECT_EQ(format_ms(0.12345), "0.1235 ms");
  EXPECT_EQ(format_ms(1.9002), "1.900 ms");
  EXPECT_EQ(format_ms(1234.56), "1234.6 ms");
  EXPECT_EQ(format_ms(0.0012346), "0.001235 ms");
  EXPECT_EQ(format_speedup(2.0, 1.0), "2.00x");
  EXPECT_EQ(format_count(950), "950");
  EXPECT_EQ(format_count(12345), "12.3k");
  EXPECT_EQ(format_count(2500000), "2.50M");
  EXPECT_EQ(format_usd(0.42), "$0.4200");
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(725.9), "12:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

TEST(ReportText, OneLineFlattensAndCuts) {
  EXPECT_EQ(one_line("a\n  b\tc\r\n", 100), "a b c");
  EXPECT_EQ(one_line("abcdefghij", 6), "abc...");
  // A cut never splits a UTF-8 sequence: "é" is two bytes.
  const auto cut = one_line("aaé" "bbbbbb", 6);
  EXPECT_EQ(cut, "aa...");
}

TEST(ReportText, CutsFallBetweenWordsAndHintsStayWhole) {
  // Between words when one ends near the limit, never inside one.
  EXPECT_EQ(one_line("the kernel reads every element twice", 20), "the kernel reads...");
  const std::string err = "TypeError: only 0-dimensional arrays can be converted to Python scalars " +
                          std::string(200, 'x') +
                          "\nHint: the CPU platform runs Triton's interpreter (TRITON_INTERPRET=1): loop bounds "
                          "must be tl.constexpr, and GPU-only features do not run there";
  const auto b = brief_error(err, 60);
  EXPECT_EQ(b.find("TypeError: only 0-dimensional arrays can be converted to..."), 0u) << b;
  EXPECT_NE(b.find("(hint: the CPU platform runs Triton's interpreter (TRITON_INTERPRET=1): loop bounds must be "
                   "tl.constexpr, and GPU-only features do not run there)"),
            std::string::npos)
      << b;
  EXPECT_EQ(brief_error("no hint here", 60), "no hint here");
}

TEST(ReportText, HtmlEscapeCoversMarkupAndQuotes) {
  EXPECT_EQ(html_escape("if a < b && c > d: s = \"x\" + 'y'"),
            "if a &lt; b &amp;&amp; c &gt; d: s = &quot;x&quot; + &#39;y&#39;");
}

TEST(ReportText, ParsesTheStoreTimestamps) {
  EXPECT_EQ(parse_iso_utc("1970-01-01T00:00:10Z"), 10.0);
  auto t = parse_iso_utc("2026-12-02T12:15:30.250Z");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(*t - *parse_iso_utc("2026-12-02T12:15:00.000Z"), 30.25);
  EXPECT_FALSE(parse_iso_utc("2026-12-02 garbage"));
  EXPECT_FALSE(parse_iso_utc("2026-13-02T12:15:30.250Z"));
  EXPECT_FALSE(parse_iso_utc(""));
}

} // namespace
} // namespace kagent::report
