// `reprise route`: a prefix-aware router in front of `reprise serve` replicas (router/router.h).
// Prints "listening on http://HOST:PORT" on stdout like serve; SIGINT or SIGTERM stop it.
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "router/router.h"

namespace reprise::cli {
namespace {

struct RouteFlags {
  router::RouterOptions options;
  std::string policy = "prefix";
};

int RunRoute(RouteFlags& flags) {
  std::optional<router::RoutingPolicy> policy = router::ParseRoutingPolicy(flags.policy);
  if (!policy)
    throw Error(fmt::format("unknown --policy '{}' (prefix or round-robin)", flags.policy));
  flags.options.policy = *policy;
  if (const char* password = std::getenv("REDIS_PASSWORD"); password != nullptr) {
    flags.options.kv_redis_password = password;
  }
  const sigset_t stop_signals = BlockStopSignals();

  router::Router router(flags.options);
  int port = router.Bind();
  router.Start();
  std::printf("listening on http://%s:%d\n", flags.options.host.c_str(), port);
  std::fflush(stdout);
  spdlog::info("routing to {} replicas by {} policy", flags.options.replicas.size(), flags.policy);
  timespec timeout{1, 0};
  while (sigtimedwait(&stop_signals, nullptr, &timeout) <= 0) {
  }
  spdlog::info("stopping");
  router.Stop();
  return 0;
}

}  // namespace

void RegisterRouteCommand(CLI::App& app, CommandAction& run) {
  auto* command = app.add_subcommand(
      "route", "Route OpenAI-compatible requests to `reprise serve` replicas by cached prefix");
  auto flags = std::make_shared<RouteFlags>();
  router::RouterOptions& o = flags->options;
  command
      ->add_option("--model,-m", o.model_path,
                   "The replicas' model, GGUF file or Hugging Face folder (only its tokenizer and "
                   "metadata are read)")
      ->required();
  command->add_option("--replica", o.replicas, "A replica's URL, http://HOST:PORT (repeat)")
      ->required();
  command->add_option("--host", o.host, "Address to listen on (default 127.0.0.1)");
  command->add_option("--port", o.port, "Port to listen on (default 8080; 0: any free port)");
  command->add_option("--policy", flags->policy,
                      "prefix (default: cached prefix against load) or round-robin");
  command->add_option("--chat-template", o.chat_template,
                      "The replicas' --chat-template, if they were given one");
  command->add_option("--load-cost-tokens", o.policy_config.load_cost_tokens,
                      "Prefill tokens one running or waiting request is worth (default 512)");
  command->add_option("--max-load-gap", o.policy_config.max_load_gap,
                      "A replica this many requests busier than the least busy one is not "
                      "chosen, whatever it holds (default 4)");
  command
      ->add_option("--min-match-share", o.policy_config.min_match_share,
                   "Share of a prompt a replica must hold for the prompt to count as cached "
                   "there; below it the prompt is placed as new (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option_function<double>(
          "--health-interval",
          [flags](const double& seconds) {
            flags->options.health_interval =
                std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
          },
          "Seconds between health checks of each replica (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  command->add_option(
      "--kv-redis-url", o.kv_redis_url,
      "Redis holding the replicas' KV events (their --kv-events-redis-url), "
      "redis://HOST:PORT[/DB]; password: REDIS_PASSWORD or --kv-redis-password-file");
  command->add_option("--kv-redis-password-file", o.kv_redis_password_file,
                      "File whose first line is the Redis password");
  command->add_option("--kv-events-stream", o.kv_events_stream,
                      "The replicas' --kv-events-stream (default reprise:kv-events)");
  command->add_option("--api-key", o.api_keys,
                      "A replica's --api-key (repeat): keys then carry its tenant's salt");
  command->add_option("--api-keys-file", o.api_keys_file, "The replicas' --api-keys-file");
  command->add_option("--cache-secret-file", o.cache_secret_file,
                      "The replicas' --cache-secret-file (needed with API keys)");
  command->add_flag("--share-cache-across-tenants", o.share_cache_across_tenants,
                    "The replicas share the cache across tenants (their flag of that name)");
  command->add_option("--http-threads", o.http_threads,
                      "HTTP worker threads, i.e. concurrent connections (default 64)");
  command->callback([&run, flags] { run = [flags]() -> int { return RunRoute(*flags); }; });
}

}  // namespace reprise::cli
