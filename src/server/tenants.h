// Tenants the server knows: API keys mapped to a tenant name and a role, and each tenant's
// server-side cache salt (HMAC-SHA256 of a server secret and the tenant's name), which the
// engine keys every block of the tenant's requests with, so that no tenant can read another's
// cache whatever cache_salt it sends.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"

namespace reprise::server {

enum class TenantRole { kUser, kAdmin };

struct ApiKeyEntry {
  std::string key;
  std::string tenant;
  TenantRole role = TenantRole::kUser;
};

struct Tenant {
  std::string name;
  TenantRole role = TenantRole::kUser;
  // Hex HMAC-SHA256(secret, name); empty for the anonymous tenant of a server without keys. Also
  // the owner (CacheOptions::owner) of the blocks the tenant's requests add: the engine and its
  // tiers keep only TenantSaltDigest of it.
  std::string cache_salt;
  bool admin() const { return role == TenantRole::kAdmin; }
};

// Parses an API keys file: one `KEY TENANT ROLE` per line (ROLE is `user` or `admin`), fields
// separated by spaces or tabs; blank lines and lines starting with `#` are skipped. Keys are
// printable ASCII without spaces, at least 8 characters; tenant names are letters, digits and
// `._-`. A tenant may have several keys (of one role). Throws reprise::Error naming
// `source:line` for a malformed line or a key given twice.
std::vector<ApiKeyEntry> ParseApiKeys(const std::string& text, const std::string& source);

// A key given with --api-key or REPRISE_API_KEY: a tenant of its own, named after a hash of the
// key ("key-" and 12 hex digits, stable across restarts and flag order), role user.
ApiKeyEntry KeyOfItsOwn(const std::string& key);

// 32 random bytes from OpenSSL.
std::string GenerateCacheSecret();
// The secret in `path` (its bytes, at least 16). Throws reprise::Error when it cannot.
std::string ReadCacheSecret(const std::filesystem::path& path);
// The secret kept in `dir`/cache-secret, created (mode 0600) on first use, so that a restart
// with the same directory keeps every tenant's salt and therefore its cache hits.
std::string LoadOrCreateCacheSecret(const std::filesystem::path& dir);

// Per-tenant request figures for /v1/cache/stats.
struct TenantUsage {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t completion_tokens = 0;
};

class TenantRegistry {
 public:
  // No keys: every caller is one anonymous admin tenant with no salt of its own (a client's
  // cache_salt works as it always did). `share_across_tenants`: tenants' salts are not mixed
  // into the engine's keys (their requests share blocks; a deliberate choice).
  TenantRegistry(const std::vector<ApiKeyEntry>& keys, const std::string& secret,
                 bool share_across_tenants);

  bool auth_required() const { return !keys_.empty(); }
  bool share_across_tenants() const { return share_; }
  // The tenant whose key `authorization` ("Bearer KEY") carries, or null. Every stored key is
  // compared, in constant time, whatever matches.
  const Tenant* Authenticate(std::string_view authorization) const;
  const Tenant* Find(const std::string& name) const;
  const std::vector<Tenant>& tenants() const { return tenants_; }

  // The cache_salt the engine keys `tenant`'s request with: its salt and the client's
  // (length-prefixed, so no two pairs collide), or the client's alone when shared.
  std::string EngineSalt(const Tenant& tenant, const std::string& client_salt) const;

  void RecordUsage(const std::string& tenant, const TenantUsage& usage);
  TenantUsage Usage(const std::string& tenant) const;

 private:
  struct Key {
    Digest digest;  // SHA-256 of the key
    size_t tenant;  // index in tenants_
  };
  std::vector<Key> keys_;
  std::vector<Tenant> tenants_;
  bool share_;
  mutable std::mutex mutex_;
  std::map<std::string, TenantUsage> usage_;
};

}  // namespace reprise::server
