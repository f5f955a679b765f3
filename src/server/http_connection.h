// The connection layer under the HTTP routes: a socket stream with a deadline for the request
// header and an idle timeout for the body, the keep-alive loop that answers pipelined requests in
// order, and the bounds on open connections (per client address and in all). httplib's own loop
// waits 30 s per read, drops pipelined requests it buffered, and holds one pool thread per
// stalled client; this one serves every connection from a pool that grows up to the bound.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace reprise::server {

struct ConnectionLimits {
  size_t max_connections = 1024;                   // open connections in all
  size_t max_connections_per_client = 128;         // open connections from one client address
  std::chrono::milliseconds header_timeout{5000};  // from a request's first byte to its blank line
  std::chrono::milliseconds body_timeout{5000};    // longest wait for the next body bytes
  std::chrono::milliseconds write_timeout{10000};  // longest wait to write response bytes
  std::chrono::milliseconds keep_alive_timeout{5000};  // idle wait for the next request
  size_t keep_alive_max_requests = 1000;               // requests per connection
  size_t max_body_bytes = 16u << 20;                   // also bounds chunked bodies
};

// A socket read through a buffer (so that pipelined requests are kept, not lost), with the
// deadlines of ConnectionLimits. Used by one thread.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int sock, const ConnectionLimits& limits);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

  // Waits until the next request's first byte is here (buffered bytes count); false when the
  // client closed, the idle timeout passed or give_up() said so (polled every 100 ms).
  bool WaitForRequest(std::chrono::milliseconds idle, const std::function<bool()>& give_up);
  // The header phase: every read must finish before now + header_timeout.
  void BeginHeader();
  // The body phase: each read waits at most body_timeout; at most max_body_bytes (plus chunk
  // framing) are read before reads fail.
  void BeginBody();
  bool body_limit_hit() const { return body_limit_hit_; }
  // True when the client has closed or reset the connection (nothing blocks).
  bool PeerGone() const;
  // Closes after a refused request whose body may still be arriving: stops writing, discards
  // what comes for a short while so that the client reads the answer instead of a reset.
  void LingeringClose();

 private:
  // Waits for the socket to be readable within the current phase; false on timeout.
  bool WaitReadable() const;

  int sock_;
  const ConnectionLimits& limits_;
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool header_phase_ = true;
  std::chrono::steady_clock::time_point header_deadline_;
  size_t body_bytes_ = 0;
  bool body_limit_hit_ = false;
};

// What the routes may know about the connection their request came on (the thread that runs a
// route serves that connection and nothing else meanwhile).
struct ConnectionContext {
  ConnectionStream* stream = nullptr;
  bool close_after_response = false;  // the request's body was not read: no next request
};

// The connection the calling thread serves, or null (a thread that is not an HTTP worker).
ConnectionContext* CurrentConnection();

// Checks how a request says its body ends, before the body is read: a POST, PUT or PATCH needs
// Content-Length (411 without) or Transfer-Encoding: chunked (alone); Content-Length must be a
// decimal number (400) no larger than `max_body_bytes` (413). Returns the status to answer with
// (0: fine) and sets `message`.
int CheckBodyFraming(const httplib::Request& request, size_t max_body_bytes, std::string& message);

// Open connections by client address and in all, and requests being answered.
class ConnectionCounter {
 public:
  explicit ConnectionCounter(const ConnectionLimits& limits) : limits_(limits) {}

  // Counts a new connection from `client`; false (nothing counted) when a bound is reached.
  bool TryOpen(const std::string& client);
  void Close(const std::string& client);
  void RequestStarted();
  void RequestFinished();

  size_t open() const;
  size_t requests_in_flight() const;
  uint64_t refused() const;
  // Waits until no request is being answered or `timeout` passed; true when none is.
  bool WaitForNoRequests(std::chrono::milliseconds timeout) const;

 private:
  const ConnectionLimits& limits_;
  mutable std::mutex mutex_;
  mutable std::condition_variable idle_;
  std::map<std::string, size_t> by_client_;
  size_t open_ = 0;
  size_t in_flight_ = 0;
  uint64_t refused_ = 0;
};

// httplib's task queue: a pool that starts a thread whenever none is idle, up to `max_threads`,
// so that stalled clients never keep others from a thread while there is room for both.
class GrowingThreadPool : public httplib::TaskQueue {
 public:
  GrowingThreadPool(size_t initial_threads, size_t max_threads);
  ~GrowingThreadPool() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void Work();

  size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

// httplib::Server with the connection layer above. Reads and writes every connection itself and
// gives each parsed request to httplib's routing (process_request).
class HardenedHttpServer : public httplib::Server {
 public:
  // `draining()`: new requests are refused with 503 and idle connections close.
  HardenedHttpServer(ConnectionLimits limits, std::function<bool()> draining);

  // httplib 0.11 listens with a backlog of 5: a burst of clients overflows it. Listening again
  // on the bound socket widens the queue (Linux).
  void WidenBacklog(int backlog);
  const ConnectionCounter& connections() const { return counter_; }
  const ConnectionLimits& limits() const { return limits_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  void ServeConnection(int sock);

  ConnectionLimits limits_;
  std::function<bool()> draining_;
  ConnectionCounter counter_;
};

}  // namespace reprise::server
