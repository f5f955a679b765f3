// Settings: flags over environment over defaults, every environment switch, bad values.
#include "server/settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace reprise::server {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

ServeFlags Flags() {
  ServeFlags flags;
  flags.model = "/models/tiny-model.gguf";
  return flags;
}

TEST(SettingsTest, AModelFolderIsServedUnderItsWholeName) {
  const std::filesystem::path folder = testing::ScratchDir() / "Llama-3.2-1B.Instruct";
  std::filesystem::create_directories(folder);
  ServeFlags flags;
  for (const std::string& path : {folder.string(), folder.string() + "/"}) {
    flags.model = path;
    EXPECT_EQ(ResolveSettings(flags, FakeEnv({})).served_model_name, "Llama-3.2-1B.Instruct")
        << path;
  }
}

TEST(SettingsTest, DefaultsWithoutFlagsOrEnvironment) {
  ServerSettings settings = ResolveSettings(Flags(), FakeEnv({}));
  EXPECT_EQ(settings.model, "/models/tiny-model.gguf");
  EXPECT_EQ(settings.served_model_name, "tiny-model");
  EXPECT_EQ(settings.host, "127.0.0.1");
  EXPECT_EQ(settings.port, 8000);
  EXPECT_TRUE(settings.enable_prefix_caching);
  EXPECT_EQ(settings.block_size, 16);
  EXPECT_EQ(settings.kv_cache_memory_bytes, 0u);
  EXPECT_EQ(settings.max_body_bytes, 16u << 20);
  EXPECT_EQ(settings.http_threads, 64);
  EXPECT_EQ(settings.schedule_policy, "cache-aware");
  EXPECT_EQ(settings.eviction_policy, "scan-resistant");
  EXPECT_TRUE(settings.task_prompts_file.empty());
  EXPECT_TRUE(settings.task_prompts_json.empty());
  EXPECT_TRUE(settings.api_keys.empty());
  EXPECT_FALSE(settings.mmap_weights);
}

// The list behind docs/configuration.md is the list the code reads: every listed variable is
// looked up (and ResolveSettings refuses to look up one that is not listed).
TEST(SettingsTest, EveryListedEnvironmentVariableIsRead) {
  std::set<std::string> read;
  EnvLookup recording = [&read](const std::string& name) -> std::optional<std::string> {
    read.insert(name);
    return std::nullopt;
  };
  ResolveSettings(Flags(), recording);
  std::set<std::string> listed;
  for (const EnvironmentVariable& variable : EnvironmentVariables()) listed.insert(variable.name);
  EXPECT_EQ(read, listed);
}

TEST(SettingsTest, ModelIsRequired) {
  EXPECT_THROW(ResolveSettings(ServeFlags{}, FakeEnv({})), Error);
}

TEST(SettingsTest, EachReuseVariableTurnsCachingOff) {
  for (const char* name : {"NIM_ENABLE_KV_CACHE_REUSE", "REUSE_CACHE", "ENABLE_PREFIX_CACHING"}) {
    for (const char* off : {"0", "false", "FALSE", "False", " off "}) {
      SCOPED_TRACE(std::string(name) + "=" + off);
      EXPECT_FALSE(ResolveSettings(Flags(), FakeEnv({{name, off}})).enable_prefix_caching);
    }
    for (const char* on : {"1", "true", "TRUE", "True", "yes"}) {
      SCOPED_TRACE(std::string(name) + "=" + on);
      EXPECT_TRUE(ResolveSettings(Flags(), FakeEnv({{name, on}})).enable_prefix_caching);
    }
  }
}

