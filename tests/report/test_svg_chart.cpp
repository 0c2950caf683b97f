#include "platform/report/svg_chart.hpp"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kagent::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgChart, NiceTicksCoverTheRangeWithRoundSteps) {
  EXPECT_EQ(nice_ticks(2.1, 5), (std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5}));
  EXPECT_EQ(nice_ticks(100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0, 5), (std::vector<double>{0, 1}));
  EXPECT_EQ(nice_ticks(std::numeric_limits<double>::infinity(), 5), (std::vector<double>{0, 1}));
}

TEST(SvgChart, EmptyChartStillHasItsFrameAndSaysSo) {
  step_chart c;
  c.title = "Best <time>";
  const auto svg = render_svg(c);
  EXPECT_EQ(svg.rfind("<svg class=\"chart\"", 0), 0u);
  EXPECT_THAT(svg, HasSubstr("no candidates"));
  EXPECT_THAT(svg, HasSubstr("Best &lt;time&gt;"));
  EXPECT_THAT(svg, Not(HasSubstr("class=\"best\"")));
  EXPECT_THAT(svg, Not(HasSubstr("http")));  // no xmlns URL either: inline SVG in HTML needs none
}

TEST(SvgChart, MarkersStepLineAndReference) {
  step_chart c;
  c.best = {{0, 2.0}, {1, 1.5}, {3, 1.0}};
  c.reference_y = 2.0;
  c.markers = {{1, 1.5, false, "a"}, {2, std::nullopt, true, "b <failed>"}, {3, 1.0, false, "c"},
               {4, 50.0, false, "far slower"}, {5, std::numeric_limits<double>::quiet_NaN(), false, "no time"}};
  const auto svg = render_svg(c);
  EXPECT_EQ(count(svg, "<circle class=\"point\""), 2u);
  EXPECT_EQ(count(svg, "<path class=\"fail\""), 2u);  // the failed one and the one without a finite time
  EXPECT_EQ(count(svg, "class=\"point clipped\""), 1u);  // 50 ms is past twice the start: drawn on the top edge
  EXPECT_THAT(svg, HasSubstr("<title>b &lt;failed&gt;</title>"));
  EXPECT_THAT(svg, HasSubstr("<path class=\"best\" d=\"M"));
  EXPECT_THAT(svg, HasSubstr("class=\"reference\""));
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
}

TEST(SvgChart, SecondsAxisSwitchesToClockTicksOnLongRuns) {
  step_chart c;
  c.x_label = "wall-clock time";
  c.x_is_seconds = true;
  c.markers = {{30, 1.0, false, "a"}};
  auto svg = render_svg(c);
  EXPECT_THAT(svg, HasSubstr("wall-clock time (s)"));
  c.markers = {{1500, 1.0, false, "a"}};
  svg = render_svg(c);
  EXPECT_THAT(svg, HasSubstr("wall-clock time (mm:ss)"));
  EXPECT_THAT(svg, HasSubstr(">05:00<"));
  EXPECT_THAT(svg, HasSubstr(">25:00<"));
}

TEST(SvgChart, CountAxesTickAtWholeNumbers) {
  step_chart c;
  c.x_integer = true;
  c.markers = {{1, 1.0, false, "only"}};
  const auto svg = render_svg(c);
  EXPECT_THAT(svg, HasSubstr("text-anchor=\"middle\">1</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">0.2<")));
}

} // namespace
} // namespace kagent::report
