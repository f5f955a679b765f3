#include "router/router.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "kvevents/kv_snapshot.h"
#include "redis/redis_url.h"
#include "router/upstream_call.h"
#include "server/api_error.h"
#include "server/http_common.h"
#include "server/json_fields.h"
#include "server/settings.h"

namespace reprise::router {
namespace {

using server::ApiError;

void SetJson(httplib::Response& response, const nlohmann::json& body, int status = 200) {
  response.status = status;
  response.set_content(body.dump(), "application/json");
}

void SetError(httplib::Response& response, const ApiError& error) {
  SetJson(response, error.ToJson(), error.status());
}

template <typename Fn>
void Guard(httplib::Response& response, Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& error) {
    SetError(response, error);
  } catch (const std::exception& error) {
    spdlog::error("router: {}", error.what());
    SetError(response, ApiError::Internal(fmt::format("internal error: {}", error.what())));
  }
}

std::string Label(const std::string& url) { return fmt::format("replica=\"{}\"", url); }

}  // namespace

Router::Router(RouterOptions options)
    : options_(std::move(options)),
      keyer_(options_.model_path, options_.chat_template),
      replicas_(options_.replicas),
      directory_(options_.directory_keys),
      http_(std::make_unique<server::WideBacklogServer>()) {
  if (replicas_.size() == 0) throw Error("give at least one --replica URL");
  if (replicas_.size() > static_cast<size_t>(kMaxReplicas)) {
    throw Error(fmt::format("at most {} replicas", kMaxReplicas));
  }
  if (!options_.api_keys.empty() || !options_.api_keys_file.empty()) {
    server::ServerSettings settings;
    settings.api_keys = options_.api_keys;
    settings.api_keys_file = options_.api_keys_file;
    settings.cache_secret_file = options_.cache_secret_file;
    if (settings.cache_secret_file.empty() && !options_.share_cache_across_tenants) {
      throw Error(
          "API keys on route need the replicas' --cache-secret-file: tenants' salts derive "
          "from it");
    }
    server::TenantSetup setup = server::MakeTenantSetup(settings);
    // The replicas' snapshots are for admins: the router reads them with the first admin key.
    // Their KV settings and load it reads with any key (an admin's when there is one).
    for (const server::ApiKeyEntry& entry : setup.keys) {
      if (entry.role == server::TenantRole::kAdmin) {
        snapshot_authorization_ = "Bearer " + entry.key;
        break;
      }
    }
    replicas_.SetAuthorization(!snapshot_authorization_.empty() ? snapshot_authorization_
                               : setup.keys.empty()             ? std::string()
                                                                : "Bearer " + setup.keys[0].key);
    keyer_.SetTenants(std::make_unique<server::TenantRegistry>(
        setup.keys, setup.cache_secret, options_.share_cache_across_tenants));
  }
  if (!options_.kv_redis_url.empty()) {
    redis::RedisEndpoint endpoint = redis::ParseRedisUrl(options_.kv_redis_url);
    redis::ResolvePassword(endpoint, options_.kv_redis_password_file, options_.kv_redis_password);
    redis::RedisClientOptions client_options;
    client_options.timeouts.io = std::chrono::milliseconds(2000);  // above XREAD's block time
    spdlog::info("KV events: reading stream '{}' at {}", options_.kv_events_stream,
                 endpoint.Describe());
    feed_ = std::make_unique<KvEventFeed>(
        options_.kv_events_stream,
        std::make_shared<redis::RedisClient>(std::move(endpoint), client_options), directory_,
        [this](const std::string& id) { return replicas_.IndexOfId(id); },
        [this] { return keyer_.root(); }, [this](int i) { return FetchSnapshot(i); });
  }
  RegisterRoutes();
}

Router::~Router() { Stop(); }

int Router::Bind() {
  http_->new_task_queue = [threads = options_.http_threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  http_->set_tcp_nodelay(true);
  port_ = options_.port == 0
              ? http_->bind_to_any_port(options_.host)
              : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ < 0) {
    throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this host?)",
                            options_.host, options_.port));
  }
  http_->WidenBacklog(1024);
  return port_;
}

