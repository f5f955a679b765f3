#include "bench/http_target.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "bench/options.h"
#include "bench/sse.h"
#include "core/clock.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "tokenizer/tokenizer.h"

namespace reprise::bench {

BenchHttpTarget::BenchHttpTarget(const std::string& url, std::string model,
                                 const std::string& tokenizer_gguf)
    : url_(url), model_(std::move(model)) {
  HostPort host_port = ParseHttpUrl(url);
  host_ = host_port.host;
  port_ = host_port.port;
  if (model_.empty()) model_ = ServedModel();
  if (!tokenizer_gguf.empty()) {
    gguf::GgufFile file = OpenModelFile(tokenizer_gguf);
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::FromGguf(file));
  }
}

BenchHttpTarget::~BenchHttpTarget() = default;

std::string BenchHttpTarget::ServedModel() {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(10);
  auto response = client.Get("/v1/models");
  if (!response) {
    throw Error(fmt::format("cannot reach {}: {}", url_, httplib::to_string(response.error())));
  }
  nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
  if (response->status == 200 && answer.is_object() && answer.contains("data") &&
      answer["data"].is_array() && !answer["data"].empty() && answer["data"][0].contains("id") &&
      answer["data"][0]["id"].is_string()) {
    return answer["data"][0]["id"].get<std::string>();
  }
  spdlog::warn("{}/v1/models names no model; sending \"default\" (use --served-model)", url_);
  return "default";
}

std::string BenchHttpTarget::RequestBody(const std::string& model, const BenchRequest& request) {
  nlohmann::json body = {{"model", model},
                         {"prompt", request.prompt},
                         {"max_tokens", request.max_tokens},
                         {"temperature", 0},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"ignore_eos", request.ignore_eos}};
  if (!request.cache_salt.empty()) body["cache_salt"] = request.cache_salt;  // vLLM's field
  return body.dump();
}

BenchResult BenchHttpTarget::Run(const BenchRequest& request) {
  if (!request.prompt_tokens.empty()) {
    throw InternalError("token-id prompts are for the in-process engine only");
  }
  httplib::Client client(host_, port_);
  client.set_connection_timeout(10);
  client.set_read_timeout(600);
  httplib::Request http;
  http.method = "POST";
  http.path = "/v1/completions";
  http.body = RequestBody(model_, request);
  http.set_header("Content-Type", "application/json");
  http.set_header("Accept", "text/event-stream");
  CompletionStreamReader reader;
  std::string raw;  // the first bytes, for an error message
  Clock::time_point first_token{};
  bool have_first = false;
  const Clock::time_point start = Clock::now();
  http.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (raw.size() < 2000) raw.append(data, std::min<size_t>(length, 2000 - raw.size()));
    if (reader.Feed(std::string_view(data, length)) && !have_first) {
      first_token = Clock::now();
      have_first = true;
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  bool sent = client.send(http, response, error);
  const double total = SecondsSince(start);
  if (!sent) {
    throw Error(fmt::format("request to {} failed: {}", url_, httplib::to_string(error)));
  }
  if (response.status != 200) {
    throw Error(fmt::format("{} answered HTTP {}: {}", url_, response.status, raw.substr(0, 300)));
  }
  reader.Feed("\n");  // a last event without its newline
  if (!reader.error().empty()) throw Error(fmt::format("{} answered: {}", url_, reader.error()));
  if (!have_first)
    throw Error(fmt::format("{} streamed no completion: {}", url_, raw.substr(0, 300)));
  BenchResult result;
  result.ttft_seconds = std::chrono::duration<double>(first_token - start).count();
  result.total_seconds = total;
  result.completion_tokens = reader.completion_tokens().value_or(reader.choice_chunks());
  result.prompt_tokens = reader.prompt_tokens().value_or(0);
  if (!reader.prompt_tokens()) result.prompt_tokens = CountTokens(request.prompt);
  result.cached_tokens = reader.cached_tokens();
  result.text = reader.text();
  return result;
}

std::optional<size_t> BenchHttpTarget::CountWithServer(const std::string& text) {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(10);
  // Reprise and llama.cpp read "content", vLLM reads "prompt" (and "model").
  nlohmann::json body = {
      {"content", text}, {"prompt", text}, {"model", model_}, {"add_special", true}};
  auto response = client.Post("/tokenize", body.dump(), "application/json");
  if (!response || response->status != 200) return std::nullopt;
  nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
  if (!answer.is_object()) return std::nullopt;
  if (answer.contains("count") && answer["count"].is_number_integer())
    return answer["count"].get<size_t>();
  if (answer.contains("tokens") && answer["tokens"].is_array()) return answer["tokens"].size();
  return std::nullopt;
}

bool BenchHttpTarget::ClearCache(bool every_tier) {
  std::lock_guard lock(mutex_);
  if (!server_clears_) return false;
  httplib::Client client(host_, port_);
  client.set_connection_timeout(10);
  auto response = client.Post("/v1/cache/clear",
                              every_tier ? R"({"tiers": ["memory", "disk", "remote"]})" : "{}",
                              "application/json");
  server_clears_ = response && response->status == 200;
  if (!server_clears_) {
    spdlog::warn(
        "{} cannot clear its cache (no POST /v1/cache/clear): restart it or pass a new "
        "--seed so that an earlier run's prompts are not cached",
        url_);
  }
  return server_clears_;
}

size_t BenchHttpTarget::CountTokens(const std::string& text) {
  if (tokenizer_) return tokenizer_->EncodePrompt(text, /*add_bos=*/true).size();
  std::lock_guard lock(mutex_);
  if (server_counts_) {
    if (auto count = CountWithServer(text)) return *count;
    server_counts_ = false;
  }
  if (!warned_estimate_) {
    spdlog::warn(
        "{} has no /tokenize and no -m tokenizer was given: prompt sizes are estimated "
        "at 4 bytes a token (the server's usage gives the real counts)",
        url_);
    warned_estimate_ = true;
  }
  return text.size() / 4 + 1;
}

}  // namespace reprise::bench
