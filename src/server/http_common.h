// Pieces of the HTTP front shared by `reprise serve` and `reprise route`: a listening server
// with a wide backlog, and the OpenAI-style body for errors httplib produces itself.
#pragma once

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "server/api_error.h"

namespace reprise::server {

// httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once overflows it
// and some connections die. Listening again on the bound socket widens the queue (Linux).
class WideBacklogServer : public httplib::Server {
 public:
  void WidenBacklog(int backlog) {
    socket_t sock = svr_sock_;
    if (sock != INVALID_SOCKET && ::listen(sock, backlog) != 0) {
      spdlog::warn("could not widen the listen backlog to {}", backlog);
    }
  }
};

// The body for an error status that httplib produced itself (no route, body too large, ...).
ApiError DefaultError(const std::string& method, const std::string& path, int status,
                      size_t max_body_bytes);

}  // namespace reprise::server
