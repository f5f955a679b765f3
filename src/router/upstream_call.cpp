#include "router/upstream_call.h"

namespace reprise::router {

UpstreamCall::UpstreamCall(const std::string& host, int port, std::string method, std::string path,
                           httplib::Headers headers, std::string body, std::string content_type) {
  thread_ = std::thread([this, host, port, method = std::move(method), path = std::move(path),
                         headers = std::move(headers), body = std::move(body),
                         content_type = std::move(content_type)]() mutable {
    httplib::Client client(host, port);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(600, 0);  // a long prompt's prefill may take minutes on a CPU
    client.set_write_timeout(30, 0);
    client.set_tcp_nodelay(true);
    {
      std::lock_guard lock(mutex_);
      if (cancelled_) {
        failed_ = done_ = true;
        changed_.notify_all();
        return;
      }
      client_ = &client;
    }
    httplib::Request request;
    request.method = method;
    request.path = path;
    request.headers = std::move(headers);
    if (!body.empty()) {
      request.body = std::move(body);
      request.set_header("Content-Type", content_type);
    }
    request.response_handler = [this](const httplib::Response& response) {
      std::lock_guard lock(mutex_);
      status_ = response.status;
      content_type_ = response.get_header_value("Content-Type");
      headers_ = true;
      changed_.notify_all();
      return !cancelled_;
    };
    request.content_receiver = [this](const char* data, size_t size, uint64_t, uint64_t) {
      std::lock_guard lock(mutex_);
      chunks_.emplace_back(data, size);
      changed_.notify_all();
      return !cancelled_;
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    bool ok = client.send(request, response, error);
    std::lock_guard lock(mutex_);
    client_ = nullptr;
    if (ok && !headers_) {  // an answer without a body reaches no handler above
      status_ = response.status;
      content_type_ = response.get_header_value("Content-Type");
      headers_ = true;
    }
    failed_ = !ok;
    done_ = true;
    changed_.notify_all();
  });
}

UpstreamCall::~UpstreamCall() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

bool UpstreamCall::WaitForHeaders() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return headers_ || done_; });
  return headers_;
}

std::optional<std::string> UpstreamCall::NextChunk() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !chunks_.empty() || done_; });
  if (chunks_.empty()) return std::nullopt;
  std::string chunk = std::move(chunks_.front());
  chunks_.pop_front();
  return chunk;
}

bool UpstreamCall::ended_cleanly() const {
  std::lock_guard lock(mutex_);
  return done_ && !failed_;
}

std::string UpstreamCall::ReadAll() {
  std::string body;
  while (std::optional<std::string> chunk = NextChunk()) body += *chunk;
  return body;
}

void UpstreamCall::Cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  // Closes the socket under a blocked read, so that a replica still computing hears of it now.
  if (client_ != nullptr && !done_) client_->stop();
}

}  // namespace reprise::router
