#include "server/http_connection.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "server/api_error.h"
#include "server/sse.h"

namespace reprise::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadBufferBytes = 16 * 1024;
constexpr milliseconds kPollSlice{100};
// Chunked bodies carry framing beyond their payload: allowed on top of max_body_bytes.
constexpr size_t kChunkFramingSlack = 64 * 1024;

thread_local ConnectionContext* current_connection = nullptr;

int PollOne(int sock, short events, milliseconds timeout) {
  pollfd fd{sock, events, 0};
  int count;
  do {
    count = ::poll(&fd, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  } while (count < 0 && errno == EINTR);
  if (count <= 0) return count;
  return fd.revents;
}

void AddressOf(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    port = ntohs(in.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    port = ntohs(in6.sin6_port);
  }
  ip = text;
}

std::string PeerAddress(int sock) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  std::string ip;
  int port = 0;
  AddressOf(address, ip, port);
  return ip;
}

// A whole answer written without httplib (before a request was parsed): status, Retry-After,
// an OpenAI-style error body, and Connection: close.
void WriteRefusal(ConnectionStream& stream, int status, const char* reason, const ApiError& error) {
  std::string body = JsonText(error.ToJson());
  std::string text = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Retry-After: 1\r\nConnection: close\r\n\r\n{}",
      status, reason, body.size(), body);
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = stream.write(text.data() + written, text.size() - written);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

// Sets the thread's current connection for a scope.
class ScopedConnection {
 public:
  explicit ScopedConnection(ConnectionContext* context) { current_connection = context; }
  ~ScopedConnection() { current_connection = nullptr; }
  ScopedConnection(const ScopedConnection&) = delete;
  ScopedConnection& operator=(const ScopedConnection&) = delete;
};

}  // namespace

ConnectionContext* CurrentConnection() { return current_connection; }

int CheckBodyFraming(const httplib::Request& request, size_t max_body_bytes, std::string& message) {
  const std::string& method = request.method;
  bool has_length = request.has_header("Content-Length");
  bool has_encoding = request.has_header("Transfer-Encoding");
  if (has_encoding) {
    std::string encoding = request.get_header_value("Transfer-Encoding");
    std::transform(encoding.begin(), encoding.end(), encoding.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (encoding != "chunked" || request.get_header_value_count("Transfer-Encoding") != 1) {
      message = "only 'Transfer-Encoding: chunked' is accepted";
      return 400;
    }
    if (has_length) {
      message = "a request must not carry both Content-Length and Transfer-Encoding";
      return 400;
    }
    return 0;
  }
  if (!has_length) {
    if (method == "POST" || method == "PUT" || method == "PATCH") {
      message = "a request body needs a Content-Length header (or chunked transfer encoding)";
      return 411;
    }
    return 0;
  }
  size_t count = request.get_header_value_count("Content-Length");
  std::string text = request.get_header_value("Content-Length");
  for (size_t i = 1; i < count; ++i) {
    if (request.get_header_value("Content-Length", i) != text) {
      message = "the request carries Content-Length headers that disagree";
      return 400;
    }
  }
  bool digits = !text.empty() && text.size() <= 19 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    message = "Content-Length must be a decimal number of bytes";
    // A long run of digits is a number too large for any body, not a malformed one.
    bool long_number = text.size() > 19 && std::all_of(text.begin(), text.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
    if (!long_number) return 400;
    message = fmt::format("the request body is larger than the limit of {} bytes", max_body_bytes);
    return 413;
  }
  uint64_t length = std::stoull(text);
  if (length > max_body_bytes) {
    message = fmt::format("the request body is larger than the limit of {} bytes", max_body_bytes);
    return 413;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// ConnectionStream

ConnectionStream::ConnectionStream(int sock, const ConnectionLimits& limits)
    : sock_(sock), limits_(limits), buffer_(kReadBufferBytes) {
  BeginHeader();
}

void ConnectionStream::BeginHeader() {
  header_phase_ = true;
  header_deadline_ = Clock::now() + limits_.header_timeout;
  body_bytes_ = 0;
  body_limit_hit_ = false;
}

void ConnectionStream::BeginBody() { header_phase_ = false; }

bool ConnectionStream::WaitReadable() const {
  milliseconds timeout = limits_.body_timeout;
  if (header_phase_) {
    timeout = std::chrono::duration_cast<milliseconds>(header_deadline_ - Clock::now());
    if (timeout.count() <= 0) return false;
  }
  return PollOne(sock_, POLLIN, timeout) > 0;
}

bool ConnectionStream::is_readable() const { return begin_ < end_ || WaitReadable(); }

bool ConnectionStream::is_writable() const {
  return PollOne(sock_, POLLOUT, limits_.write_timeout) > 0 && !PeerGone();
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (!header_phase_) {
    size_t limit = limits_.max_body_bytes + kChunkFramingSlack;
    if (body_bytes_ >= limit) {
      body_limit_hit_ = true;
      return -1;
    }
    size = std::min(size, limit - body_bytes_);
  }
  if (begin_ == end_) {
    if (!WaitReadable()) return -1;
    ssize_t n;
    do {
      n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    begin_ = 0;
    end_ = static_cast<size_t>(n);
  }
  size_t count = std::min(size, end_ - begin_);
  std::memcpy(ptr, buffer_.data() + begin_, count);
  begin_ += count;
  if (!header_phase_) body_bytes_ += count;
  return static_cast<ssize_t>(count);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (PollOne(sock_, POLLOUT, limits_.write_timeout) <= 0) return -1;
  ssize_t n;
  do {
    n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    AddressOf(address, ip, port);
  }
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    AddressOf(address, ip, port);
  }
}

bool ConnectionStream::WaitForRequest(milliseconds idle, const std::function<bool()>& give_up) {
  if (begin_ < end_) return true;
  Clock::time_point deadline = Clock::now() + idle;
  while (Clock::now() < deadline) {
    int events = PollOne(sock_, POLLIN, kPollSlice);
    if (events < 0) return false;
    // Readable: a request, or the client's close (the header read then sees EOF).
    if (events > 0) return !PeerGone();
    if (give_up()) return false;
  }
  return false;
}

bool ConnectionStream::PeerGone() const {
  char byte;
  ssize_t n = ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void ConnectionStream::LingeringClose() {
  ::shutdown(sock_, SHUT_WR);
  // Closing with unread bytes makes the kernel send a reset, which can destroy the answer before
  // the client reads it; a client that uploads a body over the limit is still writing it. So
  // read and drop what comes for a while: bounded by time and by several times the body limit
  // (a client over the limit is usually over by little), never by the limit itself.
  Clock::time_point deadline = Clock::now() + milliseconds(500);
  const size_t budget = std::max<size_t>(4 * limits_.max_body_bytes, size_t{64} << 20);
  size_t discarded = 0;
  while (Clock::now() < deadline && discarded < budget) {
    milliseconds left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (PollOne(sock_, POLLIN, left) <= 0) break;
    ssize_t n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
    if (n <= 0) break;
    discarded += static_cast<size_t>(n);
  }
}

// ---------------------------------------------------------------------------------------------
// ConnectionCounter

bool ConnectionCounter::TryOpen(const std::string& client) {
  std::lock_guard lock(mutex_);
  size_t& from_client = by_client_[client];
  if (open_ >= limits_.max_connections || from_client >= limits_.max_connections_per_client) {
    if (from_client == 0) by_client_.erase(client);
    ++refused_;
    return false;
  }
  ++from_client;
  ++open_;
  return true;
}

void ConnectionCounter::Close(const std::string& client) {
  std::lock_guard lock(mutex_);
  auto it = by_client_.find(client);
  if (it != by_client_.end() && --it->second == 0) by_client_.erase(it);
  if (open_ > 0) --open_;
}

void ConnectionCounter::RequestStarted() {
  std::lock_guard lock(mutex_);
  ++in_flight_;
}

void ConnectionCounter::RequestFinished() {
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ > 0) --in_flight_;
  }
  idle_.notify_all();
}

size_t ConnectionCounter::open() const {
  std::lock_guard lock(mutex_);
  return open_;
}

size_t ConnectionCounter::requests_in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

uint64_t ConnectionCounter::refused() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

bool ConnectionCounter::WaitForNoRequests(milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [this] { return in_flight_ == 0; });
}

// ---------------------------------------------------------------------------------------------
// GrowingThreadPool

GrowingThreadPool::GrowingThreadPool(size_t initial_threads, size_t max_threads)
    : max_threads_(std::max<size_t>(1, max_threads)) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < std::min(initial_threads, max_threads_); ++i) {
    threads_.emplace_back([this] { Work(); });
  }
}

