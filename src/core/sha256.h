// SHA-256 (OpenSSL) for content keys of KV-cache blocks and model fingerprints.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace reprise {

using Digest = std::array<uint8_t, 32>;

// Incremental hasher; move-only because it owns an OpenSSL context.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view text) { Update(text.data(), text.size()); }
  template <typename T>
  void UpdateSpan(std::span<const T> values) {
    Update(values.data(), values.size_bytes());
  }
  // Hashes the value's bytes; for fixed-size integers and floats only.
  template <typename T>
  void UpdateValue(const T& value) {
    static_assert(std::is_arithmetic_v<T>);
    Update(&value, sizeof(T));
  }
  Digest Finish();

 private:
  void* context_;  // EVP_MD_CTX*
};

std::string ToHex(const Digest& digest);
// The digest whose ToHex is `text` (64 lowercase hex digits); false for anything else.
bool ParseHexDigest(std::string_view text, Digest& out);

// Hash of a digest usable in unordered containers (the digest is already uniform).
struct DigestHash {
  size_t operator()(const Digest& digest) const noexcept {
    size_t value;
    static_assert(sizeof(value) <= sizeof(Digest));
    __builtin_memcpy(&value, digest.data(), sizeof(value));
    return value;
  }
};

}  // namespace reprise
