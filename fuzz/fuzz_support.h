// Shared by the fuzz targets: quiet logging, the fixture vocabularies, and a reader that splits
// a fuzz input into fields.
#pragma once

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace reprise::fuzz {

// Loaders warn about odd files; thousands of warnings a second would drown libFuzzer's output.
inline void QuietLogging() { spdlog::set_level(spdlog::level::off); }

// A fixture file; the fuzz target stops with a message when the fixtures are absent (they are
// ../shared/fixtures beside the repository, or REPRISE_FIXTURES_DIR at configure time).
inline constexpr int kFixtureMissingStatus = 5;  // libFuzzer's own statuses are 1, 70, 77

inline std::string Fixture(const std::string& relative) {
  std::filesystem::path path = std::filesystem::path(REPRISE_FIXTURES_DIR) / relative;
  if (!std::filesystem::exists(path)) {
    // Status kFixtureMissingStatus with this line: scripts/fuzz.sh reports the target skipped, as
    // the tests skip without ../shared/fixtures. _Exit: libFuzzer turns exit() into a finding.
    std::fprintf(stderr, "fixture %s not found\n", path.c_str());
    std::_Exit(kFixtureMissingStatus);
  }
  return path.string();
}

// Consumes a fuzz input front to back: single bytes for choices, and strings ended by a
// separator byte (or by the end of the input).
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size)
      : text_(reinterpret_cast<const char*>(data), size) {}

  bool empty() const { return text_.empty(); }
  uint8_t Byte() {
    if (text_.empty()) return 0;
    auto byte = static_cast<uint8_t>(text_.front());
    text_.remove_prefix(1);
    return byte;
  }
  std::string_view Field(char separator = '\x01') {
    size_t end = text_.find(separator);
    std::string_view field = text_.substr(0, end);
    text_.remove_prefix(end == std::string_view::npos ? text_.size() : end + 1);
    return field;
  }
  std::string_view Rest() {
    std::string_view rest = text_;
    text_ = {};
    return rest;
  }

 private:
  std::string_view text_;
};

}  // namespace reprise::fuzz
