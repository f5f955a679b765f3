// The HTTP layer against hostile or broken clients, over raw loopback sockets: stalled headers,
// connection bounds, missing or bad Content-Length, clients that leave before their body is read,
// pipelined requests, overload and draining.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"

namespace reprise::server {
namespace {

using Clock = std::chrono::steady_clock;
using reprise::testing::Get;
using reprise::testing::PostJson;

// A client socket connected to 127.0.0.1:port from `source` (any 127/8 address is this host).
class RawClient {
 public:
  explicit RawClient(int port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local));
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&server), sizeof(server)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& text) {
    return ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }
  // Everything received until the server closes or `timeout` passes.
  std::string ReadAll(std::chrono::milliseconds timeout) {
    std::string text;
    Clock::time_point deadline = Clock::now() + timeout;
    char buffer[4096];
    while (Clock::now() < deadline) {
      pollfd fd{fd_, POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) break;
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        closed_by_server_ = true;
        break;
      }
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }
  // Reads until `count` HTTP status lines arrived (or the server closed, or timeout).
  std::string ReadResponses(size_t count, std::chrono::milliseconds timeout) {
    std::string text;
    Clock::time_point deadline = Clock::now() + timeout;
    char buffer[4096];
    while (Clock::now() < deadline && CountStatusLines(text) < count) {
      pollfd fd{fd_, POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) break;
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }
  static size_t CountStatusLines(const std::string& text) {
    size_t count = 0;
    for (size_t at = text.find("HTTP/1.1 "); at != std::string::npos;
         at = text.find("HTTP/1.1 ", at + 1)) {
      ++count;
    }
    return count;
  }
  bool closed_by_server() const { return closed_by_server_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_server_ = false;
};

constexpr auto kShort = std::chrono::milliseconds(2000);

TEST_F(HttpServerTest, HealthAnswersQuicklyWhileSeventySocketsStall) {
  Start();
  std::vector<std::unique_ptr<RawClient>> stalled;
  for (int i = 0; i < 70; ++i) {
    stalled.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(stalled.back()->connected());
    ASSERT_TRUE(stalled.back()->Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted and reading
  for (int i = 0; i < 5; ++i) {
    Clock::time_point start = Clock::now();
    auto health = Get(port_, "/health");
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    EXPECT_EQ(health.status, 200);
    EXPECT_LT(ms, 100.0) << "GET /health took " << ms << " ms";
  }
}

// Stop() right after Start(), before the listening thread has begun (what a server that fails at
// start-up does, and on a busy machine the thread had not begun): Stop() returns every time.
TEST_F(HttpServerTest, StopRightAfterStartReturns) {
  for (int cycle = 0; cycle < 200; ++cycle) {
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.http_threads = 2;
    auto server = std::make_unique<HttpServer>(options);
    server->Bind();
    server->Start();
    auto stopped = std::async(std::launch::async, [&] { server->Stop(); });
    if (stopped.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "Stop() did not return (cycle " << cycle << ")";
      std::_Exit(1);  // the stuck thread cannot be joined
    }
  }
}

TEST_F(HttpServerTest, StalledHeaderIsClosedAfterTheReadTimeout) {
  HttpServerOptions options;
  options.read_timeout = std::chrono::milliseconds(500);
  Start(options);
  RawClient client(port_);
  ASSERT_TRUE(client.Send("GET /health HTTP/1.1\r\nHost:"));
  Clock::time_point start = Clock::now();
  client.ReadAll(std::chrono::seconds(5));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_LT(seconds, 2.0);
  // Dripping one header byte at a time does not extend the deadline.
  RawClient drip(port_);
  start = Clock::now();
  ASSERT_TRUE(drip.Send("GET /health HTTP/1.1\r\n"));
  for (int i = 0; i < 20 && drip.Send("X"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  drip.ReadAll(std::chrono::seconds(3));
  EXPECT_TRUE(drip.closed_by_server());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.5);
}

TEST_F(HttpServerTest, ConnectionsBeyondThePerClientBoundAre503AtOnce) {
  HttpServerOptions options;
  options.max_connections_per_client = 8;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawClient>(port_, "127.0.0.2"));
    ASSERT_TRUE(held.back()->Send("GET /health HTTP/1.1\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient extra(port_, "127.0.0.2");
  std::string answer = extra.ReadAll(kShort);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("too_many_connections"), std::string::npos) << answer;
  // Another address is not affected.
  EXPECT_EQ(Get(port_, "/health").status, 200);
  auto metrics = Get(port_, "/metrics");
  EXPECT_NE(metrics.body.find("reprise:http_connections_refused_total{model_name=\"tiny\"} 1"),
            std::string::npos);
}

TEST_F(HttpServerTest, BadBodyLengthsAreAnsweredAtOnce) {
  Start();
  struct Case {
    std::string headers;
    const char* status;
  };
  std::vector<Case> cases = {
      {"", "411"},  // no length at all
      {"Content-Length: -5\r\n", "400"},
      {"Content-Length: 100000000000000000000\r\n", "413"},  // 10^20
      {"Content-Length: 99999999999\r\n", "413"},            // above --max-body-size
      {"Content-Length: 12abc\r\n", "400"},
      {"Content-Length: 5\r\nContent-Length: 6\r\n", "400"},
      {"Transfer-Encoding: gzip\r\n", "400"},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "400"},
  };
  for (const Case& c : cases) {
    RawClient client(port_);
    Clock::time_point start = Clock::now();
    ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + c.headers +
                            "\r\n{\"prompt\""));
    std::string answer = client.ReadAll(kShort);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    EXPECT_EQ(answer.rfind(std::string("HTTP/1.1 ") + c.status, 0), 0u) << c.headers << answer;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    EXPECT_EQ(answer.find("Keep-Alive"), std::string::npos) << answer;
    EXPECT_NE(answer.find("\"error\""), std::string::npos) << answer;
    EXPECT_TRUE(client.closed_by_server()) << c.headers;
    EXPECT_LT(ms, 1000.0) << c.headers;
  }
  EXPECT_EQ(backend_->submitted(), 0u);
}

TEST_F(HttpServerTest, ChunkedBodiesAreReadAndBounded) {
  HttpServerOptions options;
  options.max_body_bytes = 4096;
  Start(options);
  std::string body = R"({"prompt": "x", "max_tokens": 1})";
  RawClient client(port_);
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  ASSERT_TRUE(
      client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                  std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n"));
  std::string answer = client.ReadResponses(1, kShort);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;

  // A chunked body past the limit (plus framing slack) is refused, not buffered forever.
  RawClient big(port_);
  ASSERT_TRUE(
      big.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
               "Transfer-Encoding: chunked\r\n\r\n"));
  std::string chunk = "1000\r\n" + std::string(0x1000, 'a') + "\r\n";
  for (int i = 0; i < 40 && big.Send(chunk); ++i) {
  }
  std::string refused = big.ReadAll(kShort);
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused.substr(0, 200);
  EXPECT_EQ(backend_->submitted(), 1u);
}

TEST_F(HttpServerTest, ClientGoneBeforeItsBodyIsReadRunsNothing) {
  HttpServerOptions options;
  options.read_timeout = std::chrono::milliseconds(500);
  Start(options);
  {
    RawClient client(port_);
    ASSERT_TRUE(
        client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                    "Content-Length: 200\r\n\r\n{\"prompt\": \"x\", "));
  }  // closed with 184 bytes missing
  {
    RawClient client(port_);
    ASSERT_TRUE(
        client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                    "Content-Length: 200\r\n\r\n{\"prompt\": \"x\", "));
    client.ReadAll(std::chrono::seconds(2));  // the body timeout closes it
    EXPECT_TRUE(client.closed_by_server());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(backend_->submitted(), 0u);
  EXPECT_EQ(Get(port_, "/health").status, 200);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  RawClient client(port_);
  std::string post_body = R"({"prompt": "ab", "max_tokens": 2})";
  std::string post =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(post_body.size()) + "\r\n\r\n" + post_body;
  ASSERT_TRUE(client.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post +
                          "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" + post +
                          "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string answers = client.ReadResponses(5, std::chrono::seconds(5));
  ASSERT_EQ(RawClient::CountStatusLines(answers), 5u) << answers;
  size_t health = answers.find("\"status\":\"ok\"");
  size_t first_completion = answers.find("\"text_completion\"");
  size_t models = answers.find("\"object\":\"list\"");
  size_t second_completion = answers.find("\"text_completion\"", first_completion + 1);
  size_t not_found = answers.find("HTTP/1.1 404");
  EXPECT_LT(health, first_completion);
  EXPECT_LT(first_completion, models);
  EXPECT_LT(models, second_completion);
  EXPECT_LT(second_completion, not_found);
  EXPECT_NE(not_found, std::string::npos);
  EXPECT_EQ(backend_->submitted(), 2u);
}

TEST_F(HttpServerTest, UnauthorizedPostClosesInsteadOfReadingItsBodyAsARequest) {
  HttpServerOptions options;
  options.api_keys = {KeyOfItsOwn("secret")};
  Start(options);
  RawClient client(port_);
  std::string body = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";  // a body that looks like one
  ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string answers = client.ReadAll(kShort);
  EXPECT_EQ(RawClient::CountStatusLines(answers), 1u) << answers;
  EXPECT_EQ(answers.rfind("HTTP/1.1 401", 0), 0u) << answers;
  EXPECT_NE(answers.find("Connection: close"), std::string::npos) << answers;
}

TEST_F(HttpServerTest, OverloadSaysWhenToRetry) {
  Start({}, {.max_active = 1, .token_interval = std::chrono::milliseconds(20)});
  std::thread busy([this] {
    PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 40}});
  });
  for (int i = 0; i < 200 && backend_->active() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  httplib::Client client = reprise::testing::MakeClient(port_);
  auto result =
      client.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 503);
  EXPECT_EQ(result->get_header_value("Retry-After"), "1");
  busy.join();
}

