#include "tokenizer/streaming_detokenizer.h"

#include <algorithm>
#include <string_view>

#include "tokenizer/unicode.h"

namespace reprise {
namespace {

// Copies `bytes`, replacing each byte that does not start a well-formed character by U+FFFD.
std::string Sanitize(std::string_view bytes) {
  if (unicode::IsValidUtf8(bytes)) {
    return std::string(bytes);
  }
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t length =
        std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(bytes[i])), bytes.size() - i);
    const std::string_view character = bytes.substr(i, length);
    if (unicode::IsValidUtf8(character)) {
      out += character;
      i += length;
    } else {
      unicode::AppendUtf8(unicode::kReplacementChar, out);
      i += 1;
    }
  }
  return out;
}

}  // namespace

std::string StreamingDetokenizer::Push(int32_t id) {
  const std::string piece = tokenizer_->TokenToPiece(id);  // throws for a bad id
  if (tokenizer_->PrintsNothing(id)) {
    return "";
  }
  pending_ += piece;
  const size_t held = unicode::IncompleteUtf8Suffix(pending_);
  const std::string ready = Sanitize(std::string_view(pending_).substr(0, pending_.size() - held));
  pending_.erase(0, pending_.size() - held);
  return ready;
}

std::string StreamingDetokenizer::Flush() {
  std::string rest = Sanitize(pending_);
  pending_.clear();
  return rest;
}

}  // namespace reprise
