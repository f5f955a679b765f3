// What every route handler shares: the options, the metrics, and the backend once it is ready
// (the server listens while the engine still loads; /health says 503 until then).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/inference_backend.h"
#include "server/metrics.h"

namespace reprise::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port
  std::string served_model_name = "reprise";
  std::string api_key;              // empty: no authentication
  std::string chat_template;        // empty: the model's own
  size_t max_body_bytes = 16u << 20;
  int http_threads = 64;
  std::vector<std::string> allowed_origins;  // CORS ("*": any); empty: no CORS headers
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

 private:
  HttpServerOptions options_;
  ServerMetrics metrics_;
  mutable std::mutex mutex_;
  std::shared_ptr<const ReadyBackend> ready_;
  std::string nonce_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> stopping_{false};
};

}  // namespace reprise::server
