// The fixture of the route tests: an HttpServer on 127.0.0.1 (any free port) over a FakeBackend,
// and helpers to check OpenAI-style error bodies.
#pragma once

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>

#include "http_test_client.h"
#include "server/fake_backend.h"
#include "server/http_server.h"

namespace reprise::server {

using nlohmann::json;

inline json ChatBody(const std::string& content, json extra = json::object()) {
  json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", content}}}}};
  body.update(extra);
  return body;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { std::signal(SIGPIPE, SIG_IGN); }

  void Start(HttpServerOptions options = {}, testing::FakeBackend::Options backend_options = {},
             bool ready = true) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.served_model_name = "tiny";
    if (options.http_threads == 64) options.http_threads = 32;
    server_ = std::make_unique<HttpServer>(options);
    port_ = server_->Bind();
    server_->Start();
    backend_ = std::make_shared<testing::FakeBackend>(backend_options);
    if (ready) server_->SetBackend(backend_);
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<testing::FakeBackend> backend_;
  int port_ = 0;
};

inline void ExpectError(const reprise::testing::HttpResult& result, int status,
                        const std::string& code) {
  EXPECT_EQ(result.status, status) << result.body;
  ASSERT_TRUE(result.json.is_object()) << result.body;
  ASSERT_TRUE(result.json.contains("error")) << result.body;
  EXPECT_TRUE(result.json["error"]["message"].is_string()) << result.body;
  EXPECT_TRUE(result.json["error"]["type"].is_string()) << result.body;
  if (!code.empty()) {
    EXPECT_EQ(result.json["error"]["code"], code) << result.body;
  }
}

}  // namespace reprise::server
