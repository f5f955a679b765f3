// `reprise serve`: the OpenAI-compatible HTTP server. Listens first (printing the bound address
// on stdout, so `--port 0` is usable), then loads the engine; /health turns 200 once it is ready.
// SIGINT or SIGTERM stop it.
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/demo_model.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "model/model_config.h"
#include "modelgen/make_model.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "server/settings.h"

namespace reprise::cli {
namespace {

// Waits up to `milliseconds` for SIGINT or SIGTERM (blocked in every thread); true if one came.
bool WaitForStopSignal(const sigset_t& signals, long milliseconds) {
  timespec timeout{milliseconds / 1000, (milliseconds % 1000) * 1000000L};
  return sigtimedwait(&signals, nullptr, &timeout) > 0;
}

// `serve --demo`: the demo model (made once, see demo_model.h) in place of --model.
struct DemoServeFlags {
  bool demo = false;
  std::string shape = "135m";
};

int RunServe(server::ServeFlags flags, const DemoServeFlags& demo) {
  if (demo.demo) {
    if (!flags.model.empty())
      throw Error("--demo serves the demo model: give --model or --demo, not both");
    flags.model = EnsureDemoModel(demo.shape, flags.threads.value_or(0));
    if (!flags.served_model_name) flags.served_model_name = "reprise-demo";
    spdlog::warn("{}", kDemoWeightsNotice);
  } else if (flags.model.empty()) {
    throw Error("--model is required (or --demo, for the demo model this binary makes itself)");
  }
  server::ServerSettings settings = server::ResolveSettings(flags, server::ProcessEnvironment());
  spdlog::info("settings: {}", server::DescribeSettings(settings));
  EngineConfig config = server::MakeEngineConfig(settings);
  // Read the model's header and shape before anything listens: a missing or malformed file is
  // then the one thing printed, never "listening" followed by an error.
  ModelConfig::FromGguf(OpenModelFile(settings.model));

  const sigset_t stop_signals = BlockStopSignals();

  server::HttpServerOptions options;
  options.host = settings.host;
  options.port = settings.port;
  options.served_model_name = settings.served_model_name;
  server::TenantSetup tenants = server::MakeTenantSetup(settings);
  options.api_keys = std::move(tenants.keys);
  options.cache_secret = std::move(tenants.cache_secret);
  options.share_cache_across_tenants = settings.share_cache_across_tenants;
  options.metrics_require_auth = settings.metrics_require_auth;
  options.chat_template = settings.chat_template;
  options.max_body_bytes = settings.max_body_bytes;
  options.http_threads = settings.http_threads;
  options.max_connections = settings.max_connections;
  options.max_connections_per_client = settings.max_connections_per_client;
  options.allowed_origins = settings.allowed_origins;
  server::HttpServer http(options);
  int port = http.Bind();
  if (config.kv_replica_id.empty())
    config.kv_replica_id = fmt::format("{}:{}", settings.host, port);
  http.SetReplicaId(config.kv_replica_id);
  http.Start();
  std::printf("listening on http://%s:%d\n", settings.host.c_str(), port);
  std::fflush(stdout);
  spdlog::info("listening on http://{}:{} (loading the model; /health answers 503 until ready)",
               settings.host, port);

  // Load on another thread so that a stop signal during a long load is still answered.
  std::shared_ptr<server::EngineBackend> backend;
  std::exception_ptr load_error;
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    try {
      backend = std::make_shared<server::EngineBackend>(config);
    } catch (...) {
      load_error = std::current_exception();
    }
    loaded.store(true);
  });
  while (!loaded.load()) {
    if (WaitForStopSignal(stop_signals, 100)) {
      spdlog::warn("stopped while loading the model");
      std::fflush(nullptr);
      std::_Exit(130);  // the half-built engine holds nothing worth a clean shutdown
    }
  }
  loader.join();
  if (load_error) {
    http.Stop();
    std::rethrow_exception(load_error);
  }
  http.SetBackend(backend);
  ModelInfo info = backend->Info();
  spdlog::info("ready: serving '{}' ({}, context {}, {} KV blocks of {} tokens, prefix caching {})",
               settings.served_model_name, info.architecture, info.context_length,
               info.kv_cache_blocks, info.block_size, info.prefix_caching ? "on" : "off");

