#include "server/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "model/kv_layout.h"

namespace reprise::server {
namespace {

int64_t ParseIntText(const std::string& text, const std::string& source, int64_t min, int64_t max) {
  std::string trimmed = TrimAsciiSpace(text);
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(trimmed.c_str(), &end, 10);
  if (trimmed.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    throw Error(
        fmt::format("{} must be an integer between {} and {}, got '{}'", source, min, max, text));
  }
  return value;
}

// "90", "90s", "15m", "24h", "7d" -> seconds; Error naming `flag` otherwise.
int64_t ParseDurationSeconds(const std::string& text, const std::string& flag) {
  if (text.empty()) throw Error(fmt::format("{} must not be empty", flag));
  int64_t unit = 1;
  std::string number = text;
  switch (text.back()) {
    case 's':
      unit = 1;
      number.pop_back();
      break;
    case 'm':
      unit = 60;
      number.pop_back();
      break;
    case 'h':
      unit = 3600;
      number.pop_back();
      break;
    case 'd':
      unit = 86400;
      number.pop_back();
      break;
    default:
      break;
  }
  int64_t value = ParseIntText(number, flag, 1, int64_t{1} << 40);
  return value * unit;
}

// A Redis URL without its password, for the log.
std::string RedactUrl(const std::string& url) {
  size_t at = url.rfind('@');
  if (at == std::string::npos) return url;
  return "redis://***@" + url.substr(at + 1);
}

void CheckBlockSize(int block_size, const std::string& source) {
  if (block_size < 1 || block_size > 256 || (block_size & (block_size - 1)) != 0) {
    throw Error(
        fmt::format("{} must be a power of two between 1 and 256, got {}", source, block_size));
  }
}

void CheckPositive(int64_t value, const std::string& flag) {
  if (value <= 0) throw Error(fmt::format("{} must be positive, got {}", flag, value));
}

// The reuse switch from the environment: each variable that is set must be a boolean, and all
// that are set must agree.
std::optional<bool> ReuseFromEnvironment(const EnvLookup& env) {
  static constexpr const char* kNames[] = {"NIM_ENABLE_KV_CACHE_REUSE", "REUSE_CACHE",
                                           "ENABLE_PREFIX_CACHING"};
  std::optional<bool> result;
  std::string decided_by;
  for (const char* name : kNames) {
    std::optional<std::string> text = env(name);
    if (!text) continue;
    std::optional<bool> value = ParseBoolText(*text);
    if (!value) {
      throw Error(
          fmt::format("environment variable {}='{}' is not a boolean (use 1, 0, true or "
                      "false)",
                      name, *text));
    }
    if (result && *result != *value) {
      throw Error(
          fmt::format("environment variables {} and {} disagree about prefix caching; "
                      "set one, or pass --enable-prefix-caching / "
                      "--no-enable-prefix-caching",
                      decided_by, name));
    }
    result = value;
    decided_by = name;
  }
  return result;
}

std::string ModelStem(const std::string& path) {
  std::filesystem::path model = std::filesystem::path(path).lexically_normal();
  if (!model.has_filename()) model = model.parent_path();  // "folder/"
  // A Hugging Face folder is named whole ("Llama-3.2-1B" has no extension to drop).
  std::string stem =
      std::filesystem::is_directory(model) ? model.filename().string() : model.stem().string();
  return stem.empty() ? path : stem;
}

std::string ReadTextFile(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(fmt::format("cannot read {} '{}'", what, path));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw Error(fmt::format("cannot read {} '{}'", what, path));
  return text.str();
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<bool> ParseBoolText(const std::string& text) {
  std::string value = AsciiLower(TrimAsciiSpace(text));
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  return std::nullopt;
}

namespace {

// "a, b" -> {"a", "b"}; an origin is "*" or scheme://host[:port], as browsers send it.
std::vector<std::string> SplitOrigins(const std::string& list) {
  std::vector<std::string> origins;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string origin = TrimAsciiSpace(list.substr(start, comma - start));
    size_t scheme_end = origin.find("://");
    bool url = scheme_end != std::string::npos && scheme_end > 0 &&
               origin.size() > scheme_end + 3 &&
               origin.find('/', scheme_end + 3) == std::string::npos;
    if (origin != "*" && !url) {
      throw Error(
          fmt::format("--allowed-origins: '{}' is not an origin (scheme://host[:port], no "
                      "path, or *)",
                      origin));
    }
    origins.push_back(origin);
    start = comma + 1;
  }
  return origins;
}

}  // namespace

std::span<const EnvironmentVariable> EnvironmentVariables() {
  static constexpr EnvironmentVariable kVariables[] = {
      {"NIM_ENABLE_KV_CACHE_REUSE",
       "Prefix caching on or off (1/0, true/false, yes/no, on/off), as NVIDIA NIM names it; "
       "--enable-prefix-caching / --no-enable-prefix-caching win"},
      {"REUSE_CACHE", "The same switch, as rtp-llm names it"},
      {"ENABLE_PREFIX_CACHING", "The same switch, as vLLM's flag reads; set switches must agree"},
      {"SEQ_SIZE_PER_BLOCK", "Token positions per KV block (rtp-llm's name); --block-size wins"},
      {"MULTI_TASK_PROMPT",
       "File of static task prompts (rtp-llm's name); --multi-task-prompt wins"},
      {"MULTI_TASK_PROMPT_STR",
       "The task prompts' JSON itself (rtp-llm's name), when no file is given"},
      {"REPRISE_API_KEY", "Require 'Authorization: Bearer KEY'; --api-key wins"},
      {"REDIS_PASSWORD",
       "Password of the Redis tier (--kv-redis-url); --kv-redis-password-file wins, and it wins "
       "over a password in the URL"},
  };
  return kVariables;
}

ServerSettings ResolveSettings(const ServeFlags& flags, const EnvLookup& lookup) {
  // Only listed variables are read: one missing from EnvironmentVariables() is a bug here.
  const EnvLookup env = [&lookup](const std::string& name) {
    for (const EnvironmentVariable& variable : EnvironmentVariables()) {
      if (name == variable.name) return lookup(name);
    }
    throw InternalError("environment variable " + name + " is read but not listed");
  };
  ServerSettings settings;
  if (flags.model.empty()) throw Error("--model is required");
  settings.model = flags.model;
  if (flags.host) settings.host = *flags.host;
  if (flags.port) {
    if (*flags.port < 0 || *flags.port > 65535) {
      throw Error(fmt::format("--port must be between 0 and 65535, got {}", *flags.port));
    }
    settings.port = *flags.port;
  }
  settings.served_model_name =
      flags.served_model_name ? *flags.served_model_name : ModelStem(flags.model);
  if (settings.served_model_name.empty()) throw Error("--served-model-name must not be empty");

  if (!flags.api_keys.empty()) {
    settings.api_keys = flags.api_keys;
  } else if (auto key = env("REPRISE_API_KEY"); key && !key->empty()) {
    settings.api_keys = {*key};
  }
  if (flags.api_keys_file) settings.api_keys_file = *flags.api_keys_file;
  if (flags.cache_secret_file) settings.cache_secret_file = *flags.cache_secret_file;
  if (flags.share_cache_across_tenants) {
    settings.share_cache_across_tenants = *flags.share_cache_across_tenants;
  }
  if (flags.metrics_require_auth) settings.metrics_require_auth = *flags.metrics_require_auth;
  if (settings.metrics_require_auth && settings.api_keys.empty() &&
      settings.api_keys_file.empty()) {
    throw Error("--metrics-require-auth needs --api-key or --api-keys-file");
  }

  // Prefix caching: flag, else the environment switches, else on.
  if (std::optional<bool> from_env = ReuseFromEnvironment(env)) {
    settings.enable_prefix_caching = *from_env;
  }
  if (flags.enable_prefix_caching) settings.enable_prefix_caching = *flags.enable_prefix_caching;

  if (flags.block_size) {
    CheckBlockSize(*flags.block_size, "--block-size");
    settings.block_size = *flags.block_size;
  } else if (auto text = env("SEQ_SIZE_PER_BLOCK")) {
    int64_t value = ParseIntText(*text, "environment variable SEQ_SIZE_PER_BLOCK", 1, 256);
    CheckBlockSize(static_cast<int>(value), "environment variable SEQ_SIZE_PER_BLOCK");
    settings.block_size = static_cast<int>(value);
  }

  if (flags.kv_cache_memory) {
    settings.kv_cache_memory_bytes = ParseByteSize(*flags.kv_cache_memory);
    if (settings.kv_cache_memory_bytes == 0) throw Error("--kv-cache-memory must not be zero");
  }
  if (flags.kv_disk_path) {
    if (flags.kv_disk_path->empty()) throw Error("--kv-disk-path must not be empty");
    settings.kv_disk_path = *flags.kv_disk_path;
  }
  if (flags.kv_disk_size) {
    if (!flags.kv_disk_path) throw Error("--kv-disk-size needs --kv-disk-path");
    settings.kv_disk_size_bytes = ParseByteSize(*flags.kv_disk_size);
    if (settings.kv_disk_size_bytes == 0) throw Error("--kv-disk-size must not be zero");
  }
  // A Redis URL flag: checked, and refused without prefix caching (there is nothing to share).
  auto redis_url = [&](const std::optional<std::string>& value, const char* flag,
                       std::string& out) {
    if (!value) return;
    if (value->rfind("redis://", 0) != 0) {
      throw Error(fmt::format("{} must look like redis://HOST:PORT[/DB]", flag));
    }
    if (!settings.enable_prefix_caching) {
      throw Error(fmt::format("{} needs prefix caching, which is off", flag));
    }
    out = *value;
  };
  redis_url(flags.kv_redis_url, "--kv-redis-url", settings.kv_redis_url);
  redis_url(flags.kv_events_redis_url, "--kv-events-redis-url", settings.kv_events_redis_url);
  auto needs_url = [&](const char* flag) {
    if (!flags.kv_redis_url) throw Error(fmt::format("{} needs --kv-redis-url", flag));
  };
  auto needs_events = [&](const char* flag) {
    if (!flags.kv_events_redis_url)
      throw Error(fmt::format("{} needs --kv-events-redis-url", flag));
  };
  if (flags.kv_events_stream) {
    needs_events("--kv-events-stream");
    if (flags.kv_events_stream->empty()) throw Error("--kv-events-stream must not be empty");
    settings.kv_events_stream = *flags.kv_events_stream;
  }
  if (flags.kv_events_max_len) {
    needs_events("--kv-events-max-len");
    if (*flags.kv_events_max_len < 1) throw Error("--kv-events-max-len must be at least 1");
    settings.kv_events_max_len = static_cast<size_t>(*flags.kv_events_max_len);
  }
  if (flags.replica_id) {
    if (flags.replica_id->empty() ||
        flags.replica_id->find_first_of(" \t\r\n") != std::string::npos) {
      throw Error("--replica-id must be a non-empty word without spaces");
    }
    settings.replica_id = *flags.replica_id;
  }
  if (auto password = env("REDIS_PASSWORD"); password && !password->empty()) {
    settings.kv_redis_password = *password;
  }
  if (flags.kv_redis_password_file) {
    if (!flags.kv_redis_url && !flags.kv_events_redis_url) {
      throw Error("--kv-redis-password-file needs --kv-redis-url or --kv-events-redis-url");
    }
    settings.kv_redis_password_file = *flags.kv_redis_password_file;
  }
  if (flags.kv_redis_ttl) {
    needs_url("--kv-redis-ttl");
    settings.kv_redis_ttl_seconds = ParseDurationSeconds(*flags.kv_redis_ttl, "--kv-redis-ttl");
  }
  if (flags.kv_redis_size) {
    needs_url("--kv-redis-size");
    settings.kv_redis_size_bytes = ParseByteSize(*flags.kv_redis_size);
    if (settings.kv_redis_size_bytes == 0) throw Error("--kv-redis-size must not be zero");
  }
  if (settings.kv_disk_path.size() > 0 && !settings.enable_prefix_caching) {
    throw Error("--kv-disk-path needs prefix caching, which is off");
  }
  if (flags.kv_type) {
    try {
      ParseKvType(*flags.kv_type);  // the one list of KV types
    } catch (const Error& e) {
      throw Error(fmt::format("--kv-type: {}", e.what()));
    }
    settings.kv_type = *flags.kv_type;
  }
  if (flags.max_batch_tokens) {
    CheckPositive(*flags.max_batch_tokens, "--max-batch-tokens");
    settings.max_batch_tokens = *flags.max_batch_tokens;
  }
  if (flags.max_running_requests) {
    CheckPositive(*flags.max_running_requests, "--max-running-requests");
    settings.max_running_requests = *flags.max_running_requests;
  }
  // A policy flag: one of the engine's names, refused before the model is loaded.
  auto policy = [](const std::optional<std::string>& value, bool (*known)(const std::string&),
                   const char* names, const char* flag, std::string& setting) {
    if (!value) return;
    if (!known(*value)) throw Error(fmt::format("{} must be {}, got '{}'", flag, names, *value));
    setting = *value;
  };
  policy(flags.schedule_policy, IsSchedulePolicy, kSchedulePolicyNames, "--schedule-policy",
         settings.schedule_policy);
  policy(flags.eviction_policy, IsEvictionPolicy, kEvictionPolicyNames, "--eviction-policy",
         settings.eviction_policy);
  if (flags.mmap_weights) settings.mmap_weights = *flags.mmap_weights;
  if (flags.threads) {
    if (*flags.threads < 0) throw Error("--threads must be 0 (every core) or positive");
    settings.threads = *flags.threads;
  }
  if (flags.max_context) {
    if (*flags.max_context < 0) throw Error("--max-context must be 0 (the model's) or positive");
    settings.max_context = *flags.max_context;
  }
  if (flags.chat_template) settings.chat_template = *flags.chat_template;
  if (flags.max_queued_requests) {
    CheckPositive(*flags.max_queued_requests, "--max-queued-requests");
    settings.max_queued_requests = static_cast<size_t>(*flags.max_queued_requests);
  }
  if (flags.max_body_size) {
    settings.max_body_bytes = ParseByteSize(*flags.max_body_size);
    if (settings.max_body_bytes < 1024) throw Error("--max-body-size must be at least 1KiB");
  }
  if (flags.http_threads) {
    if (*flags.http_threads < 2 || *flags.http_threads > 4096) {
      throw Error(
          fmt::format("--http-threads must be between 2 and 4096, got {}", *flags.http_threads));
    }
    settings.http_threads = *flags.http_threads;
  }
  if (flags.max_connections) {
    CheckPositive(*flags.max_connections, "--max-connections");
    settings.max_connections = static_cast<size_t>(*flags.max_connections);
  }
  if (flags.max_connections_per_client) {
    CheckPositive(*flags.max_connections_per_client, "--max-connections-per-client");
    settings.max_connections_per_client = static_cast<size_t>(*flags.max_connections_per_client);
  }
  if (flags.shutdown_timeout) {
    if (!std::isfinite(*flags.shutdown_timeout) || *flags.shutdown_timeout < 0 ||
        *flags.shutdown_timeout > 86400) {
      throw Error(fmt::format("--shutdown-timeout must be between 0 and 86400 seconds, got {}",
                              *flags.shutdown_timeout));
    }
    settings.shutdown_timeout_seconds = *flags.shutdown_timeout;
  }

  for (const std::string& list : flags.allowed_origins) {
    std::vector<std::string> origins = SplitOrigins(list);
    settings.allowed_origins.insert(settings.allowed_origins.end(), origins.begin(), origins.end());
  }

  // Task prompts: the flag, else MULTI_TASK_PROMPT (a file), else MULTI_TASK_PROMPT_STR.
  std::optional<std::string> env_file = env("MULTI_TASK_PROMPT");
  std::optional<std::string> env_text = env("MULTI_TASK_PROMPT_STR");
  if (flags.multi_task_prompt) {
    settings.task_prompts_file = *flags.multi_task_prompt;
  } else if (env_file && !TrimAsciiSpace(*env_file).empty()) {
    if (env_text && !TrimAsciiSpace(*env_text).empty()) {
      throw Error("both MULTI_TASK_PROMPT and MULTI_TASK_PROMPT_STR are set; set one of them");
    }
    settings.task_prompts_file = TrimAsciiSpace(*env_file);
  } else if (env_text && !TrimAsciiSpace(*env_text).empty()) {
    settings.task_prompts_json = *env_text;
  }
  return settings;
}

std::string DescribeSettings(const ServerSettings& settings) {
  std::string task_prompts = "none";
  if (!settings.task_prompts_file.empty()) {
    task_prompts = "file " + settings.task_prompts_file;
  } else if (!settings.task_prompts_json.empty()) {
    task_prompts =
        fmt::format("MULTI_TASK_PROMPT_STR ({} bytes)", settings.task_prompts_json.size());
  }
  return fmt::format(
      "model: {}, served_model_name: {}, host: {}, port: {}, reuse_cache: {}, block_size: {}, "
      "kv_cache_memory: {}, kv_disk: {}, kv_redis: {}, kv_type: {}, max_batch_tokens: {}, "
      "max_running_requests: {}, "
      "schedule_policy: {}, eviction_policy: {}, threads: {}, weights: {}, max_context: {}, "
      "chat_template: {}, "
      "task_prompts: {}, max_queued_requests: {}, max_body_size: {}, http_threads: {}, "
      "max_connections: {} ({} per client), shutdown_timeout: {} s, api_keys: {}{}, "
      "share_cache_across_tenants: {}, metrics_require_auth: {}, allowed_origins: {}",
      settings.model, settings.served_model_name, settings.host, settings.port,
      settings.enable_prefix_caching, settings.block_size,
      settings.kv_cache_memory_bytes == 0 ? std::string("auto")
                                          : FormatByteSize(settings.kv_cache_memory_bytes),
      settings.kv_disk_path.empty()
          ? std::string("none")
          : fmt::format("{} ({})", settings.kv_disk_path,
                        settings.kv_disk_size_bytes == 0
                            ? std::string("no cap")
                            : FormatByteSize(settings.kv_disk_size_bytes)),
      settings.kv_redis_url.empty()
          ? std::string("none")
          : fmt::format("{} (ttl {} s, {})", RedactUrl(settings.kv_redis_url),
                        settings.kv_redis_ttl_seconds,
                        settings.kv_redis_size_bytes == 0
                            ? std::string("no bound")
                            : FormatByteSize(settings.kv_redis_size_bytes)),
      settings.kv_type, settings.max_batch_tokens, settings.max_running_requests,
      settings.schedule_policy, settings.eviction_policy,
      settings.threads == 0 ? std::string("all cores") : std::to_string(settings.threads),
      settings.mmap_weights ? "mapped" : "huge-page memory",
      settings.max_context == 0 ? std::string("model's") : std::to_string(settings.max_context),
      settings.chat_template.empty() ? std::string("model's") : settings.chat_template,
      task_prompts, settings.max_queued_requests, FormatByteSize(settings.max_body_bytes),
      settings.http_threads, settings.max_connections, settings.max_connections_per_client,
      settings.shutdown_timeout_seconds,
      settings.api_keys.empty() ? std::string("none")
                                : fmt::format("{} given", settings.api_keys.size()),
      settings.api_keys_file.empty() ? std::string() : ", file " + settings.api_keys_file,
      settings.share_cache_across_tenants, settings.metrics_require_auth,
      settings.allowed_origins.empty()
          ? "none"
          : fmt::format("{}", fmt::join(settings.allowed_origins, ",")));
}

TenantSetup MakeTenantSetup(const ServerSettings& settings) {
  TenantSetup setup;
  if (!settings.api_keys_file.empty()) {
    setup.keys =
        ParseApiKeys(ReadTextFile(settings.api_keys_file, "API keys file"), settings.api_keys_file);
    if (setup.keys.empty()) {
      throw Error(fmt::format("the API keys file '{}' holds no key", settings.api_keys_file));
    }
  }
  for (const std::string& key : settings.api_keys) {
    ApiKeyEntry entry = KeyOfItsOwn(key);
    for (const ApiKeyEntry& other : setup.keys) {
      if (other.key == key) throw Error("an --api-key is also in the API keys file");
    }
    setup.keys.push_back(std::move(entry));
  }
  if (!settings.cache_secret_file.empty()) {
    setup.cache_secret = ReadCacheSecret(settings.cache_secret_file);
  } else if (!setup.keys.empty() && !settings.kv_disk_path.empty()) {
    // Kept beside the disk tier's blocks: a restart derives the same tenant salts, so the blocks
    // it finds there still hit.
    setup.cache_secret = LoadOrCreateCacheSecret(settings.kv_disk_path);
  }
  return setup;
}

EngineConfig MakeEngineConfig(const ServerSettings& settings) {
  EngineConfig config;
  config.model_path = settings.model;
  config.enable_prefix_caching = settings.enable_prefix_caching;
  config.block_size = settings.block_size;
  config.kv_cache_memory_bytes = settings.kv_cache_memory_bytes;
  config.kv_type = settings.kv_type;
  config.kv_disk_path = settings.kv_disk_path;
  config.kv_disk_size_bytes = settings.kv_disk_size_bytes;
  config.kv_redis_url = settings.kv_redis_url;
  config.kv_redis_password_file = settings.kv_redis_password_file;
  config.kv_redis_password = settings.kv_redis_password;
  config.kv_redis_ttl_seconds = settings.kv_redis_ttl_seconds;
  config.kv_redis_size_bytes = settings.kv_redis_size_bytes;
  config.kv_events_redis_url = settings.kv_events_redis_url;
  config.kv_events_stream = settings.kv_events_stream;
  config.kv_events_max_len = settings.kv_events_max_len;
  config.kv_replica_id = settings.replica_id;  // serve fills in HOST:PORT when empty
  config.max_batch_tokens = settings.max_batch_tokens;
  config.max_running_requests = settings.max_running_requests;
  config.schedule_policy = settings.schedule_policy;
  config.eviction_policy = settings.eviction_policy;
  config.max_queued_requests = settings.max_queued_requests;
  config.num_threads = settings.threads;
  config.mmap_weights = settings.mmap_weights;
  config.max_context = settings.max_context;
  config.chat_template = settings.chat_template;
  if (!settings.task_prompts_file.empty()) {
    config.task_prompts_json = ReadTextFile(settings.task_prompts_file, "task prompt file");
  } else {
    config.task_prompts_json = settings.task_prompts_json;
  }
  return config;
}

}  // namespace reprise::server
