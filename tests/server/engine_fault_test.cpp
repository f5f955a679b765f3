// The server over a real engine whose steps fault: the request that hit the fault is answered
// 500 with an OpenAI-style error body (an error event when streamed), and the next request is
// served as usual with no block left in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <stdexcept>

#include "engine/engine_test_support.h"
#include "http_test_client.h"
#include "server/engine_backend.h"
#include "server/http_server.h"

namespace reprise::server {
namespace {

using nlohmann::json;
using reprise::testing::PostJson;
using reprise::testing::PostSse;

class EngineFaultServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    std::signal(SIGPIPE, SIG_IGN);
    EngineConfig config = reprise::testing::TestConfig(reprise::testing::TinyModelPath(), true);
    // Every request with the stop string "FAULT" fails in its sampling step (the server hands
    // the engine tokens, not text, so the prompt cannot carry the mark).
    config.fault_hook = [](EngineFaultSite site, const GenerationRequest& request) {
      const auto& stop = request.sampling.stop;
      if (site == EngineFaultSite::kSample &&
          std::find(stop.begin(), stop.end(), "FAULT") != stop.end()) {
        throw std::runtime_error("injected fault");
      }
    };
    backend_ = std::make_shared<EngineBackend>(config);
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.served_model_name = "tiny";
    server_ = std::make_unique<HttpServer>(options);
    port_ = server_->Bind();
    server_->Start();
    server_->SetBackend(backend_);
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  static json Completion(const std::string& prompt, bool stream = false) {
    json body = {{"model", "tiny"},
                 {"prompt", prompt},
                 {"max_tokens", 4},
                 {"temperature", 0},
                 {"stream", stream}};
    if (prompt.find("FAULT") != std::string::npos) body["stop"] = {"FAULT"};
    return body;
  }

  std::shared_ptr<EngineBackend> backend_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(EngineFaultServerTest, AFaultIsA500AndTheNextRequestSucceeds) {
  auto failed = PostJson(port_, "/v1/completions", Completion("FAULT in this request"));
  EXPECT_EQ(failed.status, 500) << failed.body;
  ASSERT_TRUE(failed.json.contains("error")) << failed.body;
  EXPECT_TRUE(failed.json["error"]["type"].is_string()) << failed.body;
  EXPECT_NE(failed.json["error"]["message"].get<std::string>().find("injected fault"),
            std::string::npos)
      << failed.body;

  auto streamed = PostSse(port_, "/v1/completions", Completion("FAULT when streamed", true));
  EXPECT_EQ(streamed.status, 200);
  bool saw_error = false;
  for (const std::string& event : streamed.events) {
    json parsed = json::parse(event, nullptr, /*allow_exceptions=*/false);
    saw_error = saw_error || (parsed.is_object() && parsed.contains("error"));
  }
  EXPECT_TRUE(saw_error) << streamed.raw;

  auto next = PostJson(port_, "/v1/completions", Completion("a healthy request"));
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json["choices"][0]["finish_reason"], "length") << next.body;

  EngineStats stats = reprise::testing::WaitForIdle(*backend_);
  EXPECT_EQ(stats.blocks_in_use, 0);
  EXPECT_EQ(stats.requests_finished, 3u);
}

}  // namespace
}  // namespace reprise::server
