// Hand-written SVG charts for `reprise bench --chart`: grouped bar charts and line charts with
// labelled axes, a value label on every bar and point, a legend and optional reference lines (a
// machine's peak), no library needed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace reprise::bench {

enum class ChartKind { kBar, kLine };

// kAuto: a log axis when every value is positive and they span a factor of 10 or more (a warm
// TTFT beside a cold one would be a sliver on a linear axis), else linear.
enum class ChartScale { kAuto, kLinear, kLog };

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per category; NaN: no value (no bar, a gap in the line)
};

// A dashed horizontal line across the plot, e.g. the measured FMA peak.
struct ChartReference {
  std::string label;
  double value = 0;
};

struct ChartSpec {
  ChartKind kind = ChartKind::kBar;
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;  // x positions, left to right
  std::vector<ChartSeries> series;
  std::vector<ChartReference> references;
  ChartScale scale = ChartScale::kAuto;
};

// A standalone SVG document with one panel per chart, stacked top to bottom.
std::string RenderSvg(const std::vector<ChartSpec>& charts);

// Axis ticks: evenly spaced "nice" values (1, 2, 2.5 or 5 times a power of ten) from at most
// `low` to at least `high`, about `target_count` intervals; {0, 1} when the range is empty.
std::vector<double> NiceTicks(double low, double high, int target_count = 5);

// Log-axis ticks: 1, 2 and 5 times each power of ten (only the powers when the range spans more
// than three decades) from at most `low` to at least `high`; both must be positive.
std::vector<double> LogTicks(double low, double high);

// Whether `chart` is drawn on a log axis (see ChartScale).
bool UsesLogScale(const ChartSpec& chart);

// Text safe inside an SVG element or attribute (&, <, >, " and ' escaped).
std::string XmlEscape(std::string_view text);

}  // namespace reprise::bench
