#include "bench/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace reprise::bench {

std::string BenchCell::ToString() const {
  if (!number_) return text_.empty() ? "-" : text_;
  double value = *number_;
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}f}", value, precision_);
}

nlohmann::json BenchCell::ToJson() const {
  if (number_) {
    if (!std::isfinite(*number_)) return nullptr;
    return *number_;
  }
  if (text_.empty()) return nullptr;
  return text_;
}

BenchTable::BenchTable(std::string title, std::vector<BenchColumn> columns)
    : title_(std::move(title)), columns_(std::move(columns)) {}

void BenchTable::AddRow(std::vector<BenchCell> cells) {
  REPRISE_CHECK(cells.size() == columns_.size(), "table '{}' has {} columns, row has {} cells",
                title_, columns_.size(), cells.size());
  rows_.push_back(std::move(cells));
}

namespace {

// Display width of UTF-8 text: code points, not bytes (enough for the names we print).
size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

std::string Pad(const std::string& text, size_t width, bool right_align) {
  size_t fill = width > DisplayWidth(text) ? width - DisplayWidth(text) : 0;
  return right_align ? std::string(fill, ' ') + text : text + std::string(fill, ' ');
}

}  // namespace

std::string BenchTable::ToText() const {
  std::vector<std::string> headers;
  std::vector<size_t> widths;
  for (const auto& column : columns_) {
    headers.push_back(column.unit.empty() ? column.name : column.name + " (" + column.unit + ")");
    widths.push_back(DisplayWidth(headers.back()));
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows_) {
    cells.emplace_back();
    for (size_t c = 0; c < row.size(); ++c) {
      cells.back().push_back(row[c].ToString());
      widths[c] = std::max(widths[c], DisplayWidth(cells.back().back()));
    }
  }
  // A column is right-aligned when any of its cells is a number.
  std::vector<bool> numeric(columns_.size(), false);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) numeric[c] = numeric[c] || row[c].is_number();
  }
  std::string out = title_ + "\n";
  auto line = [&](const std::vector<std::string>& texts) {
    std::string text;
    for (size_t c = 0; c < texts.size(); ++c) {
      if (c > 0) text += "  ";
      text += Pad(texts[c], widths[c], numeric[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += "  " + text + "\n";
  };
  line(headers);
  size_t total = 0;
  for (size_t width : widths) total += width;
  total += 2 * (widths.empty() ? 0 : widths.size() - 1);
  out += "  " + std::string(total, '-') + "\n";
  for (const auto& row : cells) line(row);
  return out;
}

nlohmann::json BenchTable::ToJson() const {
  nlohmann::json columns = nlohmann::json::array();
  for (const auto& column : columns_)
    columns.push_back({{"name", column.name}, {"unit", column.unit}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : rows_) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& cell : row) cells.push_back(cell.ToJson());
    rows.push_back(std::move(cells));
  }
  return {{"title", title_}, {"columns", std::move(columns)}, {"rows", std::move(rows)}};
}

}  // namespace reprise::bench
