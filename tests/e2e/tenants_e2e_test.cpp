// End to end: tenants from --api-keys-file against the TinyStories fixture model. A tenant reads
// its own cache; another reads nothing of it even sending the same cache_salt, and cannot clear
// it; an admin can. With --share-cache-across-tenants the same probe hits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

std::filesystem::path KeysFile() {
  std::filesystem::path path = ScratchDir() / "tenant-keys.txt";
  std::ofstream(path) << "# victim, attacker and operator\n"
                         "victim-key-0001 victim user\n"
                         "attacker-key-01 attacker user\n"
                         "operator-key-01 ops admin\n";
  return path;
}

std::vector<std::string> ServeArgs(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model",
                                   TinyStoriesPath(),
                                   "--served-model-name",
                                   kTinyModelName,
                                   "--kv-cache-memory",
                                   "64MiB",
                                   "--threads",
                                   "2",
                                   "--api-keys-file",
                                   KeysFile().string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

httplib::Headers As(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

std::string Secret() {
  std::string text = "The secret code of the little red house is ";
  for (int i = 0; i < 8; ++i) text += "blue bird, green tree, yellow sun and a happy dog. ";
  return text;
}

int64_t CachedTokens(int port, const std::string& key, const std::string& prompt,
                     const std::string& salt) {
  json body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  if (!salt.empty()) body["cache_salt"] = salt;
  HttpResult result = PostJson(port, "/v1/completions", body, As(key));
  EXPECT_EQ(result.status, 200) << result.body;
  if (result.status != 200) return -1;
  return result.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

TEST(TenantsE2eTest, TenantsNeverReadOrClearEachOthersCache) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(ServeArgs());
  const int port = server.port();
  const std::string prompt = Secret();
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, "victim-salt"), 0);
  EXPECT_GT(CachedTokens(port, "victim-key-0001", prompt, "victim-salt"), 64);
  // The attacker sends the victim's prompt and salt: nothing is shared.
  EXPECT_EQ(CachedTokens(port, "attacker-key-01", prompt, "victim-salt"), 0);
  EXPECT_EQ(CachedTokens(port, "attacker-key-01", prompt, ""), 0);
  // It cannot clear the victim's blocks: clearing is its own tenant's only.
  EXPECT_EQ(PostJson(port, "/v1/cache/clear", {{"tenant", "victim"}}, As("attacker-key-01")).status,
            403);
  ASSERT_EQ(PostJson(port, "/v1/cache/clear", json::object(), As("attacker-key-01")).status, 200);
  EXPECT_GT(CachedTokens(port, "victim-key-0001", prompt, "victim-salt"), 64);
  // The operator clears the victim's tenant by name.
  HttpResult cleared =
      PostJson(port, "/v1/cache/clear", {{"tenant", "victim"}}, As("operator-key-01"));
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_GT(cleared.json["cleared_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, "victim-salt"), 0);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

// A user's clear of memory and disk drops its own blocks from the disk tier too, and nothing of
// another tenant's, whose next request still loads from disk.
TEST(TenantsE2eTest, ATenantsClearReachesTheDiskTierAndSparesOthers) {
  REPRISE_REQUIRE_FIXTURES();
  const std::filesystem::path dir = ScratchDir() / "tenant-disk";
  std::filesystem::remove_all(dir);
  ServerProcess server(ServeArgs({"--kv-disk-path", dir.string()}));
  const int port = server.port();
  const std::string prompt = Secret();
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, ""), 0);
  EXPECT_EQ(CachedTokens(port, "attacker-key-01", prompt, ""), 0);
  // The operator empties memory: both tenants' blocks are written to disk.
  ASSERT_EQ(PostJson(port, "/v1/cache/clear", json::object(), As("operator-key-01")).status, 200);
  HttpResult cleared =
      PostJson(port, "/v1/cache/clear", {{"tiers", {"memory", "disk"}}}, As("victim-key-0001"));
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.json["tenant"], "victim");
  EXPECT_GT(cleared.json["cleared_blocks"].get<int64_t>(), 2);
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, ""), 0);
  json body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  HttpResult other = PostJson(port, "/v1/completions", body, As("attacker-key-01"));
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_GT(other.json["usage"]["cache_sources"]["disk"].get<int64_t>(), 64) << other.body;
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  std::filesystem::remove_all(dir);
}

TEST(TenantsE2eTest, SharingAcrossTenantsIsAnExplicitChoice) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(ServeArgs({"--share-cache-across-tenants"}));
  const int port = server.port();
  const std::string prompt = Secret();
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, ""), 0);
  EXPECT_GT(CachedTokens(port, "attacker-key-01", prompt, ""), 64);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

// The side-channel bench sees sharing: every hit probe reports the victim's tokens as cached,
// so its --max-auc check fails; with isolation cached_tokens tells nothing.
TEST(TenantsE2eTest, SideChannelBenchSeesSharingAndNotIsolation) {
  REPRISE_REQUIRE_FIXTURES();
  for (bool share : {true, false}) {
    std::vector<std::string> extra;
    if (share) extra.push_back("--share-cache-across-tenants");
    ServerProcess server(ServeArgs(extra));
    ProcessResult run = RunToExit(
        {REPRISE_BINARY, "bench", "side-channel", "--url",
         "http://127.0.0.1:" + std::to_string(server.port()), "--victim-key", "victim-key-0001",
         "--attacker-key", "attacker-key-01", "--probes", "6", "--prompt-words", "60"},
        {}, std::chrono::seconds(120));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    size_t at = run.output.find("cached_tokens (mean)");
    ASSERT_NE(at, std::string::npos) << run.output;
    std::istringstream line(run.output.substr(at + std::string("cached_tokens (mean)").size()));
    double hit_cached = 0, miss_cached = 0, auc = 0;
    line >> hit_cached >> miss_cached >> auc;
    if (share) {
      EXPECT_EQ(auc, 1.0) << run.output;
      EXPECT_GT(hit_cached, 32) << run.output;
    } else {
      // The attacker's own probes may share a first token or two with each other; never a
      // block of the victim's.
      EXPECT_LT(hit_cached, 16) << run.output;
    }
  }
}

// A short soak: its checks (no 5xx, gauges at 0, RSS flat) hold and it says so.
TEST(TenantsE2eTest, ShortSoakPassesItsChecks) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(ServeArgs());
  ProcessResult run = RunToExit({REPRISE_BINARY, "bench", "soak", "--url",
                                 "http://127.0.0.1:" + std::to_string(server.port()), "--api-key",
                                 "operator-key-01", "--duration", "6", "--clients", "6"},
                                {}, std::chrono::seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[ok] 5xx answers: 0"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

TEST(TenantsE2eTest, AMalformedKeysFileStopsStartUpNamingTheLine) {
  REPRISE_REQUIRE_FIXTURES();
  std::filesystem::path path = ScratchDir() / "bad-keys.txt";
  std::ofstream(path) << "victim-key-0001 victim user\nattacker-key-01 attacker\n";
  std::vector<std::string> argv = {REPRISE_BINARY, "serve", "--port", "0"};
  for (std::string& arg : ServeArgs()) argv.push_back(arg);
  argv.back() = path.string();
  ProcessResult run = RunToExit(argv, CleanServeEnvironment({}), std::chrono::seconds(60));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find(path.string() + ":2:"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace reprise::testing
