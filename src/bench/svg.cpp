#include "bench/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace reprise::bench {

namespace {

constexpr double kWidth = 860;
constexpr double kPanelHeight = 380;
constexpr double kLeft = 80;    // room for the y tick labels and the y label
constexpr double kRight = 190;  // room for the legend
constexpr double kTop = 44;     // room for the title
constexpr double kBottom = 72;  // room for category labels and the x label

constexpr const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                    "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

const char* Colour(size_t index) {
  return kColours[index % (sizeof(kColours) / sizeof(kColours[0]))];
}

std::string FormatTick(double value) {
  if (value == 0) return "0";
  double magnitude = std::fabs(value);
  if (magnitude >= 1e6) return fmt::format("{:.3g}", value);
  if (magnitude >= 100 || value == std::round(value)) return fmt::format("{:.0f}", value);
  if (magnitude >= 1) return fmt::format("{:.2g}", value);
  return fmt::format("{:.3g}", value);
}

// Calls `visit` with every finite value the chart draws (series and references).
template <typename Visit>
void ForEachValue(const ChartSpec& chart, Visit&& visit) {
  for (const auto& series : chart.series) {
    for (double value : series.values) {
      if (std::isfinite(value)) visit(value);
    }
  }
  for (const auto& reference : chart.references) {
    if (std::isfinite(reference.value)) visit(reference.value);
  }
}

// The value printed at a bar's top or above a point, so that small values can be read too.
void ValueLabel(double x, double y, double value, std::string& out) {
  out += fmt::format(
      R"(<text class="value" x="{:.1f}" y="{:.1f}" font-size="9" text-anchor="middle" fill="#333">{}</text>)"
      "\n",
      x, y, FormatTick(value));
}

void RenderPanel(const ChartSpec& chart, double y0, std::string& out) {
  const double plot_left = kLeft;
  const double plot_right = kWidth - kRight;
  const double plot_top = y0 + kTop;
  const double plot_bottom = y0 + kPanelHeight - kBottom;
  double low = 0;
  double high = 0;
  double lowest_positive = std::numeric_limits<double>::infinity();
  ForEachValue(chart, [&](double value) {
    low = std::min(low, value);
    high = std::max(high, value);
    if (value > 0) lowest_positive = std::min(lowest_positive, value);
  });
  const bool log_scale = UsesLogScale(chart);
  // A log axis for bars starts well below the smallest bar, so that it is visibly tall.
  const double log_floor = chart.kind == ChartKind::kBar ? lowest_positive / 3 : lowest_positive;
  std::vector<double> ticks = log_scale ? LogTicks(log_floor, high) : NiceTicks(low, high);
  const double axis_low = ticks.front();
  const double axis_high = ticks.back();
  auto y_of = [&](double value) {
    double share = log_scale ? std::log10(value / axis_low) / std::log10(axis_high / axis_low)
                             : (value - axis_low) / (axis_high - axis_low);
    return plot_bottom - share * (plot_bottom - plot_top);
  };
  // Where bars start: zero, or the bottom of a log axis.
  const double zero_y = log_scale ? plot_bottom : y_of(std::clamp(0.0, axis_low, axis_high));

  out += fmt::format(R"(<text x="{}" y="{}" font-size="16" font-weight="bold">{}</text>)"
                     "\n",
                     plot_left, y0 + 26, XmlEscape(chart.title));
  // Grid lines and y tick labels.
  for (double tick : ticks) {
    double y = y_of(tick);
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)"
                       "\n",
                       plot_left, y, plot_right, y);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="end">{}</text>)"
                       "\n",
                       plot_left - 6, y + 4, FormatTick(tick));
  }
  // Axes.
  out += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333"/>)"
                     "\n",
                     plot_left, plot_top, plot_bottom);
  out += fmt::format(R"(<line x1="{0}" y1="{1:.1f}" x2="{2}" y2="{1:.1f}" stroke="#333"/>)"
                     "\n",
                     plot_left, zero_y, plot_right);
  // Axis labels.
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12" text-anchor="middle">{}</text>)"
                     "\n",
                     (plot_left + plot_right) / 2, plot_bottom + 50, XmlEscape(chart.x_label));
  double y_mid = (plot_top + plot_bottom) / 2;
  out += fmt::format(
      R"svg(<text x="{0}" y="{1:.1f}" font-size="12" text-anchor="middle" transform="rotate(-90 {0} {1:.1f})">{2}</text>)svg"
      "\n",
      22, y_mid, XmlEscape(log_scale ? chart.y_label + " (log scale)" : chart.y_label));

  const size_t categories = std::max<size_t>(1, chart.categories.size());
  const double slot = (plot_right - plot_left) / static_cast<double>(categories);
  for (size_t c = 0; c < chart.categories.size(); ++c) {
    double x = plot_left + slot * (static_cast<double>(c) + 0.5);
    out +=
        fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="middle">{}</text>)"
                    "\n",
                    x, plot_bottom + 18, XmlEscape(chart.categories[c]));
  }
  if (chart.kind == ChartKind::kBar) {
    const size_t n = std::max<size_t>(1, chart.series.size());
    const double bar = slot * 0.8 / static_cast<double>(n);
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const auto& values = chart.series[s].values;
      for (size_t c = 0; c < values.size() && c < categories; ++c) {
        if (!std::isfinite(values[c])) continue;
        double x =
            plot_left + slot * static_cast<double>(c) + slot * 0.1 + bar * static_cast<double>(s);
        double y = y_of(values[c]);
        out += fmt::format(
            R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}: {}</title></rect>)"
            "\n",
            x, std::min(y, zero_y), bar, std::fabs(zero_y - y), Colour(s),
            XmlEscape(chart.series[s].name), FormatTick(values[c]));
        ValueLabel(x + bar / 2, values[c] < 0 ? y + 12 : y - 3, values[c], out);
      }
    }
  } else {
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const auto& values = chart.series[s].values;
      std::string points;
      auto flush = [&] {
        if (!points.empty()) {
          out += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>)"
                             "\n",
                             points, Colour(s));
        }
        points.clear();
      };
      for (size_t c = 0; c < values.size() && c < categories; ++c) {
        if (!std::isfinite(values[c])) {
          flush();
          continue;
        }
        double x = plot_left + slot * (static_cast<double>(c) + 0.5);
        double y = y_of(values[c]);
        points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
        out += fmt::format(
            R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}: {}</title></circle>)"
            "\n",
            x, y, Colour(s), XmlEscape(chart.series[s].name), FormatTick(values[c]));
        ValueLabel(x, y - 7, values[c], out);
      }
      flush();
    }
  }
  for (const auto& reference : chart.references) {
    if (!std::isfinite(reference.value)) continue;
    double y = y_of(reference.value);
    out += fmt::format(
        R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#c00" stroke-dasharray="6 4"/>)"
        "\n",
        plot_left, y, plot_right, y);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" fill="#c00">{}</text>)"
                       "\n",
                       plot_right + 6, y + 4, XmlEscape(reference.label));
  }
  // Legend.
  for (size_t s = 0; s < chart.series.size(); ++s) {
    double y = plot_top + 18.0 * static_cast<double>(s) + 20;
    out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="12" height="12" fill="{}"/>)"
                       "\n",
                       plot_right + 10, y - 10, Colour(s));
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12">{}</text>)"
                       "\n",
                       plot_right + 28, y, XmlEscape(chart.series[s].name));
  }
}

}  // namespace