GrowingThreadPool::~GrowingThreadPool() { shutdown(); }

void GrowingThreadPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { Work(); });
    }
  }
  wake_.notify_one();
}

void GrowingThreadPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (std::thread& thread : threads) thread.join();
}

void GrowingThreadPool::Work() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_;
    wake_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // shutting down with nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

// ---------------------------------------------------------------------------------------------
// HardenedHttpServer

HardenedHttpServer::HardenedHttpServer(ConnectionLimits limits, std::function<bool()> draining)
    : limits_(std::move(limits)), draining_(std::move(draining)), counter_(limits_) {}

void HardenedHttpServer::WidenBacklog(int backlog) {
  socket_t sock = svr_sock_;
  if (sock != INVALID_SOCKET && ::listen(sock, backlog) != 0) {
    spdlog::warn("could not widen the listen backlog to {}", backlog);
  }
}

bool HardenedHttpServer::process_and_close_socket(socket_t sock) {
  ServeConnection(sock);
  ::close(sock);
  return true;
}

void HardenedHttpServer::ServeConnection(int sock) {
  std::string client = PeerAddress(sock);
  ConnectionStream stream(sock, limits_);
  if (!counter_.TryOpen(client)) {
    WriteRefusal(
        stream, 503, "Service Unavailable",
        ApiError::Unavailable("too many open connections; retry later", "too_many_connections"));
    stream.LingeringClose();
    return;
  }
  ConnectionContext context{&stream};
  ScopedConnection scoped(&context);
  auto give_up = [this] { return svr_sock_ == INVALID_SOCKET || draining_(); };
  for (size_t served = 0; served < limits_.keep_alive_max_requests; ++served) {
    if (!stream.WaitForRequest(limits_.keep_alive_timeout, give_up)) break;
    if (draining_()) {
      WriteRefusal(stream, 503, "Service Unavailable",
                   ApiError::Unavailable("the server is shutting down", "shutting_down"));
      context.close_after_response = true;
      break;
    }
    stream.BeginHeader();
    context.close_after_response = false;
    bool started = false;
    bool connection_closed = false;
    bool last = served + 1 == limits_.keep_alive_max_requests;
    bool ok = process_request(stream, last, connection_closed, [&](httplib::Request&) {
      stream.BeginBody();
      started = true;
      counter_.RequestStarted();
    });
    if (started) counter_.RequestFinished();
    if (!ok || connection_closed || context.close_after_response) break;
  }
  if (context.close_after_response) stream.LingeringClose();
  ::shutdown(sock, SHUT_RDWR);
  counter_.Close(client);
}

}  // namespace reprise::server
