// `reprise serve` settings: command-line flags merged with environment variables (flags win),
// checked, printable for the start-up log, and turned into an EngineConfig.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/byte_size.h"
#include "reprise/engine.h"
#include "server/tenants.h"

namespace reprise::server {

// What the command line said; unset optionals were not given.
struct ServeFlags {
  std::string model;
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> served_model_name;
  std::vector<std::string> api_keys;  // --api-key, repeatable
  std::optional<std::string> api_keys_file;
  std::optional<std::string> cache_secret_file;
  std::optional<bool> share_cache_across_tenants;
  std::optional<bool> metrics_require_auth;
  std::optional<int> block_size;
  std::optional<std::string> kv_cache_memory;  // "2GiB", "512MiB", "1000000"
  std::optional<std::string> kv_type;
  std::optional<std::string> kv_disk_path;
  std::optional<std::string> kv_disk_size;  // "20GiB"
  std::optional<std::string> kv_redis_url;
  std::optional<std::string> kv_redis_password_file;
  std::optional<std::string> kv_redis_ttl;   // "24h", "90m", "3600" (seconds)
  std::optional<std::string> kv_redis_size;  // "8GiB"
  std::optional<std::string> kv_events_redis_url;
  std::optional<std::string> kv_events_stream;
  std::optional<int64_t> kv_events_max_len;
  std::optional<std::string> replica_id;
  std::optional<int> max_batch_tokens;
  std::optional<int> max_running_requests;
  std::optional<std::string> schedule_policy;
  std::optional<std::string> eviction_policy;
  std::optional<int> threads;
  std::optional<bool> mmap_weights;  // --mmap / --no-mmap
  std::optional<int64_t> max_context;
  std::optional<bool> enable_prefix_caching;
  std::optional<std::string> chat_template;
  std::optional<std::string> multi_task_prompt;  // a file path
  std::optional<int64_t> max_queued_requests;
  std::optional<std::string> max_body_size;
  std::optional<int> http_threads;
  std::optional<int64_t> max_connections;
  std::optional<int64_t> max_connections_per_client;
  std::optional<double> shutdown_timeout;    // seconds
  std::vector<std::string> allowed_origins;  // --allowed-origins, each a comma list
};

// The effective settings.
struct ServerSettings {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port
  std::string served_model_name;      // default: the model file's stem
  std::vector<std::string> api_keys;  // each its own tenant; none (and no file): no auth
  std::string api_keys_file;          // `KEY TENANT user|admin` lines (see tenants.h)
  std::string cache_secret_file;      // empty: a random secret per start
  bool share_cache_across_tenants = false;
  bool metrics_require_auth = false;
  int block_size = 16;
  size_t kv_cache_memory_bytes = 0;  // 0: the engine's default share of memory
  std::string kv_type = "f16";
  std::string kv_disk_path;       // empty: no disk tier
  size_t kv_disk_size_bytes = 0;  // 0: no cap
  std::string kv_redis_url;       // empty: no shared tier
  std::string kv_redis_password_file;
  std::string kv_redis_password;  // REDIS_PASSWORD; never logged
  int64_t kv_redis_ttl_seconds = 24 * 3600;
  size_t kv_redis_size_bytes = 0;   // 0: no bound
  std::string kv_events_redis_url;  // empty: no KV events
  std::string kv_events_stream = "reprise:kv-events";
  size_t kv_events_max_len = 10000;
  std::string replica_id;  // empty: HOST:PORT, once bound
  int max_batch_tokens = 512;
  int max_running_requests = 64;
  std::string schedule_policy = "cache-aware";     // or "lpm" (the same), "fcfs"
  std::string eviction_policy = "scan-resistant";  // or "lru"
  int threads = 0;                                 // 0: every core
  bool mmap_weights = false;                       // --mmap (see EngineConfig::mmap_weights)
  int64_t max_context = 0;                         // 0: the model's
  bool enable_prefix_caching = true;
  std::string chat_template;      // empty: the model's own
  std::string task_prompts_file;  // --multi-task-prompt / MULTI_TASK_PROMPT
  std::string task_prompts_json;  // MULTI_TASK_PROMPT_STR (when no file is given)
  size_t max_queued_requests = 1024;
  size_t max_body_bytes = 16u << 20;
  int http_threads = 64;
  size_t max_connections = 1024;
  size_t max_connections_per_client = 128;
  double shutdown_timeout_seconds = 30;      // SIGTERM: how long running requests may finish
  std::vector<std::string> allowed_origins;  // CORS: origins allowed ("*": any); empty: none
};

// Looks up an environment variable; nullopt when unset. Injectable so that tests never touch the
// process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnvironment();

// An environment variable `reprise serve` reads, and what it sets (for the configuration docs).
struct EnvironmentVariable {
  const char* name;
  const char* meaning;
};
// Every variable ResolveSettings reads; it refuses to read any other (an InternalError), so this
// list cannot fall behind the code.
std::span<const EnvironmentVariable> EnvironmentVariables();

// Merges flags over environment over defaults. Environment variables read:
//   NIM_ENABLE_KV_CACHE_REUSE, REUSE_CACHE, ENABLE_PREFIX_CACHING  (1/0/true/false/yes/no/on/off)
//   SEQ_SIZE_PER_BLOCK (block size), MULTI_TASK_PROMPT (file), MULTI_TASK_PROMPT_STR (JSON text),
//   REPRISE_API_KEY.
// Throws reprise::Error naming the variable or flag for an invalid value, or for reuse switches
// that contradict each other.
ServerSettings ResolveSettings(const ServeFlags& flags, const EnvLookup& env);

// "1", "true", "yes", "on" / "0", "false", "no", "off", case-insensitive; anything else: nullopt.
std::optional<bool> ParseBoolText(const std::string& text);

// One line for the start-up log: "reuse_cache: true, block_size: 16, ...".
std::string DescribeSettings(const ServerSettings& settings);

// Who may call, and the secret behind tenants' cache salts: reads --api-keys-file (refusing a
// malformed line by its number) and --cache-secret-file. Throws reprise::Error when it cannot.
struct TenantSetup {
  std::vector<ApiKeyEntry> keys;
  std::string cache_secret;  // empty: the server makes one
};
TenantSetup MakeTenantSetup(const ServerSettings& settings);

// The engine's configuration; reads the task prompt file. Throws reprise::Error when it cannot.
EngineConfig MakeEngineConfig(const ServerSettings& settings);

}  // namespace reprise::server
