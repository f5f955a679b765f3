// End to end: `reprise serve` answers logprobs that are the log-softmax of the model's logits.
// The reference logits come from the same model loaded in this process (GenerationRequest::
// record_logits); the engine gives the same bits whatever the thread count or cache state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "reprise/engine.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

double LogSoftmaxAt(const std::vector<float>& row, int32_t token) {
  double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float value : row) sum += std::exp(value - max);
  return row[static_cast<size_t>(token)] - max - std::log(sum);
}

TEST(LogprobsE2eTest, ServedLogprobsAreTheLogSoftmaxOfTheModelsLogits) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server({"--model", TinyStoriesPath(), "--served-model-name", kTinyModelName,
                        "--chat-template", "chatml", "--kv-cache-memory", "32MiB", "--threads",
                        "2"});

  EngineConfig config;
  config.model_path = TinyStoriesPath();
  config.kv_cache_memory_bytes = size_t{32} << 20;
  config.num_threads = 1;
  Engine engine(config);
  std::vector<int32_t> prompt = engine.Tokenize("Once upon a time, there was a little", true);
  constexpr int kTokens = 10;
  GenerationRequest request;
  request.prompt_tokens = prompt;
  request.sampling.temperature = 0;
  request.sampling.max_tokens = kTokens;
  request.sampling.ignore_eos = true;
  request.record_logits = true;
  std::vector<GenerationRequest> requests{request};
  GenerationOutput reference = engine.Generate(std::move(requests))[0];
  ASSERT_EQ(reference.logits.size(), static_cast<size_t>(kTokens));

  json body = {{"model", kTinyModelName}, {"prompt", prompt}, {"max_tokens", kTokens},
               {"temperature", 0},        {"logprobs", 5},    {"ignore_eos", true}};
  // Twice: the second answer comes mostly from the prefix cache and must not differ.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    HttpResult result = PostJson(server.port(), "/v1/completions", body);
    ASSERT_EQ(result.status, 200) << result.body;
    const json& choice = result.json["choices"][0];
    const json& logprobs = choice["logprobs"];
    ASSERT_EQ(logprobs["token_logprobs"].size(), static_cast<size_t>(kTokens)) << result.body;
    std::string spelled;
    for (size_t i = 0; i < static_cast<size_t>(kTokens); ++i) {
      int32_t token = reference.token_ids[i];
      EXPECT_NEAR(logprobs["token_logprobs"][i].get<double>(),
                  LogSoftmaxAt(reference.logits[i], token), 1e-4)
          << "token " << i;
      // Greedy: the chosen token is the most likely, and the five listed are the five best.
      const json& top = logprobs["top_logprobs"][i];
      EXPECT_GE(top.size(), 5u);
      double best = -1e9;
      for (const auto& [text, value] : top.items()) best = std::max(best, value.get<double>());
      EXPECT_DOUBLE_EQ(best, logprobs["token_logprobs"][i].get<double>());
      EXPECT_EQ(logprobs["text_offset"][i].get<size_t>(), spelled.size());
      spelled += logprobs["tokens"][i].get<std::string>();
    }
    EXPECT_EQ(spelled, choice["text"].get<std::string>());
    EXPECT_EQ(choice["text"], reference.text);
    if (round == 1) {
      EXPECT_GT(result.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    }
  }

  // Chat, streamed: every token comes with its logprob, the greedy one on top.
  json chat = {{"model", kTinyModelName},
               {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
               {"max_tokens", 8},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 3},
               {"stream", true}};
  SseResult stream = PostSse(server.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(stream.status, 200) << stream.raw;
  std::string content;
  size_t entries = 0;
  for (const std::string& event : stream.events) {
    if (event == "[DONE]") continue;
    json chunk = json::parse(event);
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"].get<std::string>();
    if (choice["logprobs"].is_null()) continue;
    for (const json& entry : choice["logprobs"]["content"]) {
      ++entries;
      ASSERT_EQ(entry["top_logprobs"].size(), 3u);
      EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
      EXPECT_EQ(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
      EXPECT_LE(entry["logprob"].get<double>(), 0.0);
    }
  }
  EXPECT_GE(entries, 1u);
  EXPECT_LE(entries, 8u);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

}  // namespace
}  // namespace reprise::testing
