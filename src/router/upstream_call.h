// One request forwarded to one replica on its own thread, its answer handed over as it arrives:
// the status and content type first, then the body chunk by chunk (SSE events pass through as
// the replica writes them). The caller learns whether any byte came before a failure, which
// decides whether the request may be retried elsewhere.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace reprise::router {

class UpstreamCall {
 public:
  // Starts POST (or GET when body is empty and method is "GET") to host:port/path at once.
  UpstreamCall(const std::string& host, int port, std::string method, std::string path,
               httplib::Headers headers, std::string body, std::string content_type);
  ~UpstreamCall();  // cancels and joins
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // Blocks until the status line and headers came (true) or the call failed first (false:
  // nothing was received, the request can go elsewhere).
  bool WaitForHeaders();
  int status() const { return status_; }
  const std::string& content_type() const { return content_type_; }

  // The next chunk of the body, blocking; std::nullopt at the end. ended_cleanly() then says
  // whether the replica finished the body or the connection broke.
  std::optional<std::string> NextChunk();
  bool ended_cleanly() const;
  // The rest of the body at once (for whole answers and error bodies).
  std::string ReadAll();
  // Stops reading: the replica sees the connection close and cancels its work.
  void Cancel();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool headers_ = false;
  bool done_ = false;
  bool failed_ = false;
  bool cancelled_ = false;
  int status_ = 0;
  std::string content_type_;
  std::deque<std::string> chunks_;
  httplib::Client* client_ = nullptr;  // while the call runs
  std::thread thread_;
};

}  // namespace reprise::router