TEST_F(HttpServerTest, DrainLetsRunningRequestsFinishAndRefusesNewOnes) {
  Start({}, {.token_interval = std::chrono::milliseconds(10)});
  reprise::testing::HttpResult running;
  std::thread client([this, &running] {
    running = PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 50}});
  });
  for (int i = 0; i < 200 && backend_->active() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(backend_->active(), 1u);
  bool drained = false;
  std::thread drainer([this, &drained] { drained = server_->Drain(std::chrono::seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto refused = PostJson(port_, "/v1/completions", {{"prompt", "y"}, {"max_tokens", 1}});
  ExpectError(refused, 503, "shutting_down");
  EXPECT_EQ(Get(port_, "/health").status, 503);
  drainer.join();
  client.join();
  EXPECT_TRUE(drained);
  EXPECT_EQ(running.status, 200) << running.body;
  EXPECT_EQ(backend_->submitted(), 1u);
}

TEST_F(HttpServerTest, DrainGivesUpAfterItsTimeout) {
  Start({}, {.token_interval = std::chrono::milliseconds(50)});
  std::thread client([this] {
    PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 200}});
  });
  for (int i = 0; i < 200 && backend_->active() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Clock::time_point start = Clock::now();
  EXPECT_FALSE(server_->Drain(std::chrono::milliseconds(300)));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  server_->Stop();  // cancels what still runs
  client.join();
  EXPECT_TRUE(backend_->WaitIdle(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace reprise::server
