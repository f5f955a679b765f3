// `reprise serve --demo` on a machine with nothing else: it makes the demo model in a fresh HOME
// and answers a chat request like the README's through the model's own (ChatML) template.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

TEST(DemoE2eTest, ServeDemoAnswersAChatRequest) {
  std::filesystem::path home = ScratchDir() / "demo_home";
  std::filesystem::create_directories(home);
  ServerProcess server({"--demo", "--demo-shape", "tiny", "-t", "1", "--kv-cache-memory", "64MiB"},
                       {{"HOME", home.string()}, {"XDG_CACHE_HOME", ""}},
                       std::chrono::seconds(120));
  // Greedy: the demo weights are random, so a sampled answer (the default temperature is 1)
  // picks a stop token within eight steps about once in a hundred answers.
  nlohmann::json request = {{"model", "reprise-demo"},
                            {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                            {"max_tokens", 8},
                            {"temperature", 0}};
  HttpResult first = PostJson(server.port(), "/v1/chat/completions", request);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json["choices"][0]["message"]["role"], "assistant") << first.body;
  EXPECT_EQ(first.json["usage"]["completion_tokens"], 8) << first.body;
  EXPECT_EQ(first.json["choices"][0]["finish_reason"], "length") << first.body;
  // The same conversation again: its whole prompt but the last token comes from cache.
  HttpResult second = PostJson(server.port(), "/v1/chat/completions", request);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(second.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0)
      << second.body;
  EXPECT_NE(server.Log().find("weights are RANDOM"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(home / ".cache" / "reprise"));
}

TEST(DemoE2eTest, ServeWithoutModelOrDemoSaysWhatItNeeds) {
  ProcessResult result = RunToExit({REPRISE_BINARY, "serve", "--port", "0"},
                                   CleanServeEnvironment({}), std::chrono::seconds(30));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("--demo"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("listening"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace reprise::testing
