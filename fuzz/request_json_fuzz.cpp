// Fuzz target: request bodies as a client sends them to /v1/chat/completions, /v1/completions
// and the rtp-llm routes: JSON parsing and every field's validation. Only ApiError may come out
// (the server answers it 4xx); anything else would be a 500 or a crash.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/parsed_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t route = data[0];
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    nlohmann::json json = reprise::server::ParseJsonBody(body);
    switch (route % 3) {
      case 0:
        reprise::server::ParseChatRequest(json);
        break;
      case 1:
        reprise::server::ParseCompletionRequest(json);
        break;
      default:
        reprise::server::ParseGenerateRequest(json);
        break;
    }
  } catch (const reprise::server::ApiError&) {
  }
  return 0;
}
