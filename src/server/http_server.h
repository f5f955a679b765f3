// The OpenAI-compatible HTTP server: routes, authentication, error bodies, body-size limit and
// the listening thread. It can listen before the engine is loaded (/health answers 503 until
// SetBackend).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "server/completion_handler.h"
#include "server/server_state.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace reprise::server {

class HardenedHttpServer;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the chosen one when options.port is 0).
  // Throws reprise::Error when it cannot bind.
  int Bind();
  // The name /health reports (the replica id of KV events), so a router can tell which events
  // are this server's. Call before Start().
  void SetReplicaId(std::string id) { replica_id_ = std::move(id); }
  // Serves on a background thread. Call after Bind().
  void Start();
  // Makes the routes serve with `backend`; /health turns 200.
  void SetBackend(std::shared_ptr<InferenceBackend> backend);
  // Refuses new requests (503 with Retry-After; /health says "draining") and waits up to
  // `timeout` for the requests being answered to finish; true when they all did. Stop() next.
  bool Drain(std::chrono::milliseconds timeout);
  // Stops listening, ends streams, cancels waiting requests, joins the thread. Idempotent.
  void Stop();

  int port() const { return port_; }
  ServerState& state() { return state_; }

 private:
  void RegisterRoutes();
  // Runs a handler with the error boundary: ApiError -> its status and body, anything else ->
  // 500 with a body; never lets an exception out.
  template <typename Fn>
  void Guard(const httplib::Request& request, httplib::Response& response, Fn&& fn);
  bool Authorized(const httplib::Request& request) const;
  // CORS: whether `origin` is one of --allowed-origins (or they hold "*").
  bool OriginAllowed(const std::string& origin) const;
  // Answers a CORS preflight (OPTIONS): 204 with the allowed methods and headers for an
  // allowed origin, 403 for another.
  void HandlePreflight(const httplib::Request& request, httplib::Response& response) const;

  void HandleModels(httplib::Response& response);
  void HandleModel(const std::string& id, httplib::Response& response);
  nlohmann::json ModelJson() const;  // the served model, as /v1/models lists it
  void HandleHealth(httplib::Response& response);
  void HandleMetrics(httplib::Response& response);
  void HandleTokenize(const httplib::Request& request, httplib::Response& response);
  void HandleDetokenize(const httplib::Request& request, httplib::Response& response);
  void HandleTasks(httplib::Response& response);
  void HandleCacheStats(const httplib::Request& request, httplib::Response& response);
  void HandleCacheClear(const httplib::Request& request, httplib::Response& response);
  void HandleCacheBlocks(const httplib::Request& request, httplib::Response& response);

  ServerState state_;
  CompletionHandler completions_;
  std::unique_ptr<HardenedHttpServer> http_;
  std::thread thread_;
  std::atomic<bool> listen_finished_{false};  // the listening thread has left httplib's loop
  std::string replica_id_;
  int port_ = -1;
};

}  // namespace reprise::server
