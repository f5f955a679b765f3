#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "tokenizer/unicode.h"

// Each pre-tokenizer is a list of passes, as llama.cpp applies a list of regexes: a pass looks
// for matches of its pattern inside every piece produced so far, and cuts the piece before and
// after each match (text between matches stays, as its own piece). The patterns are written by
// hand below as matchers: Match(text, pos, end) returns the length of the leftmost-alternative,
// greedy-with-backtracking match at `pos` (what an ECMAScript/PCRE regex returns there), or 0.
// `end` is the end of the piece: lookaheads and `$` see the piece end as the end of input.
//
// Notation in the comments: \p{L} letters, \p{N} numbers, \p{P} punctuation, \s White_Space.

namespace reprise {
namespace {

using unicode::ClassesOf;

using Text = std::span<const uint32_t>;
using Matcher = size_t (*)(Text text, size_t pos, size_t end);

bool IsCrLf(uint32_t c) { return c == '\r' || c == '\n'; }
bool IsL(uint32_t c) { return unicode::IsLetter(c); }
bool IsN(uint32_t c) { return unicode::IsNumber(c); }
bool IsP(uint32_t c) { return unicode::IsPunctuation(c); }
bool IsS(uint32_t c) { return unicode::IsWhitespace(c); }
bool IsAsciiDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// [^\s\p{L}\p{N}]
bool IsOther(uint32_t c) {
  return (ClassesOf(c) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber)) == 0;
}

// Length of the run of characters satisfying `pred` starting at `pos`.
template <typename Pred>
size_t Run(Text text, size_t pos, size_t end, Pred pred) {
  size_t i = pos;
  while (i < end && pred(text[i])) {
    ++i;
  }
  return i - pos;
}

// X?Y+ : one optional character of class X, then one or more of class Y.
template <typename PredX, typename PredY>
size_t OptionalThenRun(Text text, size_t pos, size_t end, PredX x, PredY y) {
  if (x(text[pos]) && pos + 1 < end && y(text[pos + 1])) {
    return 1 + Run(text, pos + 1, end, y);
  }
  return Run(text, pos, end, y);
}

uint32_t AsciiLower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// 's|'t|'re|'ve|'m|'ll|'d, case-sensitive or (llama3 style) ASCII case-insensitive.
size_t MatchContraction(Text text, size_t pos, size_t end, bool ignore_case) {
  if (text[pos] != '\'' || pos + 1 >= end) {
    return 0;
  }
  const auto at = [&](size_t i) { return ignore_case ? AsciiLower(text[i]) : text[i]; };
  const uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') {
    return 2;
  }
  if (pos + 2 < end) {
    const uint32_t b = at(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return 3;
    }
  }
  return 0;
}

