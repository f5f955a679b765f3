#include "cli/size_parser.h"

#include <cctype>
#include <cmath>

#include "core/error.h"

namespace reprise::cli {

size_t ParseByteSize(const std::string& text) {
  size_t index = 0;
  double number = 0;
  try {
    number = std::stod(text, &index);
  } catch (const std::exception&) {
    throw Error(fmt::format("'{}' is not a size (try 512MiB or 2GiB)", text));
  }
  std::string unit;
  for (size_t i = index; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(text[i]))));
    }
  }
  double scale = 1;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    scale = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    scale = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else {
    throw Error(fmt::format("'{}' has an unknown size unit '{}'", text, unit));
  }
  if (!(number > 0) || !std::isfinite(number)) throw Error(fmt::format("'{}' is not a positive size", text));
  return static_cast<size_t>(number * scale);
}

}  // namespace reprise::cli
