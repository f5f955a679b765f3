// Tenants: the API keys file, key lookup, per-tenant cache salts and secrets, and the routes
// that act per tenant (completions' salt and owner, /v1/cache/clear, /v1/cache/stats, /metrics).
#include "server/tenants.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "server/server_fixture.h"
#include "test_support.h"

namespace reprise::server {
namespace {

using reprise::testing::Get;
using reprise::testing::PostJson;

const char* kKeysFile =
    "# key tenant role\n"
    "\n"
    "alpha-key-0001 alpha user\n"
    "alpha-key-0002\talpha   user\n"
    "beta-key-00001 beta user\n"
    "root-key-00001 ops admin\n";

std::string ErrorOf(const std::string& text) {
  try {
    ParseApiKeys(text, "keys.txt");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TenantsTest, ParsesTheKeysFile) {
  std::vector<ApiKeyEntry> keys = ParseApiKeys(kKeysFile, "keys.txt");
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[1].key, "alpha-key-0002");
  EXPECT_EQ(keys[1].tenant, "alpha");
  EXPECT_EQ(keys[3].role, TenantRole::kAdmin);
}

TEST(TenantsTest, RefusesAMalformedKeysFileNamingTheLine) {
  EXPECT_NE(ErrorOf("good-key-0001 a user\nbad-key-0001 b\n").find("keys.txt:2:"),
            std::string::npos);
  EXPECT_NE(ErrorOf("good-key-0001 a root\n").find("keys.txt:1: the role must be"),
            std::string::npos);
  EXPECT_NE(ErrorOf("short a user\n").find("keys.txt:1: a key must be"), std::string::npos);
  EXPECT_NE(ErrorOf("good-key-0001 a/b user\n").find("tenant name"), std::string::npos);
  EXPECT_NE(ErrorOf("good-key-0001 a user\n#\ngood-key-0001 b user\n")
                .find("keys.txt:3: this "
                      "key is given twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf("good-key-0001 a user\ngood-key-0002 a admin\n").find("both roles"),
            std::string::npos);
}

TEST(TenantsTest, AuthenticatesEveryKeyOfATenant) {
  TenantRegistry registry(ParseApiKeys(kKeysFile, "keys.txt"), std::string(32, 's'), false);
  EXPECT_TRUE(registry.auth_required());
  const Tenant* a1 = registry.Authenticate("Bearer alpha-key-0001");
  const Tenant* a2 = registry.Authenticate("Bearer alpha-key-0002");
  ASSERT_NE(a1, nullptr);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(a1->name, "alpha");
  EXPECT_FALSE(a1->admin());
  EXPECT_TRUE(registry.Authenticate("Bearer root-key-00001")->admin());
  EXPECT_EQ(registry.Authenticate("Bearer alpha-key-000"), nullptr);
  EXPECT_EQ(registry.Authenticate("Bearer alpha-key-00011"), nullptr);
  EXPECT_EQ(registry.Authenticate("alpha-key-0001"), nullptr);
  EXPECT_EQ(registry.Authenticate(""), nullptr);
}

TEST(TenantsTest, WithoutKeysEveryCallerIsTheAnonymousAdmin) {
  TenantRegistry registry({}, "", false);
  EXPECT_FALSE(registry.auth_required());
  const Tenant* anyone = registry.Authenticate("");
  ASSERT_NE(anyone, nullptr);
  EXPECT_TRUE(anyone->admin());
  // A client's salt keys the cache exactly as it always did.
  EXPECT_EQ(registry.EngineSalt(*anyone, "mine"), "mine");
}

TEST(TenantsTest, TenantSaltsSeparateTenantsWhateverTheClientSends) {
  std::vector<ApiKeyEntry> keys = ParseApiKeys(kKeysFile, "keys.txt");
  TenantRegistry registry(keys, std::string(32, 's'), false);
  const Tenant& alpha = *registry.Find("alpha");
  const Tenant& beta = *registry.Find("beta");
  EXPECT_EQ(alpha.cache_salt.size(), 64u);
  EXPECT_NE(alpha.cache_salt, beta.cache_salt);
  EXPECT_NE(registry.EngineSalt(alpha, "x"), registry.EngineSalt(beta, "x"));
  EXPECT_NE(registry.EngineSalt(alpha, ""), registry.EngineSalt(beta, ""));
  EXPECT_NE(registry.EngineSalt(alpha, "x"), registry.EngineSalt(alpha, "y"));
  // Sending another tenant's engine salt as one's own cache_salt gets nowhere either.
  EXPECT_NE(registry.EngineSalt(beta, registry.EngineSalt(alpha, "x")),
            registry.EngineSalt(alpha, "x"));
  // The same secret gives the same salts (restarts keep hits); another secret others.
  TenantRegistry again(keys, std::string(32, 's'), false);
  EXPECT_EQ(again.Find("alpha")->cache_salt, alpha.cache_salt);
  TenantRegistry other(keys, std::string(32, 't'), false);
  EXPECT_NE(other.Find("alpha")->cache_salt, alpha.cache_salt);
  // Sharing on purpose: the client's salt alone.
  TenantRegistry shared(keys, std::string(32, 's'), true);
  EXPECT_EQ(shared.EngineSalt(*shared.Find("alpha"), "x"), "x");
  EXPECT_EQ(shared.EngineSalt(*shared.Find("beta"), "x"), "x");
}

TEST(TenantsTest, KeysGivenAloneAreTenantsOfTheirOwn) {
  ApiKeyEntry one = KeyOfItsOwn("first-key");
  ApiKeyEntry two = KeyOfItsOwn("second-key");
  EXPECT_NE(one.tenant, two.tenant);
  EXPECT_EQ(one.tenant, KeyOfItsOwn("first-key").tenant);
  EXPECT_EQ(one.tenant.rfind("key-", 0), 0u);
  EXPECT_EQ(one.role, TenantRole::kUser);
}

TEST(TenantsTest, CacheSecretIsCreatedOnceAndKept) {
  std::filesystem::path dir = reprise::testing::ScratchDir() / "secret-dir";
  std::filesystem::remove_all(dir);
  std::string first = LoadOrCreateCacheSecret(dir);
  EXPECT_EQ(first.size(), 32u);
  EXPECT_EQ(LoadOrCreateCacheSecret(dir), first);
  struct stat info {};
  ASSERT_EQ(::stat((dir / "cache-secret").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_NE(GenerateCacheSecret(), GenerateCacheSecret());
  std::ofstream(dir / "short") << "too short";
  EXPECT_THROW(ReadCacheSecret(dir / "short"), Error);
  std::filesystem::remove_all(dir);
}

class TenantRoutesTest : public HttpServerTest {
 protected:
  void StartWithTenants(bool metrics_require_auth = false) {
    HttpServerOptions options;
    options.api_keys = ParseApiKeys(kKeysFile, "keys.txt");
    options.metrics_require_auth = metrics_require_auth;
    Start(options);
  }
  static httplib::Headers As(const std::string& key) {
    return {{"Authorization", "Bearer " + key}};
  }
};

TEST_F(TenantRoutesTest, CompletionsAreKeyedAndOwnedByTheirTenant) {
  StartWithTenants();
  json body = {{"prompt", "hello"}, {"max_tokens", 1}, {"cache_salt", "shared-salt"}};
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("alpha-key-0001")).status, 200);
  GenerationRequest alpha = backend_->last_request();
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("beta-key-00001")).status, 200);
  GenerationRequest beta = backend_->last_request();
  EXPECT_NE(alpha.cache.cache_salt, beta.cache.cache_salt);
  EXPECT_NE(alpha.cache.cache_salt, "shared-salt");
  // The engine knows a tenant's blocks by its server-side salt, which no client can choose.
  EXPECT_FALSE(alpha.cache.owner.empty());
  EXPECT_NE(alpha.cache.owner, beta.cache.owner);
  EXPECT_NE(alpha.cache.owner, "alpha");
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("alpha-key-0002")).status, 200);
  EXPECT_EQ(backend_->last_request().cache.cache_salt, alpha.cache.cache_salt);
  ExpectError(PostJson(port_, "/v1/completions", body, As("nobody-key-01")), 401,
              "invalid_api_key");
}

