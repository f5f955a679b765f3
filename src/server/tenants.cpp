#include "server/tenants.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/text.h"

namespace reprise::server {
namespace {

constexpr size_t kSecretBytes = 32;
constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMinKeyLength = 8;
constexpr const char* kSecretFileName = "cache-secret";

Digest HashKey(std::string_view key) {
  Sha256 hasher;
  hasher.Update("reprise.api-key.v1");
  hasher.Update(key);
  return hasher.Finish();
}

bool IsTenantName(const std::string& name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool IsKeyText(const std::string& key) {
  return key.size() >= kMinKeyLength &&
         std::all_of(key.begin(), key.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

std::string HmacHex(const std::string& secret, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &length) == nullptr) {
    throw Error("HMAC-SHA256 failed (OpenSSL)");
  }
  Digest digest{};
  std::memcpy(digest.data(), out, std::min<size_t>(length, digest.size()));
  return ToHex(digest);
}

}  // namespace

std::vector<ApiKeyEntry> ParseApiKeys(const std::string& text, const std::string& source) {
  std::vector<ApiKeyEntry> entries;
  std::set<std::string> seen;
  std::map<std::string, TenantRole> roles;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::string trimmed = TrimAsciiSpace(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    std::istringstream fields(trimmed);
    std::vector<std::string> parts;
    for (std::string part; fields >> part;) parts.push_back(part);
    auto fail = [&](const std::string& why) {
      return Error(
          fmt::format("{}:{}: {} (expected `KEY TENANT user|admin`)", source, number, why));
    };
    if (parts.size() != 3) throw fail(fmt::format("{} fields", parts.size()));
    ApiKeyEntry entry;
    entry.key = parts[0];
    entry.tenant = parts[1];
    if (!IsKeyText(entry.key)) {
      throw fail(fmt::format("a key must be at least {} printable characters", kMinKeyLength));
    }
    if (!IsTenantName(entry.tenant)) {
      throw fail("a tenant name is letters, digits, '.', '_' and '-'");
    }
    if (parts[2] == "user") {
      entry.role = TenantRole::kUser;
    } else if (parts[2] == "admin") {
      entry.role = TenantRole::kAdmin;
    } else {
      throw fail("the role must be user or admin");
    }
    if (!seen.insert(entry.key).second) throw fail("this key is given twice");
    auto [role, fresh] = roles.emplace(entry.tenant, entry.role);
    if (!fresh && role->second != entry.role) {
      throw fail(fmt::format("tenant '{}' has keys of both roles", entry.tenant));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

ApiKeyEntry KeyOfItsOwn(const std::string& key) {
  ApiKeyEntry entry;
  entry.key = key;
  entry.tenant = "key-" + ToHex(HashKey(key)).substr(0, 12);
  entry.role = TenantRole::kUser;
  return entry;
}

std::string GenerateCacheSecret() {
  std::string secret(kSecretBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()), static_cast<int>(kSecretBytes)) !=
      1) {
    throw Error("cannot generate a cache secret (OpenSSL RAND_bytes failed)");
  }
  return secret;
}

std::string ReadCacheSecret(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(fmt::format("cannot read the cache secret file '{}'", path.string()));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  std::string secret = bytes.str();
  if (secret.size() < kMinSecretBytes) {
    throw Error(fmt::format("the cache secret file '{}' holds {} bytes; it needs at least {}",
                            path.string(), secret.size(), kMinSecretBytes));
  }
  return secret;
}

std::string LoadOrCreateCacheSecret(const std::filesystem::path& dir) {
  std::filesystem::path path = dir / kSecretFileName;
  if (std::filesystem::exists(path)) return ReadCacheSecret(path);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::string secret = GenerateCacheSecret();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    // Another process made it first: use theirs.
    if (errno == EEXIST) return ReadCacheSecret(path);
    throw Error(fmt::format("cannot create the cache secret file '{}': {}", path.string(),
                            std::strerror(errno)));
  }
  bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced) {
    std::filesystem::remove(path, error);
    throw Error(fmt::format("cannot write the cache secret file '{}'", path.string()));
  }
  return secret;
}

TenantRegistry::TenantRegistry(const std::vector<ApiKeyEntry>& keys, const std::string& secret,
                               bool share_across_tenants)
    : share_(share_across_tenants) {
  if (keys.empty()) {
    tenants_.push_back(Tenant{"anonymous", TenantRole::kAdmin, ""});
    return;
  }
  REPRISE_CHECK(secret.size() >= kMinSecretBytes, "a cache secret of {} bytes", secret.size());
  for (const ApiKeyEntry& entry : keys) {
    auto it = std::find_if(tenants_.begin(), tenants_.end(),
                           [&](const Tenant& tenant) { return tenant.name == entry.tenant; });
    if (it == tenants_.end()) {
      tenants_.push_back(Tenant{entry.tenant, entry.role,
                                HmacHex(secret, "reprise.tenant-salt.v1\n" + entry.tenant)});
      it = tenants_.end() - 1;
    }
    keys_.push_back(Key{HashKey(entry.key), static_cast<size_t>(it - tenants_.begin())});
  }
}

const Tenant* TenantRegistry::Authenticate(std::string_view authorization) const {
  if (keys_.empty()) return &tenants_.front();
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  // Hashing first gives every comparison the same length; each stored key is compared, so the
  // time says nothing about which key (if any) matched or how much of it.
  Digest presented = HashKey(authorization.substr(kBearer.size()));
  const Tenant* found = nullptr;
  for (const Key& key : keys_) {
    bool equal = CRYPTO_memcmp(presented.data(), key.digest.data(), presented.size()) == 0;
    if (equal) found = &tenants_[key.tenant];
  }
  return found;
}

const Tenant* TenantRegistry::Find(const std::string& name) const {
  for (const Tenant& tenant : tenants_) {
    if (tenant.name == name) return &tenant;
  }
  return nullptr;
}

std::string TenantRegistry::EngineSalt(const Tenant& tenant, const std::string& client_salt) const {
  if (share_ || tenant.cache_salt.empty()) return client_salt;
  return fmt::format("tenant:{}:{}:{}", tenant.cache_salt, client_salt.size(), client_salt);
}

void TenantRegistry::RecordUsage(const std::string& tenant, const TenantUsage& usage) {
  std::lock_guard lock(mutex_);
  TenantUsage& total = usage_[tenant];
  total.requests += usage.requests;
  total.prompt_tokens += usage.prompt_tokens;
  total.cached_tokens += usage.cached_tokens;
  total.completion_tokens += usage.completion_tokens;
}

TenantUsage TenantRegistry::Usage(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  auto it = usage_.find(tenant);
  return it == usage_.end() ? TenantUsage{} : it->second;
}

}  // namespace reprise::server
