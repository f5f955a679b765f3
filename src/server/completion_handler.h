// The generation routes (/v1/chat/completions, /v1/completions, rtp-llm's POST / and /generate):
// parse and check the request, prepare each prompt (chat template, tokens computed once by the
// engine's rule, length against the context), submit one engine request per choice and answer whole
// or as SSE. A client that goes away mid-stream has its engine requests cancelled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/parsed_request.h"
#include "server/server_state.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace reprise::server {

// A chat rendered with the model's template (or `chat_template`). Throws ApiError (400) when no
// template applies. The engine tokenizes it (InferenceBackend::EncodePrompt, Tokenize), adding
// BOS only when the text does not already start with it.
std::string RenderChatPrompt(const ReadyBackend& ready,
                             const std::vector<Engine::ChatMessage>& messages,
                             const std::string& chat_template);

class CompletionHandler {
 public:
  explicit CompletionHandler(ServerState& state) : state_(state) {}

  // Throws ApiError for anything the client should hear about; the caller turns it into a body.
  void Handle(ApiKind kind, const httplib::Request& http_request, httplib::Response& http_response);

 private:
  ServerState& state_;
};

}  // namespace reprise::server
