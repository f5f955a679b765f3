// `reprise route`: an OpenAI-compatible front for several `reprise serve` replicas. Each
// generation request goes to the replica that the routing policy picks from the prompt's block
// keys (computed as the replicas compute them) and the replicas' load; the answer, streamed or
// whole, is passed through unchanged. A replica that cannot be reached before any byte came is
// skipped and the request retried once on another.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "router/kv_event_feed.h"
#include "router/prefix_directory.h"
#include "router/replica_set.h"
#include "router/request_keys.h"
#include "router/routing_policy.h"
#include "server/parsed_request.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace reprise::server {
class WideBacklogServer;
}

namespace reprise::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> replicas;  // http://HOST:PORT
  std::string model_path;             // the replicas' model: its tokenizer and metadata only
  std::string chat_template;          // as given to the replicas' --chat-template
  RoutingPolicy policy = RoutingPolicy::kPrefix;
  PolicyConfig policy_config;
  std::chrono::milliseconds health_interval{1000};
  // The replicas' KV events (serve --kv-events-redis-url): empty for none (the router then
  // knows only its own record of where it sent which prompt).
  std::string kv_redis_url;
  std::string kv_redis_password_file;
  std::string kv_redis_password;  // REDIS_PASSWORD; never logged
  std::string kv_events_stream = "reprise:kv-events";
  // The replicas' tenants (their --api-key, --api-keys-file and --cache-secret-file), so that
  // keys carry each tenant's salt as the replicas' do.
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::string cache_secret_file;
  bool share_cache_across_tenants = false;
  size_t directory_keys = size_t{1} << 20;
  int http_threads = 64;
  size_t max_body_bytes = size_t{32} << 20;
};

class Router {
 public:
  explicit Router(RouterOptions options);  // loads the tokenizer; throws Error
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  int Bind();    // returns the port
  void Start();  // health checks and the listening thread
  void Stop();

  PrefixDirectory& directory() { return directory_; }
  std::string RenderMetrics() const;

 private:
  struct Choice {
    size_t replica = 0;
    size_t cached_tokens = 0;  // expected
  };
  void RegisterRoutes();
  void HandleGeneration(server::ApiKind kind, const httplib::Request& request,
                        httplib::Response& response);
  void HandlePassThrough(const httplib::Request& request, httplib::Response& response);
  bool Choose(const RequestKeys& keys, const std::vector<bool>& excluded, Choice& choice);
  // Sends to replicas until one answers (at most two tries); false when none could be reached.
  bool Forward(const httplib::Request& request, httplib::Response& response,
               const RequestKeys* keys);
  // Replica i's block list (GET /v1/cache/blocks); nullopt, logged, when it cannot be had.
  std::optional<CacheBlockList> FetchSnapshot(int i);

  RouterOptions options_;
  RequestKeyer keyer_;
  ReplicaSet replicas_;
  PrefixDirectory directory_;
  std::unique_ptr<KvEventFeed> feed_;  // null without --kv-redis-url
  std::unique_ptr<server::WideBacklogServer> http_;
  std::thread thread_;
  int port_ = -1;
  std::string snapshot_authorization_;  // "Bearer KEY" of an admin of the replicas, or empty

  std::mutex affinity_mutex_;
  struct Affinity {
    size_t replica = 0;
    size_t prompt_tokens = 0;
  };
  std::unordered_map<std::string, Affinity> affinity_;  // prompt_cache_key -> last placement
  std::atomic<uint64_t> turn_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> unroutable_{0};      // no replica could take the request
  std::atomic<uint64_t> broken_streams_{0};  // a replica failed after bytes were sent
  std::atomic<uint64_t> routed_prompt_tokens_{0};
  std::atomic<uint64_t> expected_cached_tokens_{0};
};

}  // namespace reprise::router