void Router::Start() {
  replicas_.Start(options_.health_interval, [this](size_t i, const ReplicaKvSettings& settings) {
    // A replica that comes (back) up may have restarted with an empty cache. When its events
    // flow they say so themselves (a new instance), and a replica that was only slow to answer
    // keeps what it holds; its snapshot (fetched on the feed's thread) says what it holds now.
    if (!feed_ || !feed_->Live(static_cast<int>(i))) directory_.ClearReplica(static_cast<int>(i));
    if (feed_) feed_->RequestSnapshot(static_cast<int>(i));
    if (settings.block_size <= 0 || settings.numerics.empty()) {
      spdlog::warn("replica {} did not report its KV settings; routing it by load only",
                   replicas_.at(i).address.url);
      return;
    }
    try {
      if (!keyer_.Configure(settings.kv_type, settings.block_size, settings.numerics)) {
        spdlog::warn(
            "replica {} uses block size {}, KV {} and kernels {}, unlike the first replica: its "
            "cached prefixes are not counted right",
            replicas_.at(i).address.url, settings.block_size, settings.kv_type, settings.numerics);
      }
    } catch (const Error& error) {
      spdlog::warn("replica {}: {}", replicas_.at(i).address.url, error.what());
    }
  });
  if (feed_) feed_->Start();
  thread_ = std::thread([this] {
    if (!http_->listen_after_bind())
      spdlog::error("the router's HTTP server stopped with an error");
  });
}

void Router::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  if (feed_) feed_->Stop();
  replicas_.Stop();
}

