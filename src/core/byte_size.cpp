#include "core/byte_size.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/text.h"

namespace reprise {

size_t ParseByteSize(const std::string& text) {
  std::string trimmed = TrimAsciiSpace(text);
  size_t split = 0;
  while (split < trimmed.size() &&
         (std::isdigit(static_cast<unsigned char>(trimmed[split])) || trimmed[split] == '.')) {
    ++split;
  }
  std::string number = trimmed.substr(0, split);
  std::string unit = AsciiLower(TrimAsciiSpace(trimmed.substr(split)));
  auto bad = [&]() {
    return Error(
        fmt::format("'{}' is not a memory size (examples: 2GiB, 512MiB, 1.5G, 1000000)", text));
  };
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1) throw bad();
  double multiplier = 0;
  static const std::vector<std::pair<std::string, double>> kUnits = {{"", 1.0},
                                                                     {"b", 1.0},
                                                                     {"k", 1024.0},
                                                                     {"kib", 1024.0},
                                                                     {"kb", 1e3},
                                                                     {"m", 1048576.0},
                                                                     {"mib", 1048576.0},
                                                                     {"mb", 1e6},
                                                                     {"g", 1073741824.0},
                                                                     {"gib", 1073741824.0},
                                                                     {"gb", 1e9},
                                                                     {"t", 1099511627776.0},
                                                                     {"tib", 1099511627776.0},
                                                                     {"tb", 1e12}};
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) multiplier = factor;
  }
  if (multiplier == 0) throw bad();
  double bytes = std::strtod(number.c_str(), nullptr) * multiplier;
  if (!std::isfinite(bytes) || bytes >= 1.8e19) throw bad();
  return static_cast<size_t>(std::llround(bytes));
}

std::string FormatByteSize(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace reprise