  while (!WaitForStopSignal(stop_signals, 1000)) {
  }
  // Drain: refuse new requests, let running ones finish; a second signal cuts it short.
  spdlog::info("stopping: refusing new requests, waiting up to {} s for running ones",
               settings.shutdown_timeout_seconds);
  auto drain_end =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(settings.shutdown_timeout_seconds * 1000));
  bool drained = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        drain_end - std::chrono::steady_clock::now());
    drained = http.Drain(std::min(left, std::chrono::milliseconds(200)));
    if (drained || left.count() <= 0 || WaitForStopSignal(stop_signals, 0)) break;
  }
  if (!drained) spdlog::warn("cancelling the requests still running");
  http.Stop();
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, CommandAction& run) {
  auto* command = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  auto flags = std::make_shared<server::ServeFlags>();
  const server::ServerSettings defaults;  // shown in --help beside each flag
  auto demo = std::make_shared<DemoServeFlags>();
  command->add_option("--model,-m", flags->model,
                      "GGUF model file or Hugging Face folder (or --demo)");
  command->add_flag("--demo", demo->demo,
                    "Serve the demo model (random weights, the built-in vocabulary and a ChatML "
                    "template), made once in the cache folder like `reprise demo`'s");
  command->add_option("--demo-shape", demo->shape,
                      "Shape of the --demo model: " + modelgen::ShapeNames());
  command
      ->add_option_function<std::string>(
          "--host", [flags](const std::string& v) { flags->host = v; }, "Address to listen on")
      ->default_str(defaults.host);
  command
      ->add_option_function<int>(
          "--port", [flags](const int& v) { flags->port = v; },
          "Port to listen on (0: any free port, printed on stdout)")
      ->default_str(std::to_string(defaults.port));
  command->add_option_function<std::string>(
      "--served-model-name", [flags](const std::string& v) { flags->served_model_name = v; },
      "Model name clients use (default: the model file's name without .gguf)");
  command->add_option(
      "--api-key", flags->api_keys,
      "Require 'Authorization: Bearer KEY'; repeatable, each key a tenant of its own with its "
      "own cache (also REPRISE_API_KEY)");
  command->add_option_function<std::string>(
      "--api-keys-file", [flags](const std::string& v) { flags->api_keys_file = v; },
      "File of `KEY TENANT user|admin` lines (# comments): keys, their tenants and roles; each "
      "tenant has its own cache; admins may clear any tenant's");
  command->add_option_function<std::string>(
      "--cache-secret-file", [flags](const std::string& v) { flags->cache_secret_file = v; },
      "Secret (>= 16 bytes) that tenants' cache salts are derived from (default: kept in "
      "--kv-disk-path's folder when set, else random per start)");
  command->add_flag_callback(
      "--share-cache-across-tenants", [flags] { flags->share_cache_across_tenants = true; },
      "Let tenants share cached blocks (faster, but a tenant can then tell by timing what "
      "others sent)");
  command->add_flag_callback(
      "--metrics-require-auth", [flags] { flags->metrics_require_auth = true; },
      "Serve /metrics to key holders only (its counters move with every tenant's requests)");
  command
      ->add_option_function<int>(
          "--block-size", [flags](const int& v) { flags->block_size = v; },
          "Token positions per KV block, a power of two (also SEQ_SIZE_PER_BLOCK)")
      ->default_str(std::to_string(defaults.block_size));
  command->add_option_function<std::string>(
      "--kv-cache-memory", [flags](const std::string& v) { flags->kv_cache_memory = v; },
      "KV cache budget, e.g. 2GiB or 512MiB (default: a share of free memory)");
  command->add_option_function<std::string>(
      "--kv-disk-path", [flags](const std::string& v) { flags->kv_disk_path = v; },
      "Keep KV blocks evicted from memory in this folder and load them back, after restarts too");
  command->add_option_function<std::string>(
      "--kv-disk-size", [flags](const std::string& v) { flags->kv_disk_size = v; },
      "Size cap of --kv-disk-path, e.g. 20GiB (default: no cap)");
  command->add_option_function<std::string>(
      "--kv-redis-url", [flags](const std::string& v) { flags->kv_redis_url = v; },
      "Share KV blocks with other replicas through Redis or a Redis Cluster, "
      "redis://HOST:PORT[/DB] (password: REDIS_PASSWORD or --kv-redis-password-file)");
  command->add_option_function<std::string>(
      "--kv-redis-password-file",
      [flags](const std::string& v) { flags->kv_redis_password_file = v; },
      "File whose first line is the Redis password");
  command->add_option_function<std::string>(
      "--kv-redis-ttl", [flags](const std::string& v) { flags->kv_redis_ttl = v; },
      "How long a block stays in Redis, e.g. 24h (default), 90m, 3600");
  command->add_option_function<std::string>(
      "--kv-redis-size", [flags](const std::string& v) { flags->kv_redis_size = v; },
      "Bound on the bytes this replica keeps in Redis, e.g. 8GiB (default: none; Redis's "
      "maxmemory and the TTL bound the rest)");
  command->add_option_function<std::string>(
      "--kv-events-redis-url", [flags](const std::string& v) { flags->kv_events_redis_url = v; },
      "Publish KV events (blocks stored, removed, all cleared) to a Redis Stream there, "
      "redis://HOST:PORT[/DB], for `reprise route --kv-redis-url` (may be the --kv-redis-url; "
      "password as for it)");
  command->add_option_function<std::string>(
      "--kv-events-stream", [flags](const std::string& v) { flags->kv_events_stream = v; },
      "The KV events stream's key (default reprise:kv-events)");
  command->add_option_function<int64_t>(
      "--kv-events-max-len", [flags](const int64_t& v) { flags->kv_events_max_len = v; },
      "Entries (batches of events) the stream keeps, about: XADD MAXLEN ~ (default 10000)");
  command->add_option_function<std::string>(
      "--replica-id", [flags](const std::string& v) { flags->replica_id = v; },
      "This replica's name in KV events and /health (default HOST:PORT as bound)");
  command
      ->add_option_function<std::string>(
          "--kv-type", [flags](const std::string& v) { flags->kv_type = v; },
          "KV cache element type: f16, f32 or q8 (8-bit codes with scales)")
      ->default_str(defaults.kv_type);
  command
      ->add_option_function<int>(
          "--max-batch-tokens", [flags](const int& v) { flags->max_batch_tokens = v; },
          "Tokens computed per engine step")
      ->default_str(std::to_string(defaults.max_batch_tokens));
  command
      ->add_option_function<int>(
          "--max-running-requests", [flags](const int& v) { flags->max_running_requests = v; },
          "Requests computed at once; more wait in the queue")
      ->default_str(std::to_string(defaults.max_running_requests));
  command
      ->add_option_function<std::string>(
          "--schedule-policy", [flags](const std::string& v) { flags->schedule_policy = v; },
          "Prefill order: cache-aware (least uncached prompt first; lpm is the same) or fcfs "
          "(arrival order)")
      ->default_str(defaults.schedule_policy);
  command
      ->add_option_function<std::string>(
          "--eviction-policy", [flags](const std::string& v) { flags->eviction_policy = v; },
          "Which cached blocks go first when memory is short: scan-resistant (blocks used once "
          "before blocks reused) or lru")
      ->default_str(defaults.eviction_policy);
  command
      ->add_option_function<int>(
          "-t,--threads", [flags](const int& v) { flags->threads = v; },
          "Kernel threads (0: every core)")
      ->default_str(std::to_string(defaults.threads));
  AddMmapFlags(*command, [flags](bool mmap) { flags->mmap_weights = mmap; });
  command
      ->add_option_function<int64_t>(
          "--max-context", [flags](const int64_t& v) { flags->max_context = v; },
          "Context length cap (0: the model's)")
      ->default_str(std::to_string(defaults.max_context));
  command->add_flag_callback(
      "--enable-prefix-caching", [flags] { flags->enable_prefix_caching = true; },
      "Reuse KV cache across requests (the default; also NIM_ENABLE_KV_CACHE_REUSE, "
      "REUSE_CACHE, ENABLE_PREFIX_CACHING)");
  command->add_flag_callback(
      "--no-enable-prefix-caching", [flags] { flags->enable_prefix_caching = false; },
      "Compute every prompt from scratch");
  command->add_option_function<std::string>(
      "--chat-template", [flags](const std::string& v) { flags->chat_template = v; },
      "Chat template: llama2, llama3, chatml, mistral, a Jinja file or Jinja text (default: the "
      "model's own; chatml for a model without one)");
  command->add_option_function<std::string>(
      "--multi-task-prompt", [flags](const std::string& v) { flags->multi_task_prompt = v; },
      "JSON file of [{\"task_id\": ..., \"prompt\": ...}] computed and pinned at start-up (also "
      "MULTI_TASK_PROMPT, or the JSON itself in MULTI_TASK_PROMPT_STR)");
  command
      ->add_option_function<int64_t>(
          "--max-queued-requests", [flags](const int64_t& v) { flags->max_queued_requests = v; },
          "Requests admitted and not finished (running plus waiting) beyond this are refused "
          "with 503 and Retry-After")
      ->default_str(std::to_string(defaults.max_queued_requests));
  command
      ->add_option_function<std::string>(
          "--max-body-size", [flags](const std::string& v) { flags->max_body_size = v; },
          "Largest request body accepted, e.g. 16MiB; larger ones get 413")
      ->default_str(fmt::format("{}MiB", defaults.max_body_bytes >> 20));
  command
      ->add_option_function<int>(
          "--http-threads", [flags](const int& v) { flags->http_threads = v; },
          "HTTP worker threads started up front; more start on demand up to "
          "--max-connections")
      ->default_str(std::to_string(defaults.http_threads));
  command
      ->add_option_function<int64_t>(
          "--max-connections", [flags](const int64_t& v) { flags->max_connections = v; },
          "Open HTTP connections in all; more are answered 503")
      ->default_str(std::to_string(defaults.max_connections));
  command
      ->add_option_function<int64_t>(
          "--max-connections-per-client",
          [flags](const int64_t& v) { flags->max_connections_per_client = v; },
          "Open HTTP connections from one client address; more are answered 503")
      ->default_str(std::to_string(defaults.max_connections_per_client));
  command
      ->add_option_function<double>(
          "--shutdown-timeout", [flags](const double& v) { flags->shutdown_timeout = v; },
          "On SIGTERM or SIGINT, seconds that running requests may take to finish before they "
          "are cancelled; new ones are refused meanwhile")
      ->default_str("30");
  command
      ->add_option_function<std::vector<std::string>>(
          "--allowed-origins",
          [flags](const std::vector<std::string>& v) {
            flags->allowed_origins.insert(flags->allowed_origins.end(), v.begin(), v.end());
          },
          "Origins browsers may call from (CORS), a comma list or repeated, e.g. "
          "http://localhost:3000; * allows any")
      ->default_str("none");
  command->callback(
      [&run, flags, demo] { run = [flags, demo]() -> int { return RunServe(*flags, *demo); }; });
}

}  // namespace reprise::cli
