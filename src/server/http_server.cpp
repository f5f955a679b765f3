#include "server/http_server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "core/error.h"
#include "kvevents/kv_snapshot.h"
#include "server/api_error.h"
#include "server/http_common.h"
#include "server/http_connection.h"
#include "server/json_fields.h"
#include "server/parsed_request.h"
#include "server/sse.h"

namespace reprise::server {
namespace {

void SetJson(httplib::Response& response, const nlohmann::json& body, int status = 200) {
  response.status = status;
  response.set_content(JsonText(body), "application/json");
}

void SetError(httplib::Response& response, const ApiError& error) {
  SetJson(response, error.ToJson(), error.status());
  // Overload and shutdown are temporary: say when to come back.
  if (error.status() == 503 || error.status() == 429) response.set_header("Retry-After", "1");
}

// After this answer the connection closes: the request's body (if any) was not read.
void CloseAfter(httplib::Response& response) {
  if (ConnectionContext* connection = CurrentConnection()) {
    connection->close_after_response = true;
  }
  if (!response.has_header("Connection")) response.set_header("Connection", "close");
}

bool ExpectsBody(const httplib::Request& request) {
  return request.method == "POST" || request.method == "PUT" || request.method == "PATCH" ||
         request.has_header("Content-Length") || request.has_header("Transfer-Encoding");
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void CheckModel(const JsonFields& fields, const std::string& served_name) {
  std::optional<std::string> model = fields.String("model");
  if (model && !model->empty() && *model != served_name) {
    throw ApiError::NotFound(
        fmt::format("The model '{}' does not exist; this server serves '{}'", *model, served_name),
        "model_not_found");
  }
}

}  // namespace

namespace {

ConnectionLimits LimitsFor(const HttpServerOptions& options) {
  ConnectionLimits limits;
  limits.max_connections = options.max_connections;
  limits.max_connections_per_client = options.max_connections_per_client;
  limits.header_timeout = options.read_timeout;
  limits.body_timeout = options.read_timeout;
  limits.max_body_bytes = options.max_body_bytes;
  return limits;
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options)
    : state_(std::move(options)),
      completions_(state_),
      http_(std::make_unique<HardenedHttpServer>(LimitsFor(state_.options()),
                                                 [this] { return state_.draining(); })) {
  const HttpServerOptions& opts = state_.options();
  size_t initial = static_cast<size_t>(opts.http_threads < 2 ? 2 : opts.http_threads);
  // Room for every admitted connection, plus threads that refuse the ones beyond the bound.
  size_t most = opts.max_connections + 32;
  http_->new_task_queue = [initial, most] { return new GrowingThreadPool(initial, most); };
  http_->set_payload_max_length(opts.max_body_bytes);
  http_->set_tcp_nodelay(true);
  RegisterRoutes();
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::Bind() {
  const HttpServerOptions& opts = state_.options();
  if (opts.port == 0) {
    port_ = http_->bind_to_any_port(opts.host);
    if (port_ < 0) throw Error(fmt::format("cannot listen on {} (any port)", opts.host));
  } else {
    if (!http_->bind_to_port(opts.host, opts.port)) {
      throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this host?)",
                              opts.host, opts.port));
    }
    port_ = opts.port;
  }
  http_->WidenBacklog(1024);
  return port_;
}

void HttpServer::Start() {
  REPRISE_CHECK(port_ >= 0, "HttpServer::Start before Bind");
  REPRISE_CHECK(!thread_.joinable(), "HttpServer::Start twice");
  thread_ = std::thread([this] {
    if (!http_->listen_after_bind()) spdlog::error("the HTTP server stopped with an error");
    listen_finished_.store(true);
  });
}

void HttpServer::SetBackend(std::shared_ptr<InferenceBackend> backend) {
  state_.SetBackend(std::move(backend));
}

bool HttpServer::Drain(std::chrono::milliseconds timeout) {
  state_.SetDraining();
  return http_->connections().WaitForNoRequests(timeout);
}

void HttpServer::Stop() {
  state_.SetStopping();
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until its listening loop has begun, and a server that fails
  // at start-up can get here before the listening thread did (on a busy machine it did, and the
  // join below then waited forever). So stop it once it runs, or once it has given up.
  bool stopped = false;
  while (!listen_finished_.load()) {
    if (!stopped && http_->is_running()) {
      http_->stop();
      stopped = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  thread_.join();
}

bool HttpServer::Authorized(const httplib::Request& request) const {
  return state_.tenants().Authenticate(request.get_header_value("Authorization")) != nullptr;
}

bool HttpServer::OriginAllowed(const std::string& origin) const {
  const std::vector<std::string>& allowed = state_.options().allowed_origins;
  return !origin.empty() && std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    return a == "*" || a == origin;
  });
}

void HttpServer::HandlePreflight(const httplib::Request& request,
                                 httplib::Response& response) const {
  std::string origin = request.get_header_value("Origin");
  if (!OriginAllowed(origin)) {
    SetError(response,
             ApiError(403,
                      origin.empty() ? std::string("OPTIONS is answered only to CORS preflights "
                                                   "from an allowed origin")
                                     : fmt::format("the origin '{}' is not allowed; the server "
                                                   "allows the origins of --allowed-origins",
                                                   origin),
                      "invalid_request_error", "origin_not_allowed"));
    return;
  }
  response.status = 204;
  response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  // Whatever headers the page asks to send (Authorization, Content-Type, ...): every route
  // checks its own input.
  std::string headers = request.get_header_value("Access-Control-Request-Headers");
  response.set_header("Access-Control-Allow-Headers",
                      headers.empty() ? std::string("Authorization, Content-Type") : headers);
  response.set_header("Access-Control-Max-Age", "600");
}

template <typename Fn>
void HttpServer::Guard(const httplib::Request& request, httplib::Response& response, Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& error) {
    SetError(response, error);
  } catch (const QueueFullError& error) {
    SetError(response, ApiError::Unavailable(error.what(), "queue_full"));
  } catch (const Error& error) {
    // Bad input noticed below the route (tokenizer, engine): the message is for the user.
    SetError(response, ApiError::BadRequest(error.what()));
  } catch (const std::exception& error) {
    spdlog::error("{} {}: {}", request.method, request.path, error.what());
    SetError(response, ApiError::Internal(fmt::format("internal error: {}", error.what())));
  } catch (...) {
    spdlog::error("{} {}: unknown exception", request.method, request.path);
    SetError(response, ApiError::Internal("internal error"));
  }
}

