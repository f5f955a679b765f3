// A table of benchmark results: named columns with units, rows of text or numeric cells. Printed
// aligned for a terminal and written as JSON (numbers stay numbers, empty cells become null).
#pragma once

#include <concepts>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace reprise::bench {

// One cell: text, a number printed with `precision` decimals, or empty ("-", JSON null).
class BenchCell {
 public:
  BenchCell() = default;
  BenchCell(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit on purpose
  BenchCell(const char* text) : text_(text) {}             // NOLINT
  BenchCell(double value, int precision = 1) : number_(value), precision_(precision) {}  // NOLINT
  template <std::integral T>
  BenchCell(T value) : number_(static_cast<double>(value)), precision_(0) {}  // NOLINT

  bool empty() const { return !number_ && text_.empty(); }
  bool is_number() const { return number_.has_value(); }
  std::optional<double> number() const { return number_; }
  // As printed: the text, the number with its precision ("nan" and "inf" spelled so), or "-".
  std::string ToString() const;
  nlohmann::json ToJson() const;

 private:
  std::string text_;
  std::optional<double> number_;
  int precision_ = 1;
};

struct BenchColumn {
  std::string name;  // "TTFT"
  std::string unit;  // "ms" (may be empty)
};

class BenchTable {
 public:
  BenchTable(std::string title, std::vector<BenchColumn> columns);

  // Throws InternalError when the row has not one cell per column.
  void AddRow(std::vector<BenchCell> cells);

  const std::string& title() const { return title_; }
  const std::vector<BenchColumn>& columns() const { return columns_; }
  const std::vector<std::vector<BenchCell>>& rows() const { return rows_; }

  // The title, a header line "name (unit)", a rule, then the rows; numbers right-aligned.
  std::string ToText() const;
  // {"title": ..., "columns": [{"name", "unit"}], "rows": [[cell, ...], ...]}
  nlohmann::json ToJson() const;

 private:
  std::string title_;
  std::vector<BenchColumn> columns_;
  std::vector<std::vector<BenchCell>> rows_;
};

}  // namespace reprise::bench