TEST_F(TenantRoutesTest, UsersClearTheirOwnCacheAndAdminsAnyOrAll) {
  StartWithTenants();
  // Each tenant's owner, as its requests carry it.
  json body = {{"prompt", "hello"}, {"max_tokens", 1}};
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("alpha-key-0001")).status, 200);
  const std::string alpha = backend_->last_request().cache.owner;
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("beta-key-00001")).status, 200);
  const std::string beta = backend_->last_request().cache.owner;
  auto user = PostJson(port_, "/v1/cache/clear", json::object(), As("alpha-key-0001"));
  ASSERT_EQ(user.status, 200) << user.body;
  EXPECT_EQ(user.json["tenant"], "alpha");
  ExpectError(PostJson(port_, "/v1/cache/clear", {{"tenant", "beta"}}, As("alpha-key-0001")), 403,
              "forbidden");
  EXPECT_EQ(PostJson(port_, "/v1/cache/clear", {{"tenant", "alpha"}}, As("alpha-key-0001")).status,
            200);
  auto all = PostJson(port_, "/v1/cache/clear", json::object(), As("root-key-00001"));
  ASSERT_EQ(all.status, 200);
  EXPECT_TRUE(all.json["tenant"].is_null());
  EXPECT_EQ(PostJson(port_, "/v1/cache/clear", {{"tenant", "beta"}}, As("root-key-00001")).status,
            200);
  ExpectError(PostJson(port_, "/v1/cache/clear", {{"tenant", "gamma"}}, As("root-key-00001")), 400,
              "tenant_not_found");
  ExpectError(PostJson(port_, "/v1/cache/clear", json::object()), 401, "invalid_api_key");
  // A user's clear reaches every tier it names, for its own blocks only.
  auto tiers = PostJson(port_, "/v1/cache/clear", {{"tiers", {"memory", "disk", "remote"}}},
                        As("alpha-key-0002"));
  ASSERT_EQ(tiers.status, 200) << tiers.body;
  EXPECT_EQ(tiers.json["tenant"], "alpha");
  EXPECT_EQ(backend_->cleared_tiers(), (std::vector<std::string>{"memory", "disk", "remote"}));
  std::vector<std::optional<std::string>> expected = {alpha, alpha, std::nullopt, beta, alpha};
  EXPECT_EQ(backend_->cleared_owners(), expected);
}