TEST(SettingsTest, InvalidReuseValueNamesTheVariable) {
  try {
    ResolveSettings(Flags(), FakeEnv({{"REUSE_CACHE", "maybe"}}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("REUSE_CACHE"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("maybe"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ResolveSettings(Flags(), FakeEnv({{"ENABLE_PREFIX_CACHING", ""}})), Error);
  EXPECT_THROW(ResolveSettings(Flags(), FakeEnv({{"NIM_ENABLE_KV_CACHE_REUSE", "2"}})), Error);
}

TEST(SettingsTest, ContradictingReuseVariablesAreAnError) {
  EXPECT_THROW(
      ResolveSettings(Flags(), FakeEnv({{"REUSE_CACHE", "1"}, {"ENABLE_PREFIX_CACHING", "0"}})),
      Error);
  // Agreeing ones are fine.
  EXPECT_FALSE(ResolveSettings(
                   Flags(), FakeEnv({{"REUSE_CACHE", "0"}, {"NIM_ENABLE_KV_CACHE_REUSE", "false"}}))
                   .enable_prefix_caching);
}

TEST(SettingsTest, FlagWinsOverEnvironment) {
  ServeFlags flags = Flags();
  flags.enable_prefix_caching = true;
  EXPECT_TRUE(ResolveSettings(flags, FakeEnv({{"REUSE_CACHE", "0"}})).enable_prefix_caching);
  flags.enable_prefix_caching = false;
  EXPECT_FALSE(
      ResolveSettings(flags, FakeEnv({{"NIM_ENABLE_KV_CACHE_REUSE", "1"}})).enable_prefix_caching);
  flags.block_size = 32;
  EXPECT_EQ(ResolveSettings(flags, FakeEnv({{"SEQ_SIZE_PER_BLOCK", "64"}})).block_size, 32);
}

TEST(SettingsTest, BlockSizeFromEnvironment) {
  EXPECT_EQ(ResolveSettings(Flags(), FakeEnv({{"SEQ_SIZE_PER_BLOCK", "64"}})).block_size, 64);
  EXPECT_EQ(ResolveSettings(Flags(), FakeEnv({{"SEQ_SIZE_PER_BLOCK", " 8 "}})).block_size, 8);
  for (const char* bad : {"0", "24", "512", "x", "-16", "16.0", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ResolveSettings(Flags(), FakeEnv({{"SEQ_SIZE_PER_BLOCK", bad}})), Error);
  }
  ServeFlags flags = Flags();
  flags.block_size = 12;
  EXPECT_THROW(ResolveSettings(flags, FakeEnv({})), Error);
}

TEST(SettingsTest, TaskPromptsFromFlagFileEnvOrText) {
  ServeFlags flags = Flags();
  EXPECT_EQ(
      ResolveSettings(flags, FakeEnv({{"MULTI_TASK_PROMPT", "/tmp/tasks.json"}})).task_prompts_file,
      "/tmp/tasks.json");
  ServerSettings from_text =
      ResolveSettings(flags, FakeEnv({{"MULTI_TASK_PROMPT_STR", R"([{"task_id": 1}])"}}));
  EXPECT_EQ(from_text.task_prompts_json, R"([{"task_id": 1}])");
  EXPECT_TRUE(from_text.task_prompts_file.empty());
  // Both variables at once is ambiguous.
  EXPECT_THROW(ResolveSettings(flags, FakeEnv({{"MULTI_TASK_PROMPT", "/tmp/a.json"},
                                               {"MULTI_TASK_PROMPT_STR", "[]"}})),
               Error);
  // The flag wins over both.
  flags.multi_task_prompt = "/tmp/flag.json";
  ServerSettings from_flag = ResolveSettings(
      flags, FakeEnv({{"MULTI_TASK_PROMPT", "/tmp/a.json"}, {"MULTI_TASK_PROMPT_STR", "[]"}}));
  EXPECT_EQ(from_flag.task_prompts_file, "/tmp/flag.json");
  EXPECT_TRUE(from_flag.task_prompts_json.empty());
}

TEST(SettingsTest, ApiKeyFromFlagOrEnvironment) {
  ServeFlags flags = Flags();
  EXPECT_EQ(ResolveSettings(flags, FakeEnv({{"REPRISE_API_KEY", "k1"}})).api_keys,
            std::vector<std::string>{"k1"});
  flags.api_keys = {"k2", "k3"};
  EXPECT_EQ(ResolveSettings(flags, FakeEnv({{"REPRISE_API_KEY", "k1"}})).api_keys,
            (std::vector<std::string>{"k2", "k3"}));
}

TEST(SettingsTest, AllowedOriginsFromCommaListsAndRepeats) {
  ServeFlags flags = Flags();
  EXPECT_TRUE(ResolveSettings(flags, FakeEnv({})).allowed_origins.empty());
  flags.allowed_origins = {"http://a.example, https://b.example:8443", "*"};
  EXPECT_EQ(ResolveSettings(flags, FakeEnv({})).allowed_origins,
            (std::vector<std::string>{"http://a.example", "https://b.example:8443", "*"}));
  for (const char* bad :
       {"a.example", "http://a.example/", "http://a.example/x", "", "http://a.example,", "://x"}) {
    flags.allowed_origins = {bad};
    EXPECT_THROW(ResolveSettings(flags, FakeEnv({})), Error) << bad;
  }
}

TEST(SettingsTest, FlagRanges) {
  auto bad = [](auto set) {
    ServeFlags flags = Flags();
    set(flags);
    EXPECT_THROW(ResolveSettings(flags, [](const std::string&) { return std::nullopt; }), Error);
  };
  bad([](ServeFlags& f) { f.port = 70000; });
  bad([](ServeFlags& f) { f.port = -1; });
  bad([](ServeFlags& f) { f.max_batch_tokens = 0; });
  bad([](ServeFlags& f) { f.threads = -2; });
  bad([](ServeFlags& f) { f.max_context = -1; });
  bad([](ServeFlags& f) { f.kv_cache_memory = "lots"; });
  bad([](ServeFlags& f) { f.kv_cache_memory = "0"; });
  bad([](ServeFlags& f) { f.kv_type = "q4"; });
  bad([](ServeFlags& f) { f.max_queued_requests = 0; });
  bad([](ServeFlags& f) { f.http_threads = 1; });
  bad([](ServeFlags& f) { f.max_body_size = "12"; });
  bad([](ServeFlags& f) { f.served_model_name = ""; });
  bad([](ServeFlags& f) { f.schedule_policy = "priority"; });
  bad([](ServeFlags& f) { f.eviction_policy = "mru"; });
  ServeFlags flags = Flags();
  flags.port = 0;
  flags.kv_cache_memory = "512MiB";
  flags.served_model_name = "tiny";
  flags.max_body_size = "1MiB";
  flags.schedule_policy = "fcfs";
  flags.eviction_policy = "lru";
  ServerSettings settings = ResolveSettings(flags, FakeEnv({}));
  EXPECT_EQ(settings.port, 0);
  EXPECT_EQ(settings.kv_cache_memory_bytes, 512u << 20);
  EXPECT_EQ(settings.served_model_name, "tiny");
  EXPECT_EQ(settings.max_body_bytes, 1u << 20);
  EXPECT_EQ(settings.schedule_policy, "fcfs");
  EXPECT_EQ(MakeEngineConfig(settings).schedule_policy, "fcfs");
  EXPECT_EQ(settings.eviction_policy, "lru");
  EXPECT_EQ(MakeEngineConfig(settings).eviction_policy, "lru");
}

TEST(SettingsTest, BoolText) {
  EXPECT_EQ(ParseBoolText("TRUE"), true);
  EXPECT_EQ(ParseBoolText("0"), false);
  EXPECT_EQ(ParseBoolText("nope"), std::nullopt);
}

TEST(SettingsTest, DescribePrintsEffectiveSettings) {
  std::string line = DescribeSettings(
      ResolveSettings(Flags(), FakeEnv({{"REUSE_CACHE", "0"}, {"SEQ_SIZE_PER_BLOCK", "32"}})));
  EXPECT_NE(line.find("reuse_cache: false"), std::string::npos) << line;
  EXPECT_NE(line.find("block_size: 32"), std::string::npos) << line;
  EXPECT_NE(line.find("api_keys: none"), std::string::npos) << line;
}

TEST(SettingsTest, EngineConfigCarriesSettingsAndReadsTaskFile) {
  auto path = testing::ScratchDir() / "tasks.json";
  {
    std::ofstream file(path);
    file << R"([{"task_id": 1, "prompt": "You are helpful."}])";
  }
  ServeFlags flags = Flags();
  flags.multi_task_prompt = path.string();
  flags.kv_cache_memory = "1GiB";
  flags.max_queued_requests = 7;
  ServerSettings settings = ResolveSettings(flags, FakeEnv({{"REUSE_CACHE", "0"}}));
  EngineConfig config = MakeEngineConfig(settings);
  EXPECT_EQ(config.model_path, flags.model);
  EXPECT_FALSE(config.enable_prefix_caching);
  EXPECT_EQ(config.kv_cache_memory_bytes, 1ull << 30);
  EXPECT_EQ(config.max_queued_requests, 7u);
  EXPECT_EQ(config.task_prompts_json, R"([{"task_id": 1, "prompt": "You are helpful."}])");
  EXPECT_FALSE(config.mmap_weights);
  flags.mmap_weights = true;  // --mmap
  EXPECT_TRUE(MakeEngineConfig(ResolveSettings(flags, FakeEnv({}))).mmap_weights);
  std::filesystem::remove(path);
  EXPECT_THROW(MakeEngineConfig(settings), Error);  // the file is gone

  ServerSettings from_text = ResolveSettings(Flags(), FakeEnv({{"MULTI_TASK_PROMPT_STR", "[]"}}));
  EXPECT_EQ(MakeEngineConfig(from_text).task_prompts_json, "[]");
}

}  // namespace
}  // namespace reprise::server

namespace reprise::server {
namespace {

TEST(SettingsTest, RedisTierFlags) {
  ServeFlags flags;
  flags.model = "/models/tiny-model.gguf";
  flags.kv_redis_url = "redis://:hunter2@127.0.0.1:6390/1";
  flags.kv_redis_ttl = "90m";
  flags.kv_redis_size = "2GiB";
  ServerSettings settings =
      ResolveSettings(flags, [](const std::string&) { return std::optional<std::string>(); });
  EXPECT_EQ(settings.kv_redis_ttl_seconds, 5400);
  EXPECT_EQ(settings.kv_redis_size_bytes, size_t{2} << 30);
  std::string described = DescribeSettings(settings);
  EXPECT_EQ(described.find("hunter2"), std::string::npos) << described;
  EXPECT_NE(described.find("127.0.0.1:6390/1"), std::string::npos) << described;
  EngineConfig config = MakeEngineConfig(settings);
  EXPECT_EQ(config.kv_redis_url, *flags.kv_redis_url);
  EXPECT_EQ(config.kv_redis_ttl_seconds, 5400);

  auto refused = [&](ServeFlags bad) {
    EXPECT_THROW(
        ResolveSettings(bad, [](const std::string&) { return std::optional<std::string>(); }),
        Error);
  };
  ServeFlags bad = flags;
  bad.kv_redis_ttl = "soon";
  refused(bad);
  bad = flags;
  bad.kv_redis_url = "http://127.0.0.1:6379";
  refused(bad);
  bad = flags;
  bad.kv_redis_url.reset();  // the other flags need the URL
  refused(bad);
  bad = flags;
  bad.enable_prefix_caching = false;
  refused(bad);
}

}  // namespace
}  // namespace reprise::server
