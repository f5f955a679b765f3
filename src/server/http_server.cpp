#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/parsed_request.h"
#include "server/sse.h"

namespace reprise::server {
namespace {

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

void SetJson(httplib::Response& response, const nlohmann::json& body, int status = 200) {
  response.status = status;
  response.set_content(JsonText(body), "application/json");
}

void SetError(httplib::Response& response, const ApiError& error) {
  SetJson(response, error.ToJson(), error.status());
}

// The body for an error status that httplib produced itself (no route, body too large, ...).
ApiError DefaultError(const httplib::Request& request, int status, size_t max_body_bytes) {
  switch (status) {
    case 404:
      return ApiError(404, fmt::format("Invalid URL ({} {})", request.method, request.path),
                      "invalid_request_error", "not_found");
    case 413:
      return ApiError(413, fmt::format("the request body is larger than the limit of {} bytes",
                                       max_body_bytes),
                      "invalid_request_error", "request_too_large");
    case 400:
      return ApiError::BadRequest("malformed HTTP request");
    default:
      return ApiError(status, fmt::format("HTTP error {}", status),
                      status >= 500 ? "internal_server_error" : "invalid_request_error");
  }
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void CheckModel(const JsonFields& fields, const std::string& served_name) {
  std::optional<std::string> model = fields.String("model");
  if (model && !model->empty() && *model != served_name) {
    throw ApiError::NotFound(fmt::format("The model '{}' does not exist; this server serves '{}'",
                                         *model, served_name),
                             "model_not_found");
  }
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options)
    : state_(std::move(options)), completions_(state_), http_(std::make_unique<WideBacklogServer>()) {
  const HttpServerOptions& opts = state_.options();
  size_t threads = static_cast<size_t>(opts.http_threads < 2 ? 2 : opts.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opts.max_body_bytes);
  http_->set_keep_alive_timeout(5);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(10, 0);
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
  static_cast<WideBacklogServer&>(*http_).WidenBacklog(1024);
  return port_;
}

void HttpServer::Start() {
  REPRISE_CHECK(port_ >= 0, "HttpServer::Start before Bind");
  REPRISE_CHECK(!thread_.joinable(), "HttpServer::Start twice");
  thread_ = std::thread([this] {
    if (!http_->listen_after_bind()) spdlog::error("the HTTP server stopped with an error");
  });
}

void HttpServer::SetBackend(std::shared_ptr<InferenceBackend> backend) {
  state_.SetBackend(std::move(backend));
}

void HttpServer::Stop() {
  state_.SetStopping();
  if (thread_.joinable()) {
    http_->stop();
    thread_.join();
  }
}

bool HttpServer::Authorized(const httplib::Request& request) const {
  const std::string& key = state_.options().api_key;
  if (key.empty()) return true;
  std::string header = request.get_header_value("Authorization");
  return header == "Bearer " + key;
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
    if (request.path == "/health" || request.path == "/metrics" || Authorized(request)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SetError(response, ApiError::Unauthorized());
    return httplib::Server::HandlerResponse::Handled;
  });
  // Called for every answer with status >= 400: counts it, and gives httplib's own errors
  // (no route, body too large) an OpenAI-style body.
  httplib::Server::HandlerWithResponse on_error = [this](const Request& request,
                                                          Response& response) {
    state_.metrics().RecordError(response.status);
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    SetError(response, DefaultError(request, response.status, state_.options().max_body_bytes));
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(std::move(on_error));
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
  http_->Post("/tokenize",
              route([this](const Request& q, Response& r) { HandleTokenize(q, r); }));
  http_->Post("/detokenize",
              route([this](const Request& q, Response& r) { HandleDetokenize(q, r); }));
  http_->Get("/v1/tasks", route([this](const Request&, Response& r) { HandleTasks(r); }));
  http_->Get("/v1/cache/stats", route([this](const Request&, Response& r) { HandleCacheStats(r); }));
  http_->Post("/v1/cache/clear",
              route([this](const Request& q, Response& r) { HandleCacheClear(q, r); }));
}

void HttpServer::HandleHealth(httplib::Response& response) {
  if (!state_.Ready()) {
    SetJson(response, {{"status", "loading"}}, 503);
    return;
  }
  SetJson(response, {{"status", "ok"}});
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
  response.set_content(state_.metrics().Render(stats, state_.options().served_model_name),
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

}  // namespace

void HttpServer::HandleCacheStats(httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
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
                     {"task_prompts", std::move(tasks)}});
}

void HttpServer::HandleCacheClear(const httplib::Request& request, httplib::Response& response) {
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  // {"tiers": ["memory", "disk", "remote"]}; no body, or no "tiers": memory alone.
  std::vector<std::string> tiers = {"memory"};
  if (!request.body.empty()) {
    nlohmann::json body = ParseJsonBody(request.body);
    for (const auto& [key, value] : body.items()) {
      if (key != "tiers") throw ApiError::BadRequest(fmt::format("unknown field '{}'", key), key);
    }
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
  }
  size_t cleared = ready->backend->ClearCache(tiers);
  spdlog::info("cache cleared ({}): {} blocks dropped", fmt::join(tiers, ", "), cleared);
  SetJson(response, {{"cleared_blocks", cleared}, {"tiers", tiers}});
}

}  // namespace reprise::server