void HttpServer::RegisterRoutes() {
  using httplib::Request;
  using httplib::Response;
  // Runs once the header is read, before the body is: refuses what must not be read at all.
  http_->set_pre_routing_handler([this](const Request& request, Response& response) {
    // CORS: every answer to an allowed origin names it (errors too, so that a page can read
    // them); a preflight is answered here, before authentication, as browsers send it without
    // credentials.
    std::string origin = request.get_header_value("Origin");
    if (OriginAllowed(origin)) {
      response.set_header("Access-Control-Allow-Origin", origin);
      response.set_header("Vary", "Origin");
    }
    if (request.method == "OPTIONS") {
      HandlePreflight(request, response);
      return httplib::Server::HandlerResponse::Handled;
    }
    std::string message;
    int status = CheckBodyFraming(request, state_.options().max_body_bytes, message);
    if (status != 0) {
      const char* code = status == 411   ? "length_required"
                         : status == 413 ? "request_too_large"
                                         : "invalid_content_length";
      SetError(response, ApiError(status, message, "invalid_request_error", code));
      CloseAfter(response);
      return httplib::Server::HandlerResponse::Handled;
    }
    bool open_route = request.path == "/health" ||
                      (request.path == "/metrics" && !state_.options().metrics_require_auth);
    if (open_route || Authorized(request)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SetError(response, ApiError::Unauthorized());
    if (ExpectsBody(request)) CloseAfter(response);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Called for every answer with status >= 400: counts it, and gives httplib's own errors
  // (no route, body too large) an OpenAI-style body.
  httplib::Server::HandlerWithResponse on_error = [this](const Request& request,
                                                         Response& response) {
    if (!response.body.empty()) {
      state_.metrics().RecordError(response.status);
      return httplib::Server::HandlerResponse::Unhandled;
    }
    // httplib's own answer: the request or its body could not be read to its end.
    ConnectionContext* connection = CurrentConnection();
    if (response.status == 400 && connection && connection->stream->body_limit_hit()) {
      response.status = 413;
    }
    state_.metrics().RecordError(response.status);
    SetError(response, DefaultError(request.method, request.path, response.status,
                                    state_.options().max_body_bytes));
    CloseAfter(response);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(std::move(on_error));
  // httplib adds Keep-Alive to every answer it does not close itself; an answer that closes
  // says so alone.
  http_->set_post_routing_handler([](const Request&, Response& response) {
    if (response.get_header_value("Connection") == "close") {
      response.headers.erase("Keep-Alive");
      if (ConnectionContext* connection = CurrentConnection()) {
        connection->close_after_response = true;
      }
    }
  });
  http_->set_exception_handler([](const Request&, Response& response, std::exception_ptr) {
    SetError(response, ApiError::Internal("internal error"));
  });
  http_->set_logger([](const Request& request, const Response& response) {
    spdlog::debug("{} {} -> {}", request.method, request.path, response.status);
  });

  auto completion_route = [this](ApiKind kind) {
    return [this, kind](const Request& request, Response& response) {
      Guard(request, response, [&] { completions_.Handle(kind, request, response); });
    };
  };
  http_->Post("/v1/chat/completions", completion_route(ApiKind::kChat));
  http_->Post("/v1/completions", completion_route(ApiKind::kCompletion));
  http_->Post("/", completion_route(ApiKind::kRtpGenerate));
  http_->Post("/generate", completion_route(ApiKind::kRtpGenerate));

  auto route = [this](auto method) {
    return [this, method](const Request& request, Response& response) {
      Guard(request, response, [&] { method(request, response); });
    };
  };
  http_->Get("/health", route([this](const Request&, Response& r) { HandleHealth(r); }));
  http_->Get("/v1/models", route([this](const Request&, Response& r) { HandleModels(r); }));
  http_->Get(R"(/v1/models/(.+))",
             route([this](const Request& q, Response& r) { HandleModel(q.matches[1].str(), r); }));
  http_->Get("/metrics", route([this](const Request&, Response& r) { HandleMetrics(r); }));
  http_->Post("/tokenize", route([this](const Request& q, Response& r) { HandleTokenize(q, r); }));
  http_->Post("/detokenize",
              route([this](const Request& q, Response& r) { HandleDetokenize(q, r); }));
  http_->Get("/v1/tasks", route([this](const Request&, Response& r) { HandleTasks(r); }));
  http_->Get("/v1/cache/stats",
             route([this](const Request& q, Response& r) { HandleCacheStats(q, r); }));
  http_->Post("/v1/cache/clear",
              route([this](const Request& q, Response& r) { HandleCacheClear(q, r); }));
  http_->Get("/v1/cache/blocks",
             route([this](const Request& q, Response& r) { HandleCacheBlocks(q, r); }));
}

void HttpServer::HandleHealth(httplib::Response& response) {
  auto answer = [&](const char* status, int code) {
    nlohmann::json body = {{"status", status}};
    if (!replica_id_.empty()) body["replica_id"] = replica_id_;
    SetJson(response, body, code);
  };
  if (state_.draining()) {
    answer("draining", 503);
  } else if (!state_.Ready()) {
    answer("loading", 503);
  } else {
    answer("ok", 200);
  }
}

nlohmann::json HttpServer::ModelJson() const {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  static const int64_t kCreated = UnixSeconds();
  return {{"id", state_.options().served_model_name},
          {"object", "model"},
          {"created", kCreated},
          {"owned_by", "reprise"},
          {"root", ready->info.name},
          {"parent", nullptr},
          {"max_model_len", ready->info.context_length}};
}

void HttpServer::HandleModels(httplib::Response& response) {
  SetJson(response, {{"object", "list"}, {"data", nlohmann::json::array({ModelJson()})}});
}

void HttpServer::HandleModel(const std::string& id, httplib::Response& response) {
  const std::string& served_name = state_.options().served_model_name;
  if (id != served_name) {
    throw ApiError::NotFound(
        fmt::format("The model '{}' does not exist; this server serves '{}'", id, served_name),
        "model_not_found");
  }
  SetJson(response, ModelJson());
}

void HttpServer::HandleMetrics(httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.Ready();
  EngineStats stats = ready ? ready->backend->Stats() : EngineStats{};
  const ConnectionCounter& connections = http_->connections();
  // Not counting this request and its connection: an idle server reads 0.
  auto others = [](size_t count) { return count > 0 ? count - 1 : 0; };
  HttpCounters http{others(connections.open()), others(connections.requests_in_flight()),
                    connections.refused(), ResidentBytes()};
  response.set_content(state_.metrics().Render(stats, http, state_.options().served_model_name),
                       "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::HandleTokenize(const httplib::Request& request, httplib::Response& response) {
  nlohmann::json body = ParseJsonBody(request.body);
  JsonFields fields(body);
  CheckModel(fields, state_.options().served_model_name);
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  std::vector<int32_t> tokens;
  if (fields.Find("messages")) {
    // The same text and BOS rule a chat completion would use.
    ParsedRequest chat = ParseChatRequest(body);
    tokens = ready->backend->Tokenize(
        RenderChatPrompt(*ready, chat.messages, state_.options().chat_template),
        /*add_special_tokens=*/true);
  } else {
    std::optional<std::string> prompt = fields.String("prompt");
    if (!prompt) throw ApiError::BadRequest("'prompt' or 'messages' is required", "prompt");
    bool add_special = fields.Bool("add_special_tokens").value_or(true);
    tokens = ready->backend->Tokenize(*prompt, add_special);
  }
  SetJson(response, {{"count", tokens.size()},
                     {"max_model_len", ready->info.context_length},
                     {"tokens", tokens},
                     {"token_strs", nullptr}});
}

void HttpServer::HandleDetokenize(const httplib::Request& request, httplib::Response& response) {
  nlohmann::json body = ParseJsonBody(request.body);
  JsonFields fields(body);
  CheckModel(fields, state_.options().served_model_name);
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  const nlohmann::json* list = fields.Find("tokens");
  if (!list || !list->is_array()) {
    throw ApiError::BadRequest("'tokens' must be a list of token ids", "tokens");
  }
  std::vector<int32_t> tokens;
  for (const nlohmann::json& token : *list) {
    if (!token.is_number_integer() || token.get<int64_t>() < 0 ||
        token.get<int64_t>() >= ready->info.vocab_size) {
      throw ApiError::BadRequest(
          fmt::format("'tokens' must hold token ids between 0 and {}", ready->info.vocab_size - 1),
          "tokens");
    }
    tokens.push_back(static_cast<int32_t>(token.get<int64_t>()));
  }
  SetJson(response, {{"prompt", ready->backend->Detokenize(tokens)}});
}

void HttpServer::HandleTasks(httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  nlohmann::json data = nlohmann::json::array();
  for (const TaskPromptInfo& task : ready->backend->TaskPrompts()) {
    data.push_back({{"task_id", task.task_id}, {"tokens", task.tokens}, {"blocks", task.blocks}});
  }
  SetJson(response, {{"object", "list"}, {"data", std::move(data)}});
}

namespace {

nlohmann::json TiersJson(const EngineStats& stats) {
  nlohmann::json tiers = nlohmann::json::array();
  for (const KvTierStats& tier : stats.tiers) {
    tiers.push_back({{"name", tier.name},
                     {"available", tier.available},
                     {"last_error", tier.last_error},
                     {"blocks", tier.blocks},
                     {"bytes", tier.bytes},
                     {"capacity_bytes", tier.capacity_bytes},
                     {"blocks_written", tier.blocks_written},
                     {"bytes_written", tier.bytes_written},
                     {"blocks_read", tier.blocks_read},
                     {"bytes_read", tier.bytes_read},
                     {"evictions", tier.evictions},
                     {"corrupt_blocks", tier.corrupt_blocks},
                     {"foreign_blocks", tier.foreign_blocks},
                     {"errors", tier.errors}});
  }
  return tiers;
}

nlohmann::json UsageJson(const std::string& name, const TenantUsage& usage) {
  double hit_rate = usage.prompt_tokens == 0 ? 0.0
                                             : static_cast<double>(usage.cached_tokens) /
                                                   static_cast<double>(usage.prompt_tokens);
  return {{"name", name},
          {"requests", usage.requests},
          {"prompt_tokens", usage.prompt_tokens},
          {"cached_tokens", usage.cached_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"hit_rate", hit_rate}};
}

}  // namespace

void HttpServer::HandleCacheStats(const httplib::Request& request, httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  const Tenant& caller = state_.Caller(request.get_header_value("Authorization"));
  const TenantRegistry& tenants = state_.tenants();
  nlohmann::json own = UsageJson(caller.name, tenants.Usage(caller.name));
  if (!caller.admin()) {
    // A user sees its own figures only: the pool's census and hit counters move with other
    // tenants' requests, which would tell a user what others have cached.
    SetJson(response, {{"prefix_caching", ready->info.prefix_caching},
                       {"block_size", ready->info.block_size},
                       {"kv_type", ready->info.kv_type},
                       {"numerics", ready->info.numerics},
                       {"tenant", std::move(own)}});
    return;
  }
  nlohmann::json all = nlohmann::json::array();
  for (const Tenant& tenant : tenants.tenants()) {
    all.push_back(UsageJson(tenant.name, tenants.Usage(tenant.name)));
  }
  EngineStats stats = ready->backend->Stats();
  nlohmann::json tasks = nlohmann::json::array();
  for (const TaskPromptInfo& task : ready->backend->TaskPrompts()) {
    tasks.push_back({{"task_id", task.task_id}, {"tokens", task.tokens}, {"blocks", task.blocks}});
  }
  double hit_rate = stats.prefix_cache_queries == 0
                        ? 0.0
                        : static_cast<double>(stats.prefix_cache_hits) /
                              static_cast<double>(stats.prefix_cache_queries);
  SetJson(response, {{"prefix_caching", ready->info.prefix_caching},
                     {"block_size", ready->info.block_size},
                     {"kv_type", ready->info.kv_type},
                     {"numerics", ready->info.numerics},
                     {"kv_cache_bytes", ready->info.kv_cache_bytes},
                     {"blocks",
                      {{"total", stats.blocks_total},
                       {"in_use", stats.blocks_in_use},
                       {"cached", stats.blocks_cached},
                       {"free", stats.blocks_free},
                       {"pinned", stats.blocks_pinned},
                       {"protected", stats.blocks_protected}}},
                     {"prefix_cache_queries", stats.prefix_cache_queries},
                     {"prefix_cache_hits", stats.prefix_cache_hits},
                     {"hit_rate", hit_rate},
                     {"evictions", stats.evictions},
                     {"cache_sources",
                      {{"memory", stats.prompt_tokens_cached.memory},
                       {"disk", stats.prompt_tokens_cached.disk},
                       {"remote", stats.prompt_tokens_cached.remote}}},
                     {"tiers", TiersJson(stats)},
                     {"task_prompts", std::move(tasks)},
                     {"tenant", std::move(own)},
                     {"tenants", std::move(all)}});
}

void HttpServer::HandleCacheClear(const httplib::Request& request, httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  const Tenant& caller = state_.Caller(request.get_header_value("Authorization"));
  // {"tiers": ["memory", "disk", "remote"], "tenant": NAME}; no "tiers": memory alone.
  std::vector<std::string> tiers = {"memory"};
  std::optional<std::string> named;
  if (!request.body.empty()) {
    nlohmann::json body = ParseJsonBody(request.body);
    JsonFields fields(body);
    constexpr std::string_view kClearFields[] = {"tiers", "tenant"};
    fields.RefuseUnknown(kClearFields);
    if (body.contains("tiers")) {
      const nlohmann::json& names = body["tiers"];
      if (!names.is_array() || names.empty()) {
        throw ApiError::BadRequest("tiers must be a non-empty list of memory, disk, remote",
                                   "tiers");
      }
      tiers.clear();
      for (const auto& name : names) {
        if (!name.is_string() || (name != "memory" && name != "disk" && name != "remote")) {
          throw ApiError::BadRequest(
              fmt::format("unknown cache tier {} (memory, disk or remote)", name.dump()), "tiers");
        }
        tiers.push_back(name.get<std::string>());
      }
    }
    named = fields.String("tenant");
  }
  // Users clear their own blocks, in every tier named; admins everything, or one tenant's when
  // they name it.
  const Tenant* whose = nullptr;
  if (!caller.admin()) {
    if (named && *named != caller.name) {
      throw ApiError(403, "a user key clears its own tenant's cache only", "permission_error",
                     "forbidden", "tenant");
    }
    whose = &caller;
  } else if (named) {
    whose = state_.tenants().Find(*named);
    if (!whose) {
      throw ApiError::BadRequest(fmt::format("unknown tenant '{}'", *named), "tenant",
                                 "tenant_not_found");
    }
  }
  // The engine knows a tenant by its salt (the owner its requests carry), never by name.
  std::optional<std::string> owner;
  if (whose) owner = whose->cache_salt;
  size_t cleared = ready->backend->ClearCache(tiers, owner);
  spdlog::info("cache cleared by {} ({}): {} blocks of {} dropped", caller.name,
               fmt::join(tiers, ", "), cleared, whose ? whose->name : std::string("every tenant"));
  SetJson(response, {{"cleared_blocks", cleared},
                     {"tiers", tiers},
                     {"tenant", whose ? nlohmann::json(whose->name) : nlohmann::json(nullptr)}});
}

// Every block key the cache holds, per tier, with the KV events' position they match: where a
// router starts from. Admins only: the keys tell which prompts every tenant sent.
void HttpServer::HandleCacheBlocks(const httplib::Request& request, httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  const Tenant& caller = state_.Caller(request.get_header_value("Authorization"));
  if (!caller.admin()) {
    throw ApiError(403, "listing the cache's blocks needs an admin key", "permission_error",
                   "forbidden");
  }
  auto list = std::make_shared<const CacheBlockList>(ready->backend->ListCacheBlocks());
  // Written as it is encoded: a large cache's list is not held whole a second time.
  response.set_chunked_content_provider(
      "application/json", [list](size_t, httplib::DataSink& sink) {
        bool open = true;
        kvevents::WriteCacheBlocksJson(*list, [&](std::string_view piece) {
          open = open && sink.write(piece.data(), piece.size());
        });
        if (open) sink.done();
        return open;
      });
}

}  // namespace reprise::server
