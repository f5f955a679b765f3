#include "jinja/lexer.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/utf8.h"
#include "jinja/value.h"

namespace reprise::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Python's str.rstrip() for the whitespace a template holds.
std::string_view RightStrip(std::string_view text) {
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : source_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    bool line_starting = true;
    size_t pos = 0;
    while (pos < source_.size()) {
      size_t open = FindTagStart(pos);
      if (open == std::string::npos) {
        Emit(Token::Kind::kText, source_.substr(pos), pos);
        break;
      }
      const char kind = source_[open + 1];
      const char sign =
          open + 2 < source_.size() && (source_[open + 2] == '-' || source_[open + 2] == '+')
              ? source_[open + 2]
              : '\0';
      std::string_view text(source_.data() + pos, open - pos);
      if (sign == '-') {
        text = RightStrip(text);
      } else if (sign != '+' && kind != '{') {
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
        std::string_view rest = text.substr(line_start);
        if ((line_start > 0 || line_starting) && !rest.empty() &&
            std::all_of(rest.begin(), rest.end(), IsSpace)) {
          text = text.substr(0, line_start);
        }
      }
      if (!text.empty()) Emit(Token::Kind::kText, std::string(text), pos);
      size_t inside = open + 2 + (sign != '\0' ? 1 : 0);
      size_t end = kind == '#' ? SkipComment(open, inside)
                   : kind == '%'
                       ? (IsRaw(inside) ? LexRaw(open, inside) : LexTag(open, inside, true))
                       : LexTag(open, inside, false);
      line_starting = source_[end - 1] == '\n';
      pos = end;
    }
    tokens_.push_back(Token{Token::Kind::kEnd, "", Line(source_.size()), Column(source_.size())});
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t pos) const {
    for (size_t i = source_.find('{', pos); i != std::string::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() &&
          (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // The end of a closing marker at `pos` (`-` strips all following whitespace, `+` nothing,
  // plain `%}`/`#}` one newline: trim_blocks), with `trim` for block and comment ends.
  size_t AfterClose(size_t pos, char modifier, bool trim) const {
    if (modifier == '-') {
      while (pos < source_.size() && IsSpace(source_[pos])) ++pos;
    } else if (modifier == '\0' && trim && pos < source_.size() && source_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t SkipComment(size_t open, size_t inside) const {
    size_t close = source_.find("#}", inside);
    if (close == std::string::npos) Fail("missing end of comment tag", open);
    char modifier = close > inside && (source_[close - 1] == '-' || source_[close - 1] == '+')
                        ? source_[close - 1]
                        : '\0';
    return AfterClose(close + 2, modifier, true);
  }

  bool IsRaw(size_t inside) const {
    size_t i = inside;
    while (i < source_.size() && IsSpace(source_[i])) ++i;
    if (source_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < source_.size() && IsSpace(source_[i])) ++i;
    return source_.compare(i, 2, "%}") == 0 || source_.compare(i, 3, "-%}") == 0;
  }

  // {% raw %}...{% endraw %}: the text between is kept as it is.
  size_t LexRaw(size_t open, size_t inside) {
    size_t close = source_.find("%}", inside);
    size_t body = AfterClose(close + 2, source_[close - 1] == '-' ? '-' : '\0', true);
    for (size_t i = source_.find("{%", body); i != std::string::npos;
         i = source_.find("{%", i + 2)) {
      size_t j = i + 2;
      char sign =
          j < source_.size() && (source_[j] == '-' || source_[j] == '+') ? source_[j] : '\0';
      if (sign != '\0') ++j;
      while (j < source_.size() && IsSpace(source_[j])) ++j;
      if (source_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < source_.size() && IsSpace(source_[j])) ++j;
      char modifier = '\0';
      if (j < source_.size() && (source_[j] == '-' || source_[j] == '+')) modifier = source_[j++];
      if (source_.compare(j, 2, "%}") != 0) continue;
      std::string_view text(source_.data() + body, i - body);
      if (sign == '-') text = RightStrip(text);
      if (!text.empty()) Emit(Token::Kind::kText, std::string(text), body);
      return AfterClose(j + 2, modifier, true);
    }
    Fail("missing end of raw directive", open);
  }

  size_t LexTag(size_t open, size_t pos, bool block) {
    Emit(block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, "", open);
    const std::string_view close = block ? "%}" : "}}";
    std::vector<char> brackets;
    while (true) {
      while (pos < source_.size() && IsSpace(source_[pos])) ++pos;
      if (pos >= source_.size()) Fail(block ? "missing end of block tag" : "missing '}}'", open);
      if (brackets.empty()) {
        char modifier = '\0';
        size_t at = pos;
        if ((source_[pos] == '-' || (block && source_[pos] == '+'))) modifier = source_[at++];
        if (source_.compare(at, 2, close) == 0) {
          Emit(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", pos);
          return AfterClose(at + 2, modifier, block);
        }
      }
      pos = LexExpressionToken(pos, brackets);
    }
  }

  size_t LexExpressionToken(size_t pos, std::vector<char>& brackets) {
    const char c = source_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos;
      while (end < source_.size() &&
             (std::isalnum(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) {
        ++end;
      }
      Emit(Token::Kind::kName, source_.substr(pos, end - pos), pos);
      return end;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber(pos);
    if (c == '\'' || c == '"') return LexString(pos);
    static constexpr std::array<std::string_view, 6> kTwo = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (source_.compare(pos, 2, op) == 0) {
        Emit(Token::Kind::kOperator, std::string(op), pos);
        return pos + 2;
      }
    }
    static constexpr std::string_view kOne = "+-*/%~<>=()[]{},.:|";
    if (kOne.find(c) == std::string_view::npos) {
      Fail(fmt::format("unexpected char '{}'", c), pos);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) Fail(fmt::format("unexpected '{}'", c), pos);
      if (brackets.back() != c) {
        Fail(fmt::format("unexpected '{}', expected '{}'", c, brackets.back()), pos);
      }
      brackets.pop_back();
    }
    Emit(Token::Kind::kOperator, std::string(1, c), pos);
    return pos + 1;
  }

  size_t LexNumber(size_t pos) {
    auto digits = [&](size_t i) {
      while (i < source_.size() &&
             (std::isdigit(static_cast<unsigned char>(source_[i])) || source_[i] == '_')) {
        ++i;
      }
      return i;
    };
    size_t end = digits(pos);
    bool is_float = false;
    if (end + 1 < source_.size() && source_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
      end = digits(end + 1);
      is_float = true;
    }
    if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t exponent = end + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) {
        ++exponent;
      }
      if (exponent < source_.size() &&
          std::isdigit(static_cast<unsigned char>(source_[exponent]))) {
        end = digits(exponent);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos; i < end; ++i) {
      if (source_[i] != '_') text += source_[i];
    }
    Emit(is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, pos);
    return end;
  }

  size_t LexString(size_t pos) {
    const char quote = source_[pos];
    std::string value;
    size_t i = pos + 1;
    for (; i < source_.size() && source_[i] != quote; ++i) {
      if (source_[i] != '\\' || i + 1 >= source_.size()) {
        value += source_[i];
        continue;
      }
      char next = source_[++i];
      switch (next) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '0':
          value += '\0';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t width = next == 'x' ? 2 : next == 'u' ? 4 : 8;
          if (i + width >= source_.size()) Fail("truncated escape in string", i);
          uint32_t code_point = 0;
          for (size_t k = 1; k <= width; ++k) {
            char h = source_[i + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) Fail("bad escape in string", i);
            code_point =
                code_point * 16 +
                static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                          ? h - '0'
                                          : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          }
          if (code_point > 0x10ffff) Fail("bad escape in string", i);
          unicode::AppendUtf8(code_point, value);
          i += width;
          break;
        }
        default:
          value += '\\';
          value += next;
      }
    }
    if (i >= source_.size()) Fail("unterminated string", pos);
    Emit(Token::Kind::kString, value, pos);
    return i + 1;
  }

  void Emit(Token::Kind kind, std::string value, size_t offset) {
    tokens_.push_back(Token{kind, std::move(value), Line(offset), Column(offset)});
  }

  int Line(size_t offset) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) -
                            line_starts_.begin());
  }
  int Column(size_t offset) const {
    return static_cast<int>(offset - line_starts_[static_cast<size_t>(Line(offset) - 1)]) + 1;
  }

  [[noreturn]] void Fail(const std::string& message, size_t offset) const {
    throw Error(message, Line(offset), Column(offset));
  }

  std::string source_;
  std::vector<size_t> line_starts_;  // offsets where each line begins
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  // Line breaks become \n, and one final newline is dropped (keep_trailing_newline=False).
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).Run();
}

}  // namespace reprise::jinja
