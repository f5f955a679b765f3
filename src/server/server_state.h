// What every route handler shares: the options, the metrics, and the backend once it is ready
// (the server listens while the engine still loads; /health says 503 until then).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/inference_backend.h"
#include "server/metrics.h"
#include "server/tenants.h"

namespace reprise::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  std::string served_model_name = "reprise";
  std::vector<ApiKeyEntry> api_keys;  // empty: no authentication, one anonymous tenant
  std::string cache_secret;           // keys tenants' cache salts; empty: a fresh random one
  bool share_cache_across_tenants = false;
  bool metrics_require_auth = false;  // /metrics needs a key too
  std::string chat_template;          // empty: the model's own
  size_t max_body_bytes = 16u << 20;
  int http_threads = 64;                    // worker threads started up front; more start on demand
  size_t max_connections = 1024;            // open connections in all; more are answered 503
  size_t max_connections_per_client = 128;  // open connections from one address
  std::chrono::milliseconds read_timeout{5000};  // request header deadline, body idle timeout
  std::vector<std::string> allowed_origins;      // CORS ("*": any); empty: no CORS headers
};

// The backend and what the server caches about it, set once.
struct ReadyBackend {
  std::shared_ptr<InferenceBackend> backend;
  ModelInfo info;
};

class ServerState {
 public:
  explicit ServerState(HttpServerOptions options);

  const HttpServerOptions& options() const { return options_; }
  ServerMetrics& metrics() { return metrics_; }
  TenantRegistry& tenants() { return tenants_; }
  const TenantRegistry& tenants() const { return tenants_; }
  // The tenant the Authorization header names, or a 401 ApiError.
  const Tenant& Caller(const std::string& authorization) const;

  // Reads Info(), then makes the backend visible to the routes.
  void SetBackend(std::shared_ptr<InferenceBackend> backend);
  // Null while loading.
  std::shared_ptr<const ReadyBackend> Ready() const;
  // The ready backend, or a 503 ApiError while loading.
  std::shared_ptr<const ReadyBackend> RequireReady() const;

  // A fresh response id: "<prefix>-<boot nonce><counter>".
  std::string NextId(const char* prefix);

  // Set once the server stops: waiting handlers give up.
  bool stopping() const { return stopping_.load(); }
  void SetStopping() { stopping_.store(true); }
  // Set when a shutdown drains: new requests are refused, running ones go on.
  bool draining() const { return draining_.load(); }
  void SetDraining() { draining_.store(true); }

 private:
  HttpServerOptions options_;
  ServerMetrics metrics_;
  TenantRegistry tenants_;
  mutable std::mutex mutex_;
  std::shared_ptr<const ReadyBackend> ready_;
  std::string nonce_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace reprise::server
