// Helpers of the router's end-to-end tests: replicas and a router on loopback (the tiny fixture
// model), their metrics, and chat requests about made-up documents.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "test_support.h"

namespace reprise::testing {

using nlohmann::json;

inline std::string ModelPath() { return Fixture("models/TinyStories-656K-f32.gguf"); }

inline std::vector<std::string> ReplicaArgs() {
  return {"--model",           ModelPath(), "--chat-template", "chatml",
          "--kv-cache-memory", "64MiB",     "--threads",       "1"};
}

inline std::unique_ptr<ServerProcess> StartRouter(const std::vector<const ServerProcess*>& replicas,
                                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model", ModelPath(), "--chat-template", "chatml"};
  for (const ServerProcess* replica : replicas) {
    args.push_back("--replica");
    args.push_back("http://127.0.0.1:" + std::to_string(replica->port()));
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<ServerProcess>(args, std::map<std::string, std::string>{},
                                         std::chrono::seconds(60), "route");
}

inline double Metric(const std::string& text, const std::string& name_and_labels) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name_and_labels + " ", 0) == 0)
      return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

inline double ReplicaRequests(int router_port, const ServerProcess& replica) {
  return Metric(Get(router_port, "/metrics").body,
                "reprise:router_requests_total{replica=\"http://127.0.0.1:" +
                    std::to_string(replica.port()) + "\"}");
}

// A document of about 150 tokens, different for each n.
inline std::string Document(int n) {
  std::string text = "Story number " + std::to_string(n) + ". ";
  const char* names[] = {"Lily", "Tom", "Sue", "Ben", "Max", "Anna"};
  for (int i = 0; i < 6; ++i) {
    text += std::string(names[(n + i) % 6]) + " went to the park with a red ball and a big dog. ";
  }
  return text;
}

inline json Chat(const std::string& document, const std::string& question,
                 json extra = json::object()) {
  json body = {
      {"messages",
       {{{"role", "system"}, {"content", document}}, {{"role", "user"}, {"content", question}}}},
      {"max_tokens", 4},
      {"temperature", 0}};
  body.update(extra);
  return body;
}

}  // namespace reprise::testing
