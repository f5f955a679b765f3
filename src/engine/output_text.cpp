#include "engine/output_text.h"

#include <algorithm>
#include <utility>

namespace reprise {

OutputText::OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop)
    : detokenizer_(tokenizer), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stop_) longest_stop_ = std::max(longest_stop_, s.size());
}

bool OutputText::Push(int32_t token) {
  const size_t previous = text_.size();
  text_ += detokenizer_.Push(token);
  // A stop string may straddle tokens: each is searched from where a match of its own length
  // could end in the new text (one that ends earlier was found by an earlier token), so a
  // token's search costs its new bytes times each stop string's length. When several appear,
  // the text ends at the earliest.
  size_t cut = std::string::npos;
  for (const auto& stop : stop_) {
    const size_t from = previous >= stop.size() ? previous - stop.size() + 1 : 0;
    cut = std::min(cut, text_.find(stop, from));
  }
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  return true;
}

void OutputText::Flush() { text_ += detokenizer_.Flush(); }

std::string OutputText::TakeDelta(bool final) {
  // Hold back what could still become a stop string.
  size_t safe = text_.size();
  if (!final && longest_stop_ > 0)
    safe = safe >= longest_stop_ - 1 ? safe - (longest_stop_ - 1) : 0;
  // Never cut a UTF-8 character in two.
  while (safe > emitted_bytes_ && safe < text_.size() &&
         (static_cast<unsigned char>(text_[safe]) & 0xC0) == 0x80) {
    --safe;
  }
  if (safe <= emitted_bytes_) return {};
  std::string delta = text_.substr(emitted_bytes_, safe - emitted_bytes_);
  emitted_bytes_ = safe;
  return delta;
}

}  // namespace reprise