// \s+(?!\S) , and when `or_any_whitespace` also the fallback alternative |\s+
size_t MatchTrailingWhitespace(Text text, size_t pos, size_t end, bool or_any_whitespace) {
  const size_t run = Run(text, pos, end, IsS);
  if (run == 0) {
    return 0;
  }
  if (pos + run == end) {
    return run;  // followed by the end of the piece
  }
  if (run >= 2) {
    return run - 1;  // leave the last space to the word that follows
  }
  return or_any_whitespace ? run : 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
size_t MatchGpt2(Text text, size_t pos, size_t end) {
  if (size_t n = MatchContraction(text, pos, end, /*ignore_case=*/false)) {
    return n;
  }
  const size_t start = (text[pos] == ' ' && pos + 1 < end) ? pos + 1 : pos;
  const uint32_t c = text[start];
  size_t run = 0;
  if (IsL(c)) {
    run = Run(text, start, end, IsL);
  } else if (IsN(c)) {
    run = Run(text, start, end, IsN);
  } else if (IsOther(c)) {
    run = Run(text, start, end, IsOther);
  }
  if (run > 0) {
    return start - pos + run;
  }
  return MatchTrailingWhitespace(text, pos, end, /*or_any_whitespace=*/false);
}

// The alternatives Llama 3 style patterns try after their words and contractions:
//   \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+<after>*|\s*[\r\n]+|\s+(?!\S)|\s+
// where <after> is [\r\n] (Llama 3) or [\r\n/] (the cased-word patterns).
template <typename After>
size_t MatchNumbersSymbolsSpaces(Text text, size_t pos, size_t end, size_t max_digits,
                                 After after) {
  const uint32_t c = text[pos];
  if (IsN(c)) {
    // At most max_digits looked at: scanning the whole run for each piece of it was quadratic in
    // a long run of digits (a prompt of 10^5 digits took 9-27 s, by pre-tokenizer).
    return Run(text, pos, std::min(end, pos + max_digits), IsN);
  }
  const size_t start = (c == ' ' && pos + 1 < end) ? pos + 1 : pos;
  if (IsOther(text[start])) {
    size_t i = start + Run(text, start, end, IsOther);
    i += Run(text, i, end, after);
    return i - pos;
  }
  // \s*[\r\n]+ : whitespace up to and including the last line break of the whitespace run.
  const size_t run = Run(text, pos, end, IsS);
  for (size_t i = pos + run; i > pos; --i) {
    if (IsCrLf(text[i - 1])) {
      return i - pos;
    }
  }
  return MatchTrailingWhitespace(text, pos, end, /*or_any_whitespace=*/true);
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <size_t kMaxDigits>
size_t MatchLlama3Style(Text text, size_t pos, size_t end) {
  if (size_t n = MatchContraction(text, pos, end, /*ignore_case=*/true)) {
    return n;
  }
  const auto not_crlf_letter_number = [](uint32_t x) { return !IsCrLf(x) && !IsL(x) && !IsN(x); };
  if (size_t n = OptionalThenRun(text, pos, end, not_crlf_letter_number, IsL)) {
    return n;
  }
  return MatchNumbersSymbolsSpaces(text, pos, end, kMaxDigits, IsCrLf);
}

// [\p{P}\$\+<=>\^~\|]+ (default) and the same with '`' (falcon).
template <bool kWithBacktick>
size_t MatchPunctuationRun(Text text, size_t pos, size_t end) {
  return Run(text, pos, end, [](uint32_t c) {
    switch (c) {
      case '$':
      case '+':
      case '<':
      case '=':
      case '>':
      case '^':
      case '~':
      case '|':
        return true;
      case '`':
        return kWithBacktick;
      default:
        return IsP(c);
    }
  });
}

// [0-9][0-9][0-9]
size_t MatchThreeAsciiDigits(Text text, size_t pos, size_t end) {
  return (pos + 3 <= end && IsAsciiDigit(text[pos]) && IsAsciiDigit(text[pos + 1]) &&
          IsAsciiDigit(text[pos + 2]))
             ? 3
             : 0;
}

// \p{N}
size_t MatchNumber(Text text, size_t pos, size_t) { return IsN(text[pos]) ? 1 : 0; }

// \p{N}+
size_t MatchNumberRun(Text text, size_t pos, size_t end) { return Run(text, pos, end, IsN); }

// \p{N}{1,3}
size_t MatchNumberUpTo3(Text text, size_t pos, size_t end) {
  return Run(text, pos, std::min<size_t>(end, pos + 3), IsN);
}

// [\r\n]
size_t MatchLineBreak(Text text, size_t pos, size_t) { return IsCrLf(text[pos]) ? 1 : 0; }

// \s?\p{L}+
size_t MatchSpaceLetters(Text text, size_t pos, size_t end) {
  return OptionalThenRun(text, pos, end, IsS, IsL);
}

// \s?\p{P}+
size_t MatchSpacePunctuation(Text text, size_t pos, size_t end) {
  return OptionalThenRun(text, pos, end, IsS, IsP);
}

// \s+$
size_t MatchWhitespaceAtEnd(Text text, size_t pos, size_t end) {
  const size_t run = Run(text, pos, end, IsS);
  return (run > 0 && pos + run == end) ? run : 0;
}

// llama.cpp runs the patterns that spell out non-ASCII ranges with std::wregex, after replacing
// every non-ASCII whitespace character with U+000B: such characters then never match a range.
bool IsNonAsciiWhitespace(uint32_t c) { return c > 0x7F && IsS(c); }

struct Range {
  uint32_t first, last;
};

template <size_t N>
bool InRanges(const std::array<Range, N>& ranges, uint32_t c) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [c](const Range& r) { return c >= r.first && c <= r.last; });
}

// [一-龥ࠀ-一가-퟿]+ (DeepSeek: CJK and other scripts kept apart from the rest)
size_t MatchDeepseekCjk(Text text, size_t pos, size_t end) {
  static constexpr std::array<Range, 3> kRanges = {
      {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}};
  return Run(text, pos, end,
             [](uint32_t c) { return !IsNonAsciiWhitespace(c) && InRanges(kRanges, c); });
}

// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ : DeepSeek LLM's explicit list of cased letters.
size_t MatchDeepseekLetters(Text text, size_t pos, size_t end) {
  static constexpr std::array<Range, 87> kRanges = {{
      {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
      {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
      {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x376},     {0x377, 0x377},
      {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
      {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},
      {0x48A, 0x52F},     {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},
      {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},
      {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
      {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
      {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},
      {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},
      {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},
      {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},
      {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
      {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},
      {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2183},
      {0x2184, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
      {0x2CF2, 0x2CF2},   {0x2CF3, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},
      {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},
      {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
      {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
      {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
  }};
  return OptionalThenRun(text, pos, end, IsS, [](uint32_t c) { return InRanges(kRanges, c); });
}

// \s?[!-/:-~！-／：-～‘-‟　-。]+ : DeepSeek LLM's ASCII and full-width punctuation.
size_t MatchDeepseekPunctuation(Text text, size_t pos, size_t end) {
  static constexpr std::array<Range, 6> kRanges = {{{0x21, 0x2F},
                                                    {0x3A, 0x7E},
                                                    {0xFF01, 0xFF0F},
                                                    {0xFF1A, 0xFF5E},
                                                    {0x2018, 0x201F},
                                                    {0x3000, 0x3002}}};
  return OptionalThenRun(text, pos, end, IsS, [](uint32_t c) {
    return !IsNonAsciiWhitespace(c) && InRanges(kRanges, c);
  });
}

// [一-龥぀-ゟ゠-ヿ]+ (DeepSeek V3: Han, Hiragana, Katakana)
size_t MatchDeepseek3Cjk(Text text, size_t pos, size_t end) {
  static constexpr std::array<Range, 3> kRanges = {
      {{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}}};
  return Run(text, pos, end, [](uint32_t c) { return InRanges(kRanges, c); });
}

// DeepSeek V3: [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//   | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchDeepseek3(Text text, size_t pos, size_t end) {
  const uint32_t c = text[pos];
  const bool ascii_punct = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                           (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  if (ascii_punct && pos + 1 < end && IsAsciiLetter(text[pos + 1])) {
    return 1 + Run(text, pos + 1, end, IsAsciiLetter);
  }
  const auto letter_or_mark = [](uint32_t x) {
    return (ClassesOf(x) & (unicode::kLetter | unicode::kMark)) != 0;
  };
  const auto punct_or_symbol = [](uint32_t x) {
    return (ClassesOf(x) & (unicode::kPunctuation | unicode::kSymbol)) != 0;
  };
  const auto prefix = [&](uint32_t x) { return !IsCrLf(x) && !IsL(x) && !punct_or_symbol(x); };
  if (size_t n = OptionalThenRun(text, pos, end, prefix, letter_or_mark)) {
    return n;
  }
  const size_t start = (c == ' ' && pos + 1 < end) ? pos + 1 : pos;
  if (punct_or_symbol(text[start])) {
    size_t i = start + Run(text, start, end, punct_or_symbol);
    i += Run(text, i, end, IsCrLf);
    return i - pos;
  }
  const size_t run = Run(text, pos, end, IsS);
  for (size_t i = pos + run; i > pos; --i) {
    if (IsCrLf(text[i - 1])) {
      return i - pos;
    }
  }
  return MatchTrailingWhitespace(text, pos, end, /*or_any_whitespace=*/true);
}

// Tekken (Mistral) and GPT-4o (Llama 4) split words at case changes. As llama.cpp adapts their
// regexes, "upper" means a letter other than a-z and "lower" a letter other than A-Z (so a
// non-ASCII letter is both), and marks are not letters. With kDigits/kContractions:
// [^\r\n\p{L}\p{N}]?UPPER*LOWER+CONTRACTION?|[^\r\n\p{L}\p{N}]?UPPER+LOWER*CONTRACTION?
//   |\p{N}{1,kDigits}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
bool IsUpperish(uint32_t c) { return IsL(c) && !(c >= 'a' && c <= 'z'); }
bool IsLowerish(uint32_t c) { return IsL(c) && !(c >= 'A' && c <= 'Z'); }

// UPPER*LOWER+ at `pos`: the end of the match, or `pos` when there is none. Greedy UPPER* gives
// back one character at a time until LOWER+ can start.
size_t UpperStarLowerPlus(Text text, size_t pos, size_t end) {
  const size_t upper = Run(text, pos, end, IsUpperish);
  for (size_t j = pos + upper + 1; j-- > pos;) {
    if (j < end && IsLowerish(text[j])) {
      return j + Run(text, j, end, IsLowerish);
    }
  }
  return pos;
}

// UPPER+LOWER* at `pos`: the end of the match, or `pos` when there is none.
size_t UpperPlusLowerStar(Text text, size_t pos, size_t end) {
  const size_t upper = Run(text, pos, end, IsUpperish);
  return upper == 0 ? pos : pos + upper + Run(text, pos + upper, end, IsLowerish);
}

template <size_t kDigits, bool kContractions>
size_t MatchCasedWords(Text text, size_t pos, size_t end) {
  const uint32_t c = text[pos];
  const bool prefix = !IsCrLf(c) && !IsL(c) && !IsN(c);
  for (auto word : {UpperStarLowerPlus, UpperPlusLowerStar}) {
    // The optional prefix character is tried first, then the word alone at `pos`.
    size_t word_end = pos;
    if (prefix) {
      if (const size_t e = word(text, pos + 1, end); e > pos + 1) {
        word_end = e;
      }
    } else {
      word_end = word(text, pos, end);
    }
    if (word_end > pos) {
      if (kContractions && word_end < end) {
        word_end += MatchContraction(text, word_end, end, /*ignore_case=*/true);
      }
      return word_end - pos;
    }
  }
  return MatchNumbersSymbolsSpaces(text, pos, end, kDigits,
                                   [](uint32_t x) { return IsCrLf(x) || x == '/'; });
}

// BLOOM family: " ?[^(\s|.,!?…。，、।۔،)]+"
size_t MatchBloom(Text text, size_t pos, size_t end) {
  const auto word_char = [](uint32_t c) {
    switch (c) {
      case '(':
      case ')':
      case '|':
      case '.':
      case ',':
      case '!':
      case '?':
      case 0x2026:
      case 0x3002:
      case 0xFF0C:
      case 0x3001:
      case 0x0964:
      case 0x06D4:
      case 0x060C:
        return false;
      default:
        return !IsS(c);
    }
  };
  return OptionalThenRun(
      text, pos, end, [](uint32_t c) { return c == ' '; }, word_char);
}

// Applies one pass to every piece of `pieces` (lengths in code points).
std::vector<size_t> ApplyPass(Matcher match, Text text, const std::vector<size_t>& pieces) {
  std::vector<size_t> result;
  result.reserve(pieces.size() * 2);
  size_t piece_start = 0;
  for (size_t piece_length : pieces) {
    const size_t end = piece_start + piece_length;
    size_t gap_start = piece_start;
    size_t pos = piece_start;
    while (pos < end) {
      const size_t n = match(text, pos, end);
      if (n == 0) {
        ++pos;
        continue;
      }
      if (pos > gap_start) {
        result.push_back(pos - gap_start);
      }
      result.push_back(n);
      pos += n;
      gap_start = pos;
    }
    if (end > gap_start) {
      result.push_back(end - gap_start);
    }
    piece_start = end;
  }
  return result;
}

std::span<const Matcher> PassesOf(PreTokenizerKind kind) {
  static constexpr std::array<Matcher, 4> kDefault = {MatchPunctuationRun<false>, MatchGpt2,
                                                      MatchNumberRun, MatchThreeAsciiDigits};
  static constexpr std::array<Matcher, 1> kLlama3 = {MatchLlama3Style<3>};
  static constexpr std::array<Matcher, 1> kQwen2 = {MatchLlama3Style<1>};
  static constexpr std::array<Matcher, 1> kGpt2 = {MatchGpt2};
  static constexpr std::array<Matcher, 6> kDeepseekLlm = {
      MatchLineBreak,       MatchDeepseekLetters, MatchDeepseekPunctuation,
      MatchWhitespaceAtEnd, MatchDeepseekCjk,     MatchNumberRun};
  static constexpr std::array<Matcher, 5> kDeepseekCoder = {
      MatchLineBreak, MatchSpaceLetters, MatchSpacePunctuation, MatchDeepseekCjk, MatchNumber};
  static constexpr std::array<Matcher, 3> kDeepseek3 = {MatchNumberUpTo3, MatchDeepseek3Cjk,
                                                        MatchDeepseek3};
  static constexpr std::array<Matcher, 3> kFalcon = {MatchPunctuationRun<true>, MatchGpt2,
                                                     MatchThreeAsciiDigits};
  static constexpr std::array<Matcher, 2> kStarcoder = {MatchNumber, MatchGpt2};
  static constexpr std::array<Matcher, 1> kBloom = {MatchBloom};
  static constexpr std::array<Matcher, 2> kViking = {MatchBloom, MatchNumber};
  static constexpr std::array<Matcher, 1> kTekken = {MatchCasedWords<1, false>};
  static constexpr std::array<Matcher, 1> kGpt4o = {MatchCasedWords<3, true>};
  switch (kind) {
    case PreTokenizerKind::kDefault:
      return kDefault;
    case PreTokenizerKind::kLlama3:
      return kLlama3;
    case PreTokenizerKind::kQwen2:
      return kQwen2;
    case PreTokenizerKind::kGpt2:
      return kGpt2;
    case PreTokenizerKind::kDeepseekLlm:
      return kDeepseekLlm;
    case PreTokenizerKind::kDeepseekCoder:
      return kDeepseekCoder;
    case PreTokenizerKind::kDeepseek3:
      return kDeepseek3;
    case PreTokenizerKind::kFalcon:
      return kFalcon;
    case PreTokenizerKind::kStarcoder:
      return kStarcoder;
    case PreTokenizerKind::kBloom:
      return kBloom;
    case PreTokenizerKind::kViking:
      return kViking;
    case PreTokenizerKind::kTekken:
      return kTekken;
    case PreTokenizerKind::kGpt4o:
      return kGpt4o;
  }
  return kDefault;
}

}  // namespace

std::optional<PreTokenizerKind> ParsePreTokenizer(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, PreTokenizerKind>, 37> kNames = {{
      {"default", PreTokenizerKind::kDefault},
      {"llama3", PreTokenizerKind::kLlama3},
      {"llama-v3", PreTokenizerKind::kLlama3},
      {"llama-bpe", PreTokenizerKind::kLlama3},
      {"falcon3", PreTokenizerKind::kLlama3},
      {"dbrx", PreTokenizerKind::kLlama3},
      {"smaug-bpe", PreTokenizerKind::kLlama3},
      {"qwen2", PreTokenizerKind::kQwen2},
      {"deepseek-r1-qwen", PreTokenizerKind::kQwen2},
      {"stablelm2", PreTokenizerKind::kQwen2},
      {"megrez", PreTokenizerKind::kQwen2},
      {"gpt-2", PreTokenizerKind::kGpt2},
      {"phi-2", PreTokenizerKind::kGpt2},
      {"jina-es", PreTokenizerKind::kGpt2},
      {"jina-de", PreTokenizerKind::kGpt2},
      {"jina-v2-es", PreTokenizerKind::kGpt2},
      {"jina-v2-de", PreTokenizerKind::kGpt2},
      {"jina-v2-code", PreTokenizerKind::kGpt2},
      {"mpt", PreTokenizerKind::kGpt2},
      {"olmo", PreTokenizerKind::kGpt2},
      {"jais", PreTokenizerKind::kGpt2},
      {"deepseek-llm", PreTokenizerKind::kDeepseekLlm},
      {"deepseek-coder", PreTokenizerKind::kDeepseekCoder},
      {"deepseek-v3", PreTokenizerKind::kDeepseek3},
      {"falcon", PreTokenizerKind::kFalcon},
      {"starcoder", PreTokenizerKind::kStarcoder},
      {"refact", PreTokenizerKind::kStarcoder},
      {"command-r", PreTokenizerKind::kStarcoder},
      {"smollm", PreTokenizerKind::kStarcoder},
      {"codeshell", PreTokenizerKind::kStarcoder},
      {"exaone", PreTokenizerKind::kStarcoder},
      {"minerva-7b", PreTokenizerKind::kStarcoder},
      {"bloom", PreTokenizerKind::kBloom},
      {"viking", PreTokenizerKind::kViking},
      {"tekken", PreTokenizerKind::kTekken},
      {"gpt-4o", PreTokenizerKind::kGpt4o},
      {"llama4", PreTokenizerKind::kGpt4o},
  }};
  for (const auto& [known, kind] : kNames) {
    if (known == name) {
      return kind;
    }
  }
  if (name == "poro-chat" || name == "gpt3-finnish") {
    return PreTokenizerKind::kBloom;
  }
  return std::nullopt;
}

std::vector<size_t> SplitWords(PreTokenizerKind kind, Text text) {
  std::vector<size_t> pieces;
  if (text.empty()) {
    return pieces;
  }
  pieces.push_back(text.size());
  for (Matcher pass : PassesOf(kind)) {
    pieces = ApplyPass(pass, text, pieces);
  }
  return pieces;
}

}  // namespace reprise