std::vector<double> NiceTicks(double low, double high, int target_count) {
  if (!std::isfinite(low) || !std::isfinite(high) || high <= low) {
    if (std::isfinite(low) && std::isfinite(high) && high == low && low != 0) {
      return NiceTicks(std::min(0.0, low), std::max(0.0, high), target_count);
    }
    return {0.0, 1.0};
  }
  target_count = std::max(1, target_count);
  double raw = (high - low) / target_count;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power * 10;
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (power * factor >= raw) {
      step = power * factor;
      break;
    }
  }
  double first = std::floor(low / step) * step;
  double last = std::ceil(high / step) * step;
  std::vector<double> ticks;
  for (double tick = first; tick <= last + step * 1e-9; tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  if (ticks.size() < 2) ticks.push_back(first + step);
  return ticks;
}

std::vector<double> LogTicks(double low, double high) {
  if (!(low > 0) || !std::isfinite(low) || !std::isfinite(high) || high < low) return {1, 10};
  const int first = static_cast<int>(std::floor(std::log10(low) + 1e-9));
  const int last = static_cast<int>(std::ceil(std::log10(high) - 1e-9));
  const bool powers_only = last - first > 3;
  std::vector<double> candidates;
  for (int power = first; power <= std::max(last, first + 1); ++power) {
    for (double factor : {1.0, 2.0, 5.0}) {
      if (factor == 1.0 || !powers_only) candidates.push_back(factor * std::pow(10.0, power));
    }
  }
  // From the largest candidate at most `low` to the smallest at least `high`.
  std::vector<double> ticks;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const bool next_still_below =
        i + 1 < candidates.size() && candidates[i + 1] <= low * (1 + 1e-9);
    if (next_still_below) continue;
    ticks.push_back(candidates[i]);
    if (candidates[i] >= high * (1 - 1e-9) && ticks.size() >= 2) break;
  }
  return ticks;
}

bool UsesLogScale(const ChartSpec& chart) {
  if (chart.scale != ChartScale::kAuto) return chart.scale == ChartScale::kLog;
  double lowest = std::numeric_limits<double>::infinity();
  double highest = 0;
  bool positive = true;
  bool any = false;
  ForEachValue(chart, [&](double value) {
    any = true;
    positive = positive && value > 0;
    lowest = std::min(lowest, value);
    highest = std::max(highest, value);
  });
  return any && positive && highest >= 10 * lowest;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderSvg(const std::vector<ChartSpec>& charts) {
  const double height = kPanelHeight * static_cast<double>(std::max<size_t>(1, charts.size()));
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" font-family="sans-serif">)"
      "\n",
      kWidth, height);
  out += fmt::format(R"(<rect width="{}" height="{}" fill="white"/>)"
                     "\n",
                     kWidth, height);
  for (size_t i = 0; i < charts.size(); ++i) {
    RenderPanel(charts[i], kPanelHeight * static_cast<double>(i), out);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace reprise::bench
