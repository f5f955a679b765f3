// The SVG chart writer: nice axis ticks, escaping, and the elements each chart kind draws.
#include "bench/svg.h"

#include <gtest/gtest.h>

#include <cmath>

namespace reprise::bench {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(BenchSvgTest, NiceTicksCoverTheRangeWithRoundSteps) {
  EXPECT_EQ(NiceTicks(0, 1).size(), 6u);  // 0, 0.2, ..., 1
  std::vector<double> ticks = NiceTicks(0, 455);
  EXPECT_EQ(ticks.front(), 0);
  EXPECT_GE(ticks.back(), 455);
  EXPECT_EQ(ticks[1], 100);
  ticks = NiceTicks(0, 2.3);
  EXPECT_EQ(ticks[1], 0.5);
  EXPECT_GE(ticks.back(), 2.3);
  ticks = NiceTicks(-12, 30);
  EXPECT_LE(ticks.front(), -12);
  EXPECT_GE(ticks.back(), 30);
  EXPECT_EQ(ticks[1] - ticks[0], 10);
}

TEST(BenchSvgTest, NiceTicksOfAnEmptyRange) {
  EXPECT_EQ(NiceTicks(0, 0), (std::vector<double>{0, 1}));
  EXPECT_EQ(NiceTicks(std::nan(""), 5), (std::vector<double>{0, 1}));
  std::vector<double> ticks = NiceTicks(7, 7);
  EXPECT_EQ(ticks.front(), 0);
  EXPECT_GE(ticks.back(), 7);
}

TEST(BenchSvgTest, EscapesMarkup) {
  EXPECT_EQ(XmlEscape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
}

TEST(BenchSvgTest, BarChartDrawsOneBarPerFiniteValueWithLabelsAndLegend) {
  ChartSpec chart;
  chart.kind = ChartKind::kBar;
  chart.title = "prefill <matmul>";
  chart.x_label = "weight type";
  chart.y_label = "GFLOP/s";
  chart.categories = {"f32", "f16", "q8_0"};
  chart.series = {{"512x576x1536", {100, 90, std::nan("")}}, {"512x2048x2048", {110, 95, 80}}};
  chart.references = {{"FMA peak", 300}};
  std::string svg = RenderSvg({chart});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<rect x="), 5u + 2u);  // 5 bars + 2 legend swatches
  EXPECT_NE(svg.find("prefill &lt;matmul&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">weight type<"), std::string::npos);
  EXPECT_NE(svg.find(">GFLOP/s<"), std::string::npos);
  EXPECT_NE(svg.find(">q8_0<"), std::string::npos);
  EXPECT_NE(svg.find(">FMA peak<"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
}

TEST(BenchSvgTest, LineChartBreaksAtMissingValuesAndStacksPanels) {
  ChartSpec line;
  line.kind = ChartKind::kLine;
  line.title = "TTFT per turn";
  line.categories = {"1", "2", "3", "4"};
  line.series = {{"reuse on", {10, 5, std::nan(""), 4}}};
  std::string svg = RenderSvg({line, line});
  EXPECT_EQ(Count(svg, "<polyline"), 4u);  // two pieces per panel
  EXPECT_EQ(Count(svg, "<circle"), 6u);
  EXPECT_NE(svg.find("height=\"760\""), std::string::npos);  // two 380-pixel panels
}

TEST(BenchSvgTest, LogTicksAreOneTwoFiveStepsAroundTheRange) {
  EXPECT_EQ(LogTicks(3, 70), (std::vector<double>{2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(LogTicks(10, 100), (std::vector<double>{10, 20, 50, 100}));
  EXPECT_EQ(LogTicks(0.5, 20000), (std::vector<double>{0.1, 1, 10, 100, 1000, 10000, 100000}));
  EXPECT_EQ(LogTicks(0, 5), (std::vector<double>{1, 10}));  // not positive: a placeholder
}

// The height of the bar whose tooltip is `title` (e.g. "warm: 12").
double BarHeight(const std::string& svg, const std::string& title) {
  size_t at = svg.find("<title>" + title + "</title>");
  if (at == std::string::npos) return -1;
  size_t rect = svg.rfind("<rect", at);
  size_t height = svg.find("height=\"", rect) + 8;
  return std::stod(svg.substr(height, svg.find('"', height) - height));
}

TEST(BenchSvgTest, WideRangesGetALogAxisSoSmallBarsStayVisibleAndLabelled) {
  ChartSpec chart;
  chart.kind = ChartKind::kBar;
  chart.y_label = "TTFT (ms)";
  chart.categories = {"cold", "warm"};
  chart.series = {{"TTFT", {2400, 12}}};
  ASSERT_TRUE(UsesLogScale(chart));
  std::string svg = RenderSvg({chart});
  EXPECT_NE(svg.find(">TTFT (ms) (log scale)<"), std::string::npos);
  // On a linear axis the warm bar would be 12/2400 of the cold one: about 1 pixel.
  EXPECT_GT(BarHeight(svg, "TTFT: 12"), 0.2 * BarHeight(svg, "TTFT: 2400"));
  // Every bar carries its value.
  EXPECT_EQ(Count(svg, "class=\"value\""), 2u);
  EXPECT_NE(svg.find(">2400</text>"), std::string::npos);
  EXPECT_NE(svg.find(">12</text>"), std::string::npos);

  chart.scale = ChartScale::kLinear;
  EXPECT_FALSE(UsesLogScale(chart));
  std::string linear = RenderSvg({chart});
  EXPECT_LT(BarHeight(linear, "TTFT: 12"), 3);
}

TEST(BenchSvgTest, NarrowOrSignedRangesStayLinear) {
  ChartSpec chart;
  chart.categories = {"a", "b"};
  chart.series = {{"s", {50, 90}}};
  EXPECT_FALSE(UsesLogScale(chart));
  chart.series = {{"s", {-5, 900}}};
  EXPECT_FALSE(UsesLogScale(chart));
  chart.series = {{"s", {5, 900}}};
  EXPECT_TRUE(UsesLogScale(chart));
  chart.kind = ChartKind::kLine;
  std::string svg = RenderSvg({chart});
  EXPECT_EQ(Count(svg, "class=\"value\""), 2u);  // points are labelled too
}

}  // namespace
}  // namespace reprise::bench