TEST_F(TenantRoutesTest, StatsArePerTenant) {
  StartWithTenants();
  json body = {{"prompt", "hello there"}, {"max_tokens", 2}};
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("alpha-key-0001")).status, 200);
  ASSERT_EQ(PostJson(port_, "/v1/completions", body, As("alpha-key-0002")).status, 200);
  auto user = Get(port_, "/v1/cache/stats", As("beta-key-00001"));
  ASSERT_EQ(user.status, 200);
  EXPECT_EQ(user.json["tenant"]["name"], "beta");
  EXPECT_EQ(user.json["tenant"]["requests"], 0);
  EXPECT_FALSE(user.json.contains("blocks")) << user.body;
  EXPECT_FALSE(user.json.contains("tenants")) << user.body;
  auto alpha = Get(port_, "/v1/cache/stats", As("alpha-key-0001"));
  EXPECT_EQ(alpha.json["tenant"]["requests"], 2);
  EXPECT_EQ(alpha.json["tenant"]["completion_tokens"], 4);
  auto admin = Get(port_, "/v1/cache/stats", As("root-key-00001"));
  ASSERT_TRUE(admin.json.contains("blocks")) << admin.body;
  ASSERT_EQ(admin.json["tenants"].size(), 3u);
  EXPECT_EQ(admin.json["tenants"][0]["name"], "alpha");
  EXPECT_EQ(admin.json["tenants"][0]["requests"], 2);
}

TEST_F(TenantRoutesTest, MetricsCanRequireAKey) {
  StartWithTenants(/*metrics_require_auth=*/true);
  ExpectError(Get(port_, "/metrics"), 401, "invalid_api_key");
  EXPECT_EQ(Get(port_, "/metrics", As("beta-key-00001")).status, 200);
  EXPECT_EQ(Get(port_, "/health").status, 200);
}

}  // namespace
}  // namespace reprise::server
