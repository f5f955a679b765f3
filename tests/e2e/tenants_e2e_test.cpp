// End to end: tenants from --api-keys-file against the TinyStories fixture model. A tenant reads
// its own cache; another reads nothing of it even sending the same cache_salt, and cannot clear
// it; an admin can. With --share-cache-across-tenants the same probe hits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
                                   Fixture("models/TinyStories-656K-f32.gguf"),
                                   "--served-model-name",
                                   "tiny",
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

TEST(TenantsE2eTest, SharingAcrossTenantsIsAnExplicitChoice) {
  REPRISE_REQUIRE_FIXTURES();
  ServerProcess server(ServeArgs({"--share-cache-across-tenants"}));
  const int port = server.port();
  const std::string prompt = Secret();
  EXPECT_EQ(CachedTokens(port, "victim-key-0001", prompt, ""), 0);
  EXPECT_GT(CachedTokens(port, "attacker-key-01", prompt, ""), 64);
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
