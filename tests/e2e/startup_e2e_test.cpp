// End to end: how `reprise serve` starts. Environment switches against flags, bad settings
// stopping start-up with a message, static task prompts (rtp-llm's MultiTaskPrompt flow over
// HTTP), and the seed script from ../shared/seeds/000_*.txt run with python3.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

// `reprise serve ...` run to its end (for start-ups that must fail).
ProcessResult ServeToExit(std::vector<std::string> extra, std::map<std::string, std::string> env) {
  std::vector<std::string> argv = {REPRISE_BINARY, "serve", "--host", "127.0.0.1", "--port", "0"};
  for (std::string& arg : TinyServeArgs(std::move(extra))) argv.push_back(arg);
  return RunToExit(argv, CleanServeEnvironment(std::move(env)), std::chrono::seconds(60));
}

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  auto path = testing::ScratchDir() / name;
  std::ofstream(path) << text;
  return path;
}

// rtp-llm's example task prompt file (../shared/seeds/002_*.txt).
const char* kTaskPrompts = R"([
  {"task_id": 1, "prompt": " <|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>"},
  {"task_id": 2, "prompt": "你是一个严谨的程序员,你接下来需要非常谨慎的思考并回答以下问题:"}
])";

TEST(StartupE2eTest, EnvironmentSwitchesAndFlagsWin) {
  REPRISE_REQUIRE_FIXTURES();
  {
    ServerProcess server(TinyServeArgs(), {{"REUSE_CACHE", "0"}, {"SEQ_SIZE_PER_BLOCK", "32"}});
    auto stats = Get(server.port(), "/v1/cache/stats");
    EXPECT_EQ(stats.json["prefix_caching"], false) << stats.body;
    EXPECT_EQ(stats.json["block_size"], 32);
    std::string log = server.Log();
    EXPECT_NE(log.find("reuse_cache: false, block_size: 32"), std::string::npos) << log;
  }
  {
    ServerProcess server(TinyServeArgs({"--enable-prefix-caching", "--block-size", "8"}),
                         {{"NIM_ENABLE_KV_CACHE_REUSE", "0"}, {"SEQ_SIZE_PER_BLOCK", "32"}});
    auto stats = Get(server.port(), "/v1/cache/stats");
    EXPECT_EQ(stats.json["prefix_caching"], true) << stats.body;
    EXPECT_EQ(stats.json["block_size"], 8);
  }
  {
    ServerProcess server(TinyServeArgs(), {{"ENABLE_PREFIX_CACHING", "TRUE"}});
    EXPECT_EQ(Get(server.port(), "/v1/cache/stats").json["prefix_caching"], true);
  }
}

TEST(StartupE2eTest, BadSettingsStopStartUpWithAMessage) {
  REPRISE_REQUIRE_FIXTURES();
  auto bad_switch = ServeToExit({}, {{"ENABLE_PREFIX_CACHING", "maybe"}});
  EXPECT_EQ(bad_switch.exit_code, 1) << bad_switch.output;
  EXPECT_NE(bad_switch.output.find("ENABLE_PREFIX_CACHING"), std::string::npos)
      << bad_switch.output;

  auto bad_block = ServeToExit({}, {{"SEQ_SIZE_PER_BLOCK", "24"}});
  EXPECT_EQ(bad_block.exit_code, 1) << bad_block.output;
  EXPECT_NE(bad_block.output.find("SEQ_SIZE_PER_BLOCK"), std::string::npos) << bad_block.output;

  auto no_model =
      RunToExit({REPRISE_BINARY, "serve", "--port", "0", "--model", "/nonexistent.gguf"},
                CleanServeEnvironment({}), std::chrono::seconds(30));
  EXPECT_EQ(no_model.exit_code, 1) << no_model.output;

  auto not_json = WriteTemp("not_json.json", "[{\"task_id\": 1, ");
  auto bad_file = ServeToExit({"--multi-task-prompt", not_json.string()}, {});
  EXPECT_EQ(bad_file.exit_code, 1) << bad_file.output;
  auto missing_file = ServeToExit({"--multi-task-prompt", "/nonexistent/tasks.json"}, {});
  EXPECT_EQ(missing_file.exit_code, 1) << missing_file.output;
  EXPECT_NE(missing_file.output.find("/nonexistent/tasks.json"), std::string::npos);
  std::filesystem::remove(not_json);
}

