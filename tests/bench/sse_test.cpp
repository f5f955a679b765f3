// Reading OpenAI completion streams: events split anywhere, usage, cached tokens, errors.
#include "bench/sse.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/http_target.h"

namespace reprise::bench {
namespace {

constexpr const char* kStream =
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"Hel\",\"finish_reason\":null}]}\n\n"
    "data: "
    "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"lo\",\"finish_reason\":null}]}\r\n\r\n"
    ": keep-alive comment\n\n"
    "data: "
    "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"!\",\"finish_reason\":\"length\"}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1210,\"completion_tokens\":3,"
    "\"prompt_tokens_details\":{\"cached_tokens\":1201}}}\n\n"
    "data: [DONE]\n\n";

TEST(CompletionStreamReaderTest, ReadsTextChunksAndUsage) {
  CompletionStreamReader reader;
  EXPECT_TRUE(reader.Feed(kStream));
  EXPECT_EQ(reader.text(), "Hello!");
  EXPECT_EQ(reader.choice_chunks(), 3u);
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(reader.prompt_tokens(), 1210u);
  EXPECT_EQ(reader.completion_tokens(), 3u);
  EXPECT_EQ(reader.cached_tokens(), 1201u);
  EXPECT_TRUE(reader.error().empty());
}

TEST(CompletionStreamReaderTest, FirstTokenIsReportedOnceWhereverTheBytesSplit) {
  std::string stream = kStream;
  for (size_t split = 1; split < 60; ++split) {
    CompletionStreamReader reader;
    int firsts = 0;
    size_t first_at = 0;
    for (size_t at = 0; at < stream.size(); at += split) {
      if (reader.Feed(std::string_view(stream).substr(at, split))) {
        ++firsts;
        first_at = at;
      }
    }
    EXPECT_EQ(firsts, 1) << split;
    // Reported with the bytes that complete the first event's line.
    EXPECT_LE(first_at, stream.find('\n')) << split;
    EXPECT_EQ(reader.text(), "Hello!") << split;
    EXPECT_EQ(reader.cached_tokens(), 1201u) << split;
  }
}

TEST(CompletionStreamReaderTest, ReadsLlamaCppTimingsWhenUsageHasNoCachedTokens) {
  CompletionStreamReader reader;
  reader.Feed(
      "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
      "data: {\"choices\":[{\"text\":\"b\"}],\"timings\":{\"cache_n\":96,\"prompt_n\":32}}\n\n");
  EXPECT_EQ(reader.cached_tokens(), 96u);
  EXPECT_EQ(reader.prompt_tokens(), 128u);
  EXPECT_FALSE(reader.completion_tokens().has_value());
  EXPECT_EQ(reader.choice_chunks(), 2u);
}

TEST(CompletionStreamReaderTest, KeepsAnErrorEventsMessage) {
  CompletionStreamReader reader;
  EXPECT_FALSE(reader.Feed("data: {\"error\":{\"message\":\"prompt too long\",\"code\":400}}\n\n"));
  EXPECT_EQ(reader.error(), "prompt too long");
  CompletionStreamReader plain;
  plain.Feed("{\"error\":\"bad model\"}\n");
  EXPECT_EQ(plain.error(), "\"bad model\"");
}

TEST(CompletionStreamReaderTest, IgnoresMalformedEvents) {
  CompletionStreamReader reader;
  EXPECT_FALSE(reader.Feed("data: {not json\n\nevent: ping\n\n"));
  EXPECT_EQ(reader.choice_chunks(), 0u);
}

TEST(BenchHttpTargetTest, RequestBodyAsksForAStreamWithUsage) {
  BenchRequest request;
  request.prompt = "Hello";
  request.max_tokens = 64;
  nlohmann::json body = nlohmann::json::parse(BenchHttpTarget::RequestBody("m", request));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], "Hello");
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
}

}  // namespace
}  // namespace reprise::bench
