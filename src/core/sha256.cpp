#include "core/sha256.h"

#include <openssl/evp.h>

#include <utility>

#include "core/error.h"

namespace reprise {

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  REPRISE_CHECK(context_ != nullptr, "EVP_MD_CTX_new failed");
  REPRISE_CHECK(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr) == 1,
                "EVP_DigestInit_ex failed");
}

Sha256::~Sha256() {
  if (context_ != nullptr) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
}

Sha256::Sha256(Sha256&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    if (context_ != nullptr) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void Sha256::Update(const void* data, size_t size) {
  REPRISE_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data, size) == 1,
                "EVP_DigestUpdate failed");
}

Digest Sha256::Finish() {
  Digest digest{};
  unsigned int length = 0;
  REPRISE_CHECK(
      EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest.data(), &length) == 1 &&
          length == digest.size(),
      "EVP_DigestFinal_ex failed");
  return digest;
}

std::string ToHex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(digest.size() * 2);
  for (uint8_t byte : digest) {
    text.push_back(kHex[byte >> 4]);
    text.push_back(kHex[byte & 15]);
  }
  return text;
}

bool ParseHexDigest(std::string_view text, Digest& out) {
  if (text.size() != 2 * out.size()) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = nibble(text[2 * i]);
    const int low = nibble(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>(high * 16 + low);
  }
  return true;
}

}  // namespace reprise
