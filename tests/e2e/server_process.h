// Runs `reprise serve --port 0 ...` as a child process for end-to-end tests: reads the bound
// port from its stdout, waits for /health, and stops it (SIGTERM, then SIGKILL) when destroyed.
// Its log goes to a temporary file, shown on failure.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "server/settings.h"
#include "test_support.h"

extern char** environ;

namespace reprise::testing {

// The TinyStories fixture most end-to-end tests serve, and the name they serve it under.
inline std::string TinyStoriesPath() { return Fixture("models/TinyStories-656K-f32.gguf"); }
inline constexpr const char* kTinyModelName = "tiny";

// `reprise serve` flags for the TinyStories fixture, served as kTinyModelName with the chatml
// template, a 64 MiB cache and 2 threads, then `extra`.
inline std::vector<std::string> TinyServeArgs(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model",
                                   TinyStoriesPath(),
                                   "--served-model-name",
                                   kTinyModelName,
                                   "--chat-template",
                                   "chatml",
                                   "--kv-cache-memory",
                                   "64MiB",
                                   "--threads",
                                   "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The test's environment with `overrides` applied (an empty value removes the variable), as
// "NAME=value" strings.
inline std::vector<std::string> ChildEnvironment(
    const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string item = *entry;
    if (overrides.count(item.substr(0, item.find('='))) == 0) result.push_back(item);
  }
  for (const auto& [name, value] : overrides) {
    if (!value.empty()) result.push_back(name + "=" + value);
  }
  return result;
}

// The variables that change how `reprise serve` behaves, cleared unless a test sets them, so
// that the caller's shell cannot change a test's meaning.
inline std::map<std::string, std::string> CleanServeEnvironment(
    std::map<std::string, std::string> env) {
  for (const server::EnvironmentVariable& variable : server::EnvironmentVariables()) {
    env.emplace(variable.name, "");
  }
  return env;
}

struct ProcessResult {
  int exit_code = -1;  // -1: killed (timed out or by a signal)
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (a path, or a name looked up in PATH) to its end, at most `timeout`.
inline ProcessResult RunToExit(std::vector<std::string> argv,
                               const std::map<std::string, std::string>& env,
                               std::chrono::seconds timeout) {
  static int counter = 0;
  auto output_path = testing::ScratchDir() / ("run_" + std::to_string(counter++) + ".out");
  std::vector<std::string> env_strings = ChildEnvironment(env);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> c_argv;
  for (std::string& arg : argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  std::vector<char*> c_env;
  for (std::string& item : env_strings) c_env.push_back(item.data());
  c_env.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  ProcessResult result;
  if (rc != 0) {
    result.output = "cannot start " + argv[0];
    return result;
  }
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream file(output_path);
  std::stringstream text;
  text << file.rdbuf();
  result.output = text.str();
  std::error_code ignored;
  std::filesystem::remove(output_path, ignored);
  return result;
}

class ServerProcess {
 public:
  // `args` follow `reprise serve` (or `reprise <command>`, e.g. route); `env` adds to (or, with
  // an empty value, removes from) the test's environment. Throws std::runtime_error with the
  // server's log when it does not become healthy within `timeout`.
  ServerProcess(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                std::chrono::seconds timeout = std::chrono::seconds(60),
                const std::string& command = "serve") {
    static int counter = 0;
    log_path_ = testing::ScratchDir() / ("server_" + std::to_string(counter++) + ".log");
    std::vector<std::string> argv = {REPRISE_BINARY, command, "--host", "127.0.0.1", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());

    std::vector<std::string> env_strings = ChildEnvironment(CleanServeEnvironment(std::move(env)));

    int out_pipe[2];
    if (::pipe(out_pipe) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> c_argv;
    for (std::string& arg : argv) c_argv.push_back(arg.data());
    c_argv.push_back(nullptr);
    std::vector<char*> c_env;
    for (std::string& item : env_strings) c_env.push_back(item.data());
    c_env.push_back(nullptr);
    int rc = posix_spawn(&pid_, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_pipe[1]);
    stdout_fd_ = out_pipe[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + argv[0]);
    }

    auto deadline = std::chrono::steady_clock::now() + timeout;
    port_ = ReadPort(deadline);
    while (Get(port_, "/health").status != 200) {
      if (std::chrono::steady_clock::now() > deadline || !Running()) {
        throw std::runtime_error("the server did not become healthy; its log:\n" + Log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  ~ServerProcess() {
    Stop();
    if (std::getenv("REPRISE_KEEP_TEST_FILES") == nullptr) {
      std::error_code ignored;
      std::filesystem::remove(log_path_, ignored);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }

  // SIGKILL at once, as in a crash.
  void Kill() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    Stop();
  }

  // Sends SIGTERM, waits up to 10 s, then SIGKILL. Returns the exit status (-1 if killed).
  int Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      pid_ = -1;
    }
    if (stdout_fd_ >= 0) {
      ::close(stdout_fd_);
      stdout_fd_ = -1;
    }
    return exit_status_;
  }

  std::string Log() const {
    std::ifstream file(log_path_);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

 private:
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid_ = -1;  // reaped
    return false;
  }

  // Reads stdout until "listening on http://127.0.0.1:PORT".
  int ReadPort(std::chrono::steady_clock::time_point deadline) {
    std::string text;
    const std::string marker = "listening on http://127.0.0.1:";
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd fd{stdout_fd_, POLLIN, 0};
      if (::poll(&fd, 1, 100) > 0) {
        char buffer[256];
        ssize_t n = ::read(stdout_fd_, buffer, sizeof(buffer));
        if (n <= 0) break;  // the server exited
        text.append(buffer, static_cast<size_t>(n));
        size_t at = text.find(marker);
        if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
          return std::stoi(text.substr(at + marker.size()));
        }
      }
    }
    throw std::runtime_error("the server printed no port; stdout: '" + text + "'; log:\n" + Log());
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::filesystem::path log_path_;
};

}  // namespace reprise::testing