void Router::RegisterRoutes() {
  using httplib::Request;
  using httplib::Response;
  httplib::Server::HandlerWithResponse on_error = [this](const Request& request,
                                                         Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    SetError(response, server::DefaultError(request.method, request.path, response.status,
                                            options_.max_body_bytes));
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(std::move(on_error));
  http_->set_exception_handler([](const Request&, Response& response, std::exception_ptr) {
    SetError(response, ApiError::Internal("internal error"));
  });
  auto generation = [this](server::ApiKind kind) {
    return [this, kind](const Request& request, Response& response) {
      Guard(response, [&] { HandleGeneration(kind, request, response); });
    };
  };
  http_->Post("/v1/chat/completions", generation(server::ApiKind::kChat));
  http_->Post("/v1/completions", generation(server::ApiKind::kCompletion));
  http_->Post("/", generation(server::ApiKind::kRtpGenerate));
  http_->Post("/generate", generation(server::ApiKind::kRtpGenerate));
  auto pass = [this](const Request& request, Response& response) {
    Guard(response, [&] { HandlePassThrough(request, response); });
  };
  http_->Get("/v1/models", pass);
  http_->Get("/v1/tasks", pass);
  http_->Post("/tokenize", pass);
  http_->Post("/detokenize", pass);
  // Clears every replica (and what the router believes they hold); answers the summed counts.
  http_->Post("/v1/cache/clear", [this](const Request& request, Response& response) {
    Guard(response, [&] {
      size_t cleared = 0;
      int answered = 0;
      for (size_t i = 0; i < replicas_.size(); ++i) {
        const Replica& replica = replicas_.at(i);
        if (!replica.healthy) continue;
        httplib::Client client(replica.address.host, replica.address.port);
        client.set_connection_timeout(1, 0);
        client.set_read_timeout(30, 0);
        httplib::Headers headers;
        if (request.has_header("Authorization")) {
          headers.emplace("Authorization", request.get_header_value("Authorization"));
        }
        auto result = client.Post("/v1/cache/clear", headers,
                                  request.body.empty() ? "{}" : request.body, "application/json");
        if (!result || result->status != 200) continue;
        nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
        if (body.is_object()) cleared += body.value("cleared_blocks", size_t{0});
        ++answered;
        directory_.ClearReplica(static_cast<int>(i));
      }
      if (answered == 0) {
        throw ApiError::Unavailable("no replica is available to answer", "no_replica");
      }
      SetJson(response, {{"cleared_blocks", cleared}, {"replicas", answered}});
    });
  });
  http_->Get("/health", [this](const Request&, Response& response) {
    nlohmann::json list = nlohmann::json::array();
    size_t healthy = 0;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      const Replica& replica = replicas_.at(i);
      healthy += replica.healthy ? 1 : 0;
      list.push_back({{"url", replica.address.url},
                      {"healthy", replica.healthy.load()},
                      {"load", replica.Load()}});
    }
    if (healthy == 0) {
      SetError(response, ApiError::Unavailable("no replica is healthy", "no_healthy_replica"));
      return;
    }
    SetJson(response, {{"status", "ok"}, {"replicas", std::move(list)}});
  });
  http_->Get("/metrics", [this](const Request&, Response& response) {
    response.set_content(RenderMetrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

bool Router::Choose(const RequestKeys& keys, const std::vector<bool>& excluded, Choice& choice) {
  std::vector<Candidate> candidates;
  std::optional<Affinity> affinity;
  if (!keys.affinity.empty()) {
    std::lock_guard lock(affinity_mutex_);
    if (auto it = affinity_.find(keys.affinity); it != affinity_.end()) affinity = it->second;
  }
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& replica = replicas_.at(i);
    if (excluded[i] || !replica.healthy) continue;
    Candidate c{static_cast<int>(i), 0, replica.Load(), directory_.HeldBy(static_cast<int>(i))};
    // Its memory and its own disk tier: a block on its disk is loaded, not computed. (The shared
    // tier is every replica's: it tells none apart.)
    c.cached_tokens = directory_.MatchedBlocks(keys.block_keys, static_cast<int>(i),
                                               {KvEventTier::kMemory, KvEventTier::kDisk}) *
                      static_cast<size_t>(keys.block_size);
    if (affinity && affinity->replica == i) {
      // The client says this request shares its prefix with the earlier ones under its key.
      c.cached_tokens =
          std::max(c.cached_tokens, std::min(keys.prompt_tokens, affinity->prompt_tokens));
    }
    candidates.push_back(c);
  }
  if (candidates.empty()) return false;
  size_t pick = ChooseCandidate(options_.policy, candidates, keys.prompt_tokens,
                                options_.policy_config, turn_.fetch_add(1));
  choice.replica = static_cast<size_t>(candidates[pick].replica);
  spdlog::debug("route: {} prompt tokens -> {} (expects {} cached, load {}, holds {} blocks)",
                keys.prompt_tokens, replicas_.at(choice.replica).address.url,
                candidates[pick].cached_tokens, candidates[pick].load,
                candidates[pick].held_blocks);
  choice.cached_tokens = candidates[pick].cached_tokens;
  return true;
}

void Router::HandleGeneration(server::ApiKind kind, const httplib::Request& request,
                              httplib::Response& response) {
  // The replica's own parser: a bad request gets the very error body the replica would send.
  nlohmann::json body = server::ParseJsonBody(request.body);
  RequestKeys keys = keyer_.Compute(kind, body, request.get_header_value("Authorization"));
  if (!Forward(request, response, &keys)) {
    ++unroutable_;
    SetError(response, ApiError::Unavailable("no replica is available to answer", "no_replica"));
  }
}

void Router::HandlePassThrough(const httplib::Request& request, httplib::Response& response) {
  if (!Forward(request, response, nullptr)) {
    ++unroutable_;
    SetError(response, ApiError::Unavailable("no replica is available to answer", "no_replica"));
  }
}

bool Router::Forward(const httplib::Request& request, httplib::Response& response,
                     const RequestKeys* keys) {
  static const RequestKeys kNoKeys;
  const RequestKeys& routing = keys != nullptr ? *keys : kNoKeys;
  std::vector<bool> excluded(replicas_.size(), false);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Choice choice;
    if (!Choose(routing, excluded, choice)) return false;
    if (attempt > 0) ++retries_;
    Replica& replica = replicas_.at(choice.replica);
    if (keys != nullptr) {
      // Recorded now, not when the answer comes: requests for the same new prefix that arrive
      // while this one computes it (a burst of users of one system prompt) follow it here
      // rather than computing it on every replica. With events, the replica's stored and
      // removed events for these blocks can only come after this.
      directory_.Record(keys->block_keys, static_cast<int>(choice.replica));
    }
    ++replica.requests;
    ++replica.in_flight;
    httplib::Headers headers;
    if (request.has_header("Authorization")) {
      headers.emplace("Authorization", request.get_header_value("Authorization"));
    }
    std::string content_type = request.get_header_value("Content-Type");
    auto call = std::make_shared<UpstreamCall>(
        replica.address.host, replica.address.port, request.method, request.path,
        std::move(headers), request.body, content_type.empty() ? "application/json" : content_type);
    auto lost = [&] {
      --replica.in_flight;
      ++replica.failures;
      replicas_.MarkDown(choice.replica);
      excluded[choice.replica] = true;
    };
    if (!call->WaitForHeaders()) {
      lost();
      continue;  // nothing came: another replica may answer
    }
    auto record = [&] {
      if (keys == nullptr || call->status() != 200) return;
      routed_prompt_tokens_ += keys->prompt_tokens;
      expected_cached_tokens_ += choice.cached_tokens;
      if (!keys->affinity.empty()) {
        std::lock_guard lock(affinity_mutex_);
        affinity_[keys->affinity] = {choice.replica, keys->prompt_tokens};
      }
    };
    response.status = call->status();
    if (call->status() == 200 && call->content_type().rfind("text/event-stream", 0) == 0) {
      record();
      response.set_chunked_content_provider(
          call->content_type(),
          [this, call](size_t, httplib::DataSink& sink) {
            std::optional<std::string> chunk = call->NextChunk();
            if (!chunk) {
              if (call->ended_cleanly()) {
                sink.done();
                return true;
              }
              ++broken_streams_;  // the replica failed mid-stream: so does this answer
              return false;
            }
            if (!sink.write(chunk->data(), chunk->size())) {
              call->Cancel();  // the client went away
              return false;
            }
            return true;
          },
          [call, &replica](bool) {
            call->Cancel();
            --replica.in_flight;
          });
      return true;
    }
    std::string body = call->ReadAll();
    if (!call->ended_cleanly()) {
      lost();
      continue;  // the replica broke off, but the client has had nothing yet
    }
    --replica.in_flight;
    record();
    response.set_content(body,
                         call->content_type().empty() ? "application/json" : call->content_type());
    return true;
  }
  return false;
}

std::optional<CacheBlockList> Router::FetchSnapshot(int i) {
  const Replica& replica = replicas_.at(static_cast<size_t>(i));
  httplib::Client client(replica.address.host, replica.address.port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(30, 0);  // a large cache's list is some megabytes
  httplib::Headers headers;
  if (!snapshot_authorization_.empty()) {
    headers.emplace("Authorization", snapshot_authorization_);
  }
  auto result = client.Get("/v1/cache/blocks", headers);
  std::string why;
  std::optional<CacheBlockList> list;
  if (!result) {
    why = httplib::to_string(result.error());
  } else if (result->status != 200) {
    why = fmt::format("HTTP {}{}", result->status,
                      result->status == 401 || result->status == 403
                          ? " (give the router an admin key of the replicas in --api-keys-file)"
                          : "");
  } else {
    list = kvevents::ParseCacheBlocksJson(result->body, &why);
  }
  if (!list) {
    spdlog::warn("replica {}: no snapshot of its cache ({}); following its events alone",
                 replica.address.url, why);
  }
  return list;
}

std::string Router::RenderMetrics() const {
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  header("reprise:router_requests_total", "counter",
         "Requests sent to each replica (retries too).");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out += fmt::format("reprise:router_requests_total{{{}}} {}\n",
                       Label(replicas_.at(i).address.url), replicas_.at(i).requests.load());
  }
  header("reprise:router_replica_failures_total", "counter",
         "Requests a replica could not be reached for, or broke off.");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out += fmt::format("reprise:router_replica_failures_total{{{}}} {}\n",
                       Label(replicas_.at(i).address.url), replicas_.at(i).failures.load());
  }
  header("reprise:router_replica_healthy", "gauge",
         "1 when the replica passed its last health check.");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out += fmt::format("reprise:router_replica_healthy{{{}}} {}\n",
                       Label(replicas_.at(i).address.url), replicas_.at(i).healthy ? 1 : 0);
  }
  header("reprise:router_replica_load", "gauge", "Running + waiting requests of the replica.");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out += fmt::format("reprise:router_replica_load{{{}}} {}\n", Label(replicas_.at(i).address.url),
                       replicas_.at(i).Load());
  }
  header("reprise:router_retries_total", "counter", "Requests retried on another replica.");
  out += fmt::format("reprise:router_retries_total {}\n", retries_.load());
  header("reprise:router_unroutable_total", "counter", "Requests no replica could take (503).");
  out += fmt::format("reprise:router_unroutable_total {}\n", unroutable_.load());
  header("reprise:router_broken_streams_total", "counter",
         "Streams cut because their replica failed after the first byte.");
  out += fmt::format("reprise:router_broken_streams_total {}\n", broken_streams_.load());
  header("reprise:router_prompt_tokens_total", "counter", "Prompt tokens of routed requests.");
  out += fmt::format("reprise:router_prompt_tokens_total {}\n", routed_prompt_tokens_.load());
  header("reprise:router_expected_cached_tokens_total", "counter",
         "Prompt tokens the chosen replica was expected to hold.");
  out += fmt::format("reprise:router_expected_cached_tokens_total {}\n",
                     expected_cached_tokens_.load());
  header("reprise:router_estimated_prefix_hit_rate", "gauge",
         "Expected cached tokens / prompt tokens over all routed requests.");
  uint64_t prompt = routed_prompt_tokens_.load();
  out +=
      fmt::format("reprise:router_estimated_prefix_hit_rate {:.4f}\n",
                  prompt == 0 ? 0.0 : static_cast<double>(expected_cached_tokens_.load()) / prompt);
  header("reprise:router_directory_keys", "gauge", "Block keys the router knows a holder of.");
  out += fmt::format("reprise:router_directory_keys {}\n", directory_.size());
  if (!feed_) return out;
  const KvEventFeedCounters events = feed_->counters();
  header("reprise:router_kv_events_applied_total", "counter",
         "Replicas' KV events applied to the directory.");
  out += fmt::format("reprise:router_kv_events_applied_total {}\n", events.events_applied);
  header("reprise:router_kv_events_skipped_total", "counter",
         "KV events skipped: another model's, of a replica id no --replica reports, or already "
         "in a replica's snapshot.");
  out += fmt::format("reprise:router_kv_events_skipped_total{{reason=\"foreign_model\"}} {}\n",
                     events.events_foreign);
  out += fmt::format("reprise:router_kv_events_skipped_total{{reason=\"unknown_replica\"}} {}\n",
                     events.events_unmatched);
  out += fmt::format("reprise:router_kv_events_skipped_total{{reason=\"stale\"}} {}\n",
                     events.events_stale);
  header("reprise:router_kv_events_gaps_total", "counter",
         "Times a replica's events were lost or it restarted (what it holds is forgotten).");
  out += fmt::format("reprise:router_kv_events_gaps_total {}\n", events.gaps + events.restarts);
  header("reprise:router_kv_snapshots_total", "counter",
         "Replicas' block lists (GET /v1/cache/blocks) fetched to resync the directory.");
  out +=
      fmt::format("reprise:router_kv_snapshots_total{{result=\"applied\"}} {}\n", events.snapshots);
  out += fmt::format("reprise:router_kv_snapshots_total{{result=\"failed\"}} {}\n",
                     events.snapshot_failures);
  header("reprise:router_kv_events_connected", "gauge",
         "1 when the last read of the stream worked.");
  out += fmt::format("reprise:router_kv_events_connected {}\n", events.connected ? 1 : 0);
  header("reprise:router_kv_events_live", "gauge",
         "1 when the directory follows the replica's events (else the router's own record).");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out +=
        fmt::format("reprise:router_kv_events_live{{{}}} {}\n", Label(replicas_.at(i).address.url),
                    feed_->Live(static_cast<int>(i)) ? 1 : 0);
  }
  return out;
}

}  // namespace reprise::router
