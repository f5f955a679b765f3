#include "tokenizer/merge_encoders.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"

namespace reprise {
namespace {

// A run of bytes of the input in a doubly linked list of runs; merging grows the left run and
// empties the right one (length 0), so indices stay valid.
struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t offset = 0;
  uint32_t length = 0;
};

// One symbol per UTF-8 character (a truncated sequence at the end is one short symbol).
std::vector<Symbol> SplitCharacters(std::string_view text) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t length = std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(text[offset])),
                                   text.size() - offset);
    Symbol symbol;
    symbol.prev = static_cast<int32_t>(symbols.size()) - 1;
    symbol.offset = static_cast<uint32_t>(offset);
    symbol.length = static_cast<uint32_t>(length);
    offset += length;
    symbol.next = offset == text.size() ? -1 : static_cast<int32_t>(symbols.size()) + 1;
    symbols.push_back(symbol);
  }
  return symbols;
}

// A candidate merge of two adjacent symbols. `length` is their joint length when the candidate
// was made: if either symbol has changed since, the candidate is stale and skipped.
template <typename Priority>
struct Candidate {
  int32_t left;
  int32_t right;
  Priority priority;
  uint32_t length;
};

// Merges the candidate's right symbol into its left one.
void Merge(std::vector<Symbol>& symbols, int32_t left, int32_t right) {
  Symbol& l = symbols[static_cast<size_t>(left)];
  Symbol& r = symbols[static_cast<size_t>(right)];
  l.length += r.length;
  r.length = 0;
  l.next = r.next;
  if (r.next >= 0) {
    symbols[static_cast<size_t>(r.next)].prev = left;
  }
}

template <typename Priority>
bool IsStale(const std::vector<Symbol>& symbols, const Candidate<Priority>& candidate) {
  const Symbol& l = symbols[static_cast<size_t>(candidate.left)];
  const Symbol& r = symbols[static_cast<size_t>(candidate.right)];
  return l.length == 0 || r.length == 0 || l.length + r.length != candidate.length;
}

std::string_view Span(std::string_view text, const Symbol& symbol) {
  return text.substr(symbol.offset, symbol.length);
}

// Offers every adjacent pair to `consider` (which queues the mergeable ones), then merges the
// best queued pair first until none is left, offering each merged symbol's new neighbours.
template <typename Queue, typename Consider>
void MergeBestFirst(std::vector<Symbol>& symbols, Queue& queue, const Consider& consider) {
  for (size_t i = 1; i < symbols.size(); ++i) {
    consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const auto pair = queue.top();
    queue.pop();
    if (IsStale(symbols, pair)) {
      continue;
    }
    Merge(symbols, pair.left, pair.right);
    const Symbol& merged = symbols[static_cast<size_t>(pair.left)];
    consider(merged.prev, pair.left);
    consider(pair.left, merged.next);
  }
}

}  // namespace

void EncodeSpm(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) {
    return;
  }
  std::vector<Symbol> symbols = SplitCharacters(text);

  // Highest score first; on equal scores the leftmost pair.
  using Pair = Candidate<float>;
  const auto lower_priority = [](const Pair& a, const Pair& b) {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower_priority)> queue(lower_priority);
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) {
      return;
    }
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const uint32_t length = l.length + symbols[static_cast<size_t>(right)].length;
    const int32_t id = vocab.TextToToken(text.substr(l.offset, length));
    if (id >= 0) {
      queue.push(Pair{left, right, vocab.token(id).score, length});
    }
  };

  MergeBestFirst(symbols, queue, consider);

  // Every merged symbol is a token; a single character that is not falls back to byte tokens.
  for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const std::string_view piece = Span(text, symbols[static_cast<size_t>(i)]);
    const int32_t id = vocab.TextToToken(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char byte : piece) {
      if (const int32_t byte_id = vocab.ByteToToken(static_cast<uint8_t>(byte)); byte_id >= 0) {
        out.push_back(byte_id);
      }
    }
  }
}

void EncodeBpeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) {
    return;
  }
  if (vocab.ignore_merges()) {
    if (const int32_t id = vocab.TextToToken(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = SplitCharacters(word);

  // Lowest rank first; on equal ranks the leftmost pair.
  using Pair = Candidate<int32_t>;
  const auto lower_priority = [](const Pair& a, const Pair& b) {
    return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower_priority)> queue(lower_priority);
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) {
      return;
    }
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const int32_t rank = vocab.MergeRank(Span(word, l), Span(word, r));
    if (rank >= 0) {
      queue.push(Pair{left, right, rank, l.length + r.length});
    }
  };

  MergeBestFirst(symbols, queue, consider);

  for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const std::string_view piece = Span(word, symbols[static_cast<size_t>(i)]);
    const int32_t id = vocab.TextToToken(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (a vocabulary without all 256 byte characters): keep whatever bytes are tokens,
    // as llama.cpp does.
    for (size_t j = 0; j < piece.size(); ++j) {
      if (const int32_t byte_id = vocab.TextToToken(piece.substr(j, 1)); byte_id >= 0) {
        out.push_back(byte_id);
      }
    }
  }
}

}  // namespace reprise
