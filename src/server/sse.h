// Server-sent events framing for streamed completions, and the one JSON serialisation every
// response uses (invalid UTF-8 becomes U+FFFD instead of throwing).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace reprise::server {

inline std::string JsonText(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

// One event: "data: <compact JSON>\n\n". Compact JSON never holds a raw newline, so one line.
inline std::string SseData(const nlohmann::json& payload) {
  return "data: " + JsonText(payload) + "\n\n";
}

// The OpenAI stream terminator.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace reprise::server
