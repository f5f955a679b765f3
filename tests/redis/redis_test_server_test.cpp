// The tests' redis-server helper: a server it hands out is the one it started, never another
// process that holds the port (tests run side by side, each starting servers on free ports).
#include "redis_test_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace reprise::testing {
namespace {

TEST(RedisTestServer, RestartOnAPortAnotherProcessHoldsFails) {
  REPRISE_REQUIRE_REDIS();
  RedisServer server;
  const int port = server.port();
  server.Kill();
  // Something else listens on the server's port now.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  const int reuse = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  sockaddr_in address = LoopbackAddress(port);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_TRUE(PortOpen(port));
  try {
    server.Start();
    ADD_FAILURE() << "Start() took the other listener on port " << port << " for its server";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("could not listen on port " + std::to_string(port)),
              std::string::npos)
        << error.what();
  }
  ::close(listener);
  server.Start();  // the port is free again: the same server comes back
  EXPECT_EQ(server.port(), port);
  EXPECT_NE(RedisCli({"-p", std::to_string(port), "PING"}).find("PONG"), std::string::npos);
}

}  // namespace
}  // namespace reprise::testing
