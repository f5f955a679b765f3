// Real redis-server processes for tests: one standalone server, or a 3-master Redis Cluster
// made with `redis-cli --cluster create`, each on a free loopback port with its files in the
// test's scratch folder, killed when the object is destroyed. Tests skip, saying why, when
// redis-server or redis-cli is not installed (scripts/setup.sh installs both).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "e2e/server_process.h"
#include "test_support.h"

namespace reprise::testing {

inline std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

inline bool HaveRedis() {
  return !FindProgram("redis-server").empty() && !FindProgram("redis-cli").empty();
}

// 127.0.0.1:port as a socket address.
inline sockaddr_in LoopbackAddress(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Whether something listens on 127.0.0.1:port.
inline bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = LoopbackAddress(port);
  bool open = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return open;
}

// Binds a TCP socket to 127.0.0.1:port (0: any free port) and releases it; returns the port
// bound, or -1 when it cannot be bound (a listener, or a connection's local end, holds it).
inline int BindLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = LoopbackAddress(port);
  socklen_t length = sizeof(address);
  int bound = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    bound = ntohs(address.sin_port);
  }
  ::close(fd);
  return bound;
}

// A port that can be bound on loopback now, and (for cluster nodes) whose bus port, port+10000,
// can be bound too. The bus port is checked by binding, not by connecting: a port in the
// ephemeral range may be the local end of another test's connection, which no connect sees but
// which makes redis-server's bind fail.
inline int FreePort(bool with_bus_port) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = BindLoopback(0);
    if (port <= 0) continue;
    if (!with_bus_port) return port;
    if (port + 10000 <= 65535 && BindLoopback(port + 10000) > 0) return port;
  }
  throw std::runtime_error("no free loopback port");
}

inline pid_t Spawn(std::vector<std::string> argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> c_argv;
  for (std::string& arg : argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  return pid;
}

// Runs redis-cli with `args` to its end (at most 60 s); returns its output.
inline std::string RedisCli(const std::vector<std::string>& args, int* exit_code = nullptr) {
  std::vector<std::string> argv = {FindProgram("redis-cli")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult result = RunToExit(argv, {}, std::chrono::seconds(60));
  if (exit_code != nullptr) *exit_code = result.exit_code;
  return result.output;
}

// One redis-server on 127.0.0.1: Start() and Kill() may be called again (a restart keeps the
// port). No persistence: a restarted server is empty, as after a crash without a dump.
class RedisServer {
 public:
  explicit RedisServer(std::string password = "", bool cluster_node = false)
      : password_(std::move(password)), cluster_node_(cluster_node) {
    static int counter = 0;
    dir_ = ScratchDir() / ("redis_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    // The port is free when chosen but not held: another test process's server, or a client's
    // outgoing connection, may take it before redis-server binds it. Then that server exits, and
    // a fresh port is tried (a test must not talk to another test's server).
    for (int attempt = 1;; ++attempt) {
      port_ = FreePort(cluster_node_);
      if (StartOnPort() || attempt == 5) break;
    }
    if (pid_ <= 0) {
      throw std::runtime_error(
          "redis-server did not start on a loopback port in 5 tries; its log:\n" + Log());
    }
  }
  ~RedisServer() { Kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts the server again on its port (a restart); throws if it cannot listen there.
  void Start() {
    if (pid_ > 0) return;
    if (!StartOnPort()) {
      throw std::runtime_error("redis-server could not listen on port " + std::to_string(port_) +
                               "; its log:\n" + Log());
    }
  }

  // SIGKILL: the server dies as in a crash.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string url() const {
    return "redis://" + (password_.empty() ? std::string() : ":" + password_ + "@") +
           "127.0.0.1:" + std::to_string(port_);
  }
  std::string Log() const {
    std::ifstream file(dir_ / "server.log");
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

 private:
  // Spawns redis-server on port_ and waits until it listens: false if it exits first (the port
  // was taken) or does not listen within 20 s.
  bool StartOnPort() {
    std::vector<std::string> argv = {FindProgram("redis-server"),
                                     "--bind",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port_),
                                     "--dir",
                                     dir_.string(),
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--protected-mode",
                                     "no",
                                     "--enable-debug-command",
                                     "local"};
    if (!password_.empty()) {
      argv.insert(argv.end(), {"--requirepass", password_, "--masterauth", password_});
    }
    if (cluster_node_) {
      argv.insert(argv.end(), {"--cluster-enabled", "yes", "--cluster-config-file",
                               (dir_ / "nodes.conf").string(), "--cluster-node-timeout", "2000"});
    }
    // The log is appended to across restarts: this start's lines are those past its end now.
    const size_t log_start = Log().size();
    pid_ = Spawn(argv, (dir_ / "server.log").string());
    // Ready when this server says so and the port answers (the port alone may be another
    // server's); failed when it exits (it could not bind) or takes too long.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (true) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (Log().find("Ready to accept connections", log_start) != std::string::npos &&
          PortOpen(port_)) {
        return true;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        Kill();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string password_;
  bool cluster_node_;
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Three masters, no replicas, all 16384 slots assigned; ready when every node reports
// cluster_state:ok.
class RedisCluster {
 public:
  RedisCluster() {
    std::vector<std::string> args = {"--cluster", "create"};
    for (int i = 0; i < 3; ++i) {
      nodes_.push_back(std::make_unique<RedisServer>("", /*cluster_node=*/true));
      args.push_back("127.0.0.1:" + std::to_string(nodes_.back()->port()));
    }
    args.insert(args.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    int code = 0;
    std::string output = RedisCli(args, &code);
    if (code != 0) throw std::runtime_error("redis-cli --cluster create failed:\n" + output);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (const auto& node : nodes_) {
      while (RedisCli({"-p", std::to_string(node->port()), "cluster", "info"})
                 .find("cluster_state:ok") == std::string::npos) {
        if (std::chrono::steady_clock::now() > deadline) {
          throw std::runtime_error("the Redis Cluster did not become ready");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  RedisServer& node(size_t i) { return *nodes_.at(i); }
  // The first node's URL: a client finds the others from it.
  std::string url() const { return nodes_.front()->url(); }

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace reprise::testing

#define REPRISE_REQUIRE_REDIS()                                                        \
  do {                                                                                 \
    if (!::reprise::testing::HaveRedis()) {                                            \
      GTEST_SKIP() << "redis-server or redis-cli not found in PATH (install Debian's " \
                      "redis-server and redis-tools, as scripts/setup.sh does)";       \
    }                                                                                  \
  } while (0)