// A model without a chat template (the TinyStories fixture has none) gets the generic chatml
// one, with a start-up warning that names --chat-template, and chat requests are answered.
// An unknown --chat-template stops start-up.
TEST(StartupE2eTest, ModelWithoutChatTemplateFallsBackToChatml) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string model = TinyStoriesPath();
  ServerProcess server({"--model", model, "--served-model-name", kTinyModelName,
                        "--kv-cache-memory", "64MiB", "--threads", "2"});
  std::string log = server.Log();
  EXPECT_NE(log.find("no chat template"), std::string::npos) << log;
  EXPECT_NE(log.find("--chat-template"), std::string::npos) << log;
  auto chat = PostJson(server.port(), "/v1/chat/completions",
                       {{"model", kTinyModelName},
                        {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                        {"max_tokens", 4}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  // The prompt is chatml's rendering of the conversation, token for token.
  auto expected = PostJson(server.port(), "/tokenize",
                           {{"prompt",
                             "<|im_start|>user\nOnce upon a time<|im_end|>\n"
                             "<|im_start|>assistant\n"}});
  ASSERT_EQ(expected.status, 200) << expected.body;
  EXPECT_EQ(chat.json["usage"]["prompt_tokens"], expected.json["tokens"].size()) << chat.body;

  auto unknown = RunToExit({REPRISE_BINARY, "serve", "--port", "0", "--model", model,
                            "--chat-template", "no-such-template"},
                           CleanServeEnvironment({}), std::chrono::seconds(60));
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_NE(unknown.output.find("no-such-template"), std::string::npos) << unknown.output;
}

// The seed's two Pipeline calls as HTTP calls: with task_id 1 the task prompt is reused from
// the first call on; without it, on a fresh server, nothing is.
TEST(StartupE2eTest, TaskPromptsRtpLlmFlow) {
  REPRISE_REQUIRE_FIXTURES();
  auto file = WriteTemp("tasks.json", kTaskPrompts);
  size_t task_tokens = 0;
  {
    ServerProcess server(TinyServeArgs({"--multi-task-prompt", file.string()}));
    auto tasks = Get(server.port(), "/v1/tasks");
    ASSERT_EQ(tasks.status, 200) << tasks.body;
    ASSERT_EQ(tasks.json["data"].size(), 2u) << tasks.body;
    EXPECT_EQ(tasks.json["data"][0]["task_id"], "1");
    task_tokens = tasks.json["data"][0]["tokens"];
    EXPECT_GT(task_tokens, 5u);

    auto with_task =
        PostJson(server.port(), "/generate",
                 {{"prompt", "hello, what's your name"},
                  {"generate_config", {{"top_k", 1}, {"max_new_tokens", 100}, {"task_id", "1"}}}});
    ASSERT_EQ(with_task.status, 200) << with_task.body;
    EXPECT_GT(with_task.json["aux_info"]["reuse_len"].get<size_t>(), 0u);
    EXPECT_GE(with_task.json["aux_info"]["reuse_len"].get<size_t>(), task_tokens);
    EXPECT_GT(with_task.json["aux_info"]["input_len"].get<size_t>(), task_tokens);

    // The same through the OpenAI route, with a numeric task_id.
    auto chat = PostJson(server.port(), "/v1/completions",
                         {{"prompt", "hello"}, {"task_id", 2}, {"max_tokens", 4}});
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_GE(chat.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(),
              tasks.json["data"][1]["tokens"].get<size_t>());

    auto stats = Get(server.port(), "/v1/cache/stats");
    EXPECT_GT(stats.json["blocks"]["pinned"].get<int>(), 0) << stats.body;
    // Clearing the cache keeps pinned task prompts.
    ASSERT_EQ(PostJson(server.port(), "/v1/cache/clear", json::object()).status, 200);
    EXPECT_EQ(Get(server.port(), "/v1/cache/stats").json["blocks"]["pinned"],
              stats.json["blocks"]["pinned"]);
  }
  const json no_task_request = {{"prompt", "hello, what's your name"},
                                {"generate_config", {{"top_k", 1}, {"max_new_tokens", 100}}}};
  {
    // The call without task_id on a fresh server reuses nothing.
    ServerProcess server(TinyServeArgs());
    auto without_task = PostJson(server.port(), "/generate", no_task_request);
    ASSERT_EQ(without_task.status, 200) << without_task.body;
    EXPECT_EQ(without_task.json["aux_info"]["reuse_len"], 0);
  }
  {
    // MULTI_TASK_PROMPT_STR. With the task prompts pinned, a request without task_id still
    // reuses what it shares with them token by token (BOS and the leading space here): exactly
    // the longest common prefix with a task prompt, and nothing more.
    ServerProcess server(TinyServeArgs(), {{"MULTI_TASK_PROMPT_STR", kTaskPrompts}});
    EXPECT_EQ(Get(server.port(), "/v1/tasks").json["data"].size(), 2u);
    json request_tokens =
        PostJson(server.port(), "/tokenize", {{"prompt", no_task_request["prompt"]}})
            .json["tokens"];
    size_t expected = 0;
    for (const json& task : json::parse(kTaskPrompts)) {
      json task_tokens =
          PostJson(server.port(), "/tokenize", {{"prompt", task["prompt"]}}).json["tokens"];
      size_t common = 0;
      while (common < task_tokens.size() && common < request_tokens.size() &&
             task_tokens[common] == request_tokens[common]) {
        ++common;
      }
      expected = std::max(expected, common);
    }
    auto without_task = PostJson(server.port(), "/generate", no_task_request);
    ASSERT_EQ(without_task.status, 200) << without_task.body;
    EXPECT_EQ(without_task.json["aux_info"]["reuse_len"], expected);
    EXPECT_LT(expected, task_tokens);
  }
  {
    ServerProcess server(TinyServeArgs(), {{"MULTI_TASK_PROMPT", file.string()}});
    EXPECT_EQ(Get(server.port(), "/v1/tasks").json["data"].size(), 2u);
  }
  std::filesystem::remove(file);
}

// SIGTERM ends the server with status 0, also while a stream is open past --shutdown-timeout
// (and, in a sanitizer build, with no leak or error reported at exit).
TEST(StartupE2eTest, StopsCleanlyOnSigterm) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(TinyServeArgs({"--shutdown-timeout", "0.2"}));
  ASSERT_EQ(
      PostJson(server.port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}).status,
      200);
  std::thread client([&] {
    PostSse(server.port(), "/v1/completions",
            {{"prompt", "Once"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string log_before_stop = server.Log();
  int status = server.Stop();
  client.join();
  EXPECT_EQ(status, 0) << log_before_stop;
}

// SIGTERM drains: a request running when it comes is answered in full, then the server exits 0.
TEST(StartupE2eTest, SigtermDrainsRunningRequests) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(TinyServeArgs({"--shutdown-timeout", "30"}));
  HttpResult running;
  std::thread client([&] {
    running = PostJson(server.port(), "/v1/completions",
                       {{"prompt", "Once"}, {"max_tokens", 200}, {"ignore_eos", true}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int status = server.Stop();
  client.join();
  EXPECT_EQ(status, 0) << server.Log();
  ASSERT_EQ(running.status, 200) << running.body << server.Log();
  EXPECT_EQ(running.json["usage"]["completion_tokens"], 200);
}

// ../shared/seeds/000_*.txt, unchanged but for the URL, the model name and the row count (the
// fixture's context is 512 tokens), run with the image's python3.
TEST(StartupE2eTest, SeedScriptRunsAgainstTheServer) {
  REPRISE_REQUIRE_FIXTURES();
  if (RunToExit({"python3", "-c", "import requests"}, {}, std::chrono::seconds(30)).exit_code !=
      0) {
    GTEST_SKIP() << "python3 with requests is not available";
  }
  ServerProcess server(TinyServeArgs());
  std::string script = std::string(REPRISE_SOURCE_DIR) + "/tests/e2e/seed_prefix_caching.py";
  auto run = RunToExit({"python3", script},
                       {{"REPRISE_URL", "http://127.0.0.1:" + std::to_string(server.port())},
                        {"REPRISE_MODEL", kTinyModelName},
                        {"SEED_ROWS", "8"}},
                       std::chrono::seconds(120));
  std::printf("%s\n", run.output.c_str());
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nserver log:\n" << server.Log();
  size_t outputs = 0;
  for (size_t at = run.output.find("Output: "); at != std::string::npos;
       at = run.output.find("Output: ", at + 1)) {
    ++outputs;
  }
  EXPECT_EQ(outputs, 2u) << run.output;
  // The second query reused the table.
  std::string metrics = Get(server.port(), "/metrics").body;
  EXPECT_EQ(metrics.find("reprise:prefix_cache_hits_total{model_name=\"tiny\"} 0\n"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace reprise::testing
