// A small HTTP client for tests that talk to a Reprise server on 127.0.0.1: JSON requests,
// and streamed (SSE) requests that can hang up part-way like a client that goes away.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace reprise::testing {

struct HttpResult {
  int status = 0;  // 0: no answer (connection failed)
  std::string body;
  nlohmann::json json;  // the parsed body, or null when it is not JSON
  std::string content_type;
};

inline httplib::Client MakeClient(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(120, 0);
  client.set_write_timeout(30, 0);
  return client;
}

inline HttpResult ToResult(const httplib::Result& result) {
  HttpResult out;
  if (!result) return out;
  out.status = result->status;
  out.body = result->body;
  out.content_type = result->get_header_value("Content-Type");
  out.json = nlohmann::json::parse(out.body, nullptr, /*allow_exceptions=*/false);
  if (out.json.is_discarded()) out.json = nullptr;
  return out;
}

inline HttpResult PostText(int port, const std::string& path, const std::string& body,
                           const httplib::Headers& headers = {}) {
  httplib::Client client = MakeClient(port);
  return ToResult(client.Post(path.c_str(), headers, body, "application/json"));
}

inline HttpResult PostJson(int port, const std::string& path, const nlohmann::json& body,
                           const httplib::Headers& headers = {}) {
  return PostText(port, path, body.dump(), headers);
}

inline HttpResult Get(int port, const std::string& path, const httplib::Headers& headers = {}) {
  httplib::Client client = MakeClient(port);
  return ToResult(client.Get(path.c_str(), headers));
}

struct SseResult {
  int status = 0;
  std::vector<std::string> events;  // the text after "data: " of each event
  std::string raw;                  // everything received
  bool hung_up = false;             // on_event asked to stop
  double first_event_seconds = -1;  // from sending to the first event carrying content
  std::string error;                // the client's error when there was no answer
};

// POSTs `body` and reads the answer as server-sent events. `on_event` sees each event's data;
// returning false closes the connection at once.
inline SseResult PostSse(int port, const std::string& path, const nlohmann::json& body,
                         const std::function<bool(const std::string&)>& on_event = {}) {
  SseResult out;
  httplib::Client client = MakeClient(port);
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  auto start = std::chrono::steady_clock::now();
  std::string buffer;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    out.raw.append(data, length);
    buffer.append(data, length);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      std::string payload = event.substr(6);
      if (out.first_event_seconds < 0 && payload.find("\"content\":\"\"") == std::string::npos) {
        out.first_event_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      out.events.push_back(payload);
      if (on_event && !on_event(payload)) {
        out.hung_up = true;
        return false;
      }
    }
    return true;
  };
  httplib::Result result = client.send(request);
  if (result) {
    out.status = result->status;
  } else {
    out.error = httplib::to_string(result.error());
  }
  return out;
}

}  // namespace reprise::testing
