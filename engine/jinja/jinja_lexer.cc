#include "engine/jinja/jinja_lexer.h"

#include <cctype>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_value.h"

namespace linserve::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The template's text, and the line of each of its characters, for errors.
struct Numbered {
  std::string text;
  std::vector<int> lines;
};

// Every "\r\n" and lone "\r" read as "\n", string literals included, as
// Jinja reads its source: a template saved with Windows line ends renders
// the same prompt.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
      continue;
    }
    out += '\n';
    if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
  }
  return out;
}

// One trailing newline dropped, as Jinja's keep_trailing_newline=False.
Numbered Number(std::string_view source) {
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  Numbered out{std::string(source), {}};
  out.lines.reserve(source.size());
  int line = 1;
  for (char c : source) {
    out.lines.push_back(line);
    line += c == '\n';
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(Numbered source) : src_(std::move(source.text)), lines_(std::move(source.lines)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      size_t open = FindOpen(pos_);
      if (open > pos_) {
        std::string text = src_.substr(pos_, open - pos_);
        if (open < src_.size()) LstripBeforeTag(text, pos_, open);
        if (!text.empty()) AddText(std::move(text));
      }
      if (open == src_.size()) break;
      Advance(open);
      char kind = src_[pos_ + 1];
      Advance(pos_ + 2);
      bool strip_before = pos_ < src_.size() && src_[pos_] == '-';
      if (strip_before) {
        Advance(pos_ + 1);
        StripTrailingText();
      } else if (kind == '%' && pos_ < src_.size() && src_[pos_] == '+') {
        Advance(pos_ + 1);  // "{%+": lstrip_blocks off for this tag (LstripBeforeTag)
      }
      if (kind == '#') {
        size_t close = src_.find("#}", pos_);
        if (close == std::string::npos) return Error("a comment is not closed ('#}')");
        bool strip_after = close > pos_ && src_[close - 1] == '-';
        bool keep_newline = close > pos_ && src_[close - 1] == '+';
        Advance(close + 2);
        if (strip_after) {
          SkipSpace();
        } else if (!keep_newline) {
          SkipNewline();  // trim_blocks
        }
        tokens_after_comment_ = tokens_.size();
        continue;
      }
      int line = line_;
      bool statement = kind == '%';
      tokens_.push_back({statement ? Token::Kind::kOpenStatement : Token::Kind::kOpenExpression,
                         statement ? "{%" : "{{", line});
      size_t first = tokens_.size();
      absl::Status status = LexInside(statement);
      if (!status.ok()) return status;
      // {% raw %}: the text up to {% endraw %} is text, the newline after
      // "{% raw %}" kept (Jinja trims after a block's end, and raw's is none).
      if (statement && tokens_.size() == first + 2 && tokens_[first].text == "raw" &&
          tokens_[first].kind == Token::Kind::kName) {
        tokens_.resize(first - 1);
        absl::Status raw = LexRaw(line);
        if (!raw.ok()) return raw;
      } else if (statement && close_trims_) {
        SkipNewline();  // trim_blocks
      }
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("template line ", line_, ": ", what));
  }

  size_t FindOpen(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '%' || src_[i + 1] == '{' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  void Advance(size_t to) {
    pos_ = to;
    if (pos_ < lines_.size()) line_ = lines_[pos_];
  }

  void AddText(std::string text) {
    tokens_.push_back({Token::Kind::kText, std::move(text), line_});
  }

  // A "-" strips the text right before its tag; text before a comment is
  // not right before (Jinja keeps "a\n" in "a\n{# c #}{%- x %}").
  void StripTrailingText() {
    if (tokens_.size() <= tokens_after_comment_ || tokens_.back().kind != Token::Kind::kText) {
      return;
    }
    std::string& text = tokens_.back().text;
    while (!text.empty() && IsSpace(text.back())) text.pop_back();
    if (text.empty()) tokens_.pop_back();
  }

  // lstrip_blocks: the spaces and tabs before a "{%" or "{#" (not "{%+")
  // that opens its line go. `text` runs from `start` to the tag at `open`.
  void LstripBeforeTag(std::string& text, size_t start, size_t open) const {
    if (src_[open + 1] != '%' && src_[open + 1] != '#') return;
    if (open + 2 < src_.size() && (src_[open + 2] == '+' || src_[open + 2] == '-')) return;
    const size_t newline = text.rfind('\n');
    if (newline == std::string::npos && start > 0 && src_[start - 1] != '\n') return;
    const size_t from = newline == std::string::npos ? 0 : newline + 1;
    if (text.find_first_not_of(" \t", from) != std::string::npos) return;
    text.resize(from);
  }

  void SkipNewline() {
    if (pos_ < src_.size() && src_[pos_] == '\n') Advance(pos_ + 1);
  }

  void SkipSpace() {
    size_t end = pos_;
    while (end < src_.size() && IsSpace(src_[end])) ++end;
    Advance(end);
  }

  // The end of a float's exponent (e5, E-3) starting at `at`, or `at`.
  size_t SkipExponent(size_t at) const {
    if (at >= src_.size() || (src_[at] != 'e' && src_[at] != 'E')) return at;
    size_t k = at + 1;
    if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
    if (k >= src_.size() || !std::isdigit(static_cast<unsigned char>(src_[k]))) return at;
    return SkipDigits(k, false);
  }

  // The end of a run of digits from `at`, each underscore between two
  // digits (1_000), as Jinja's literals allow; hex digits where `hex`.
  size_t SkipDigits(size_t at, bool hex) const {
    auto digit = [&](size_t k) {
      const unsigned char c = static_cast<unsigned char>(src_[k]);
      return hex ? std::isxdigit(c) != 0 : std::isdigit(c) != 0;
    };
    size_t k = at;
    while (k < src_.size() &&
           (digit(k) || (src_[k] == '_' && k > at && k + 1 < src_.size() && digit(k + 1)))) {
      ++k;
    }
    return k;
  }

  // The tokens of one `{% %}` or `{{ }}`, with its closing token.
  absl::Status LexInside(bool statement) {
    int braces = 0;  // `}}` closes the expression only outside a dict literal
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) Advance(pos_ + 1);
      if (pos_ >= src_.size())
        return Error(statement ? "a '{%' is not closed" : "a '{{' is not closed");
      std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      std::string_view close = statement ? "%}" : "}}";
      bool dash = rest[0] == '-' && rest.substr(1, 2) == close;
      // "+%}": trim_blocks off for this tag.
      bool plus = statement && rest[0] == '+' && rest.substr(1, 2) == close;
      if ((rest.substr(0, 2) == close && (statement || braces == 0)) || dash || plus) {
        tokens_.push_back({statement ? Token::Kind::kCloseStatement : Token::Kind::kCloseExpression,
                           std::string(close), line_});
        Advance(pos_ + (dash || plus ? 3 : 2));
        if (dash) SkipSpace();
        close_trims_ = statement && !dash && !plus;
        return absl::OkStatus();
      }
      char c = rest[0];
      if (c == '\'' || c == '"') {
        absl::Status status = LexString(c);
        if (!status.ok()) return status;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        bool after_dot = !tokens_.empty() && tokens_.back().text == "." &&
                         tokens_.back().kind == Token::Kind::kPunct;
        // 0x1f, 0o17, 0b101: the parser reads the base from the prefix.
        const char prefix =
            rest.size() > 2 && c == '0'
                ? static_cast<char>(std::tolower(static_cast<unsigned char>(rest[1])))
                : '\0';
        if (!after_dot && (prefix == 'x' || prefix == 'o' || prefix == 'b')) {
          size_t end = SkipDigits(pos_ + 2, true);
          if (end < src_.size() && src_[pos_ + 2] == '_') end = SkipDigits(pos_ + 3, true);
          tokens_.push_back({Token::Kind::kInteger, src_.substr(pos_, end - pos_), line_});
          Advance(end);
          continue;
        }
        size_t end = SkipDigits(pos_, false);
        if (!after_dot && end + 1 < src_.size() && src_[end] == '.' &&
            std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
          end = SkipDigits(end + 1, false);
          end = SkipExponent(end);
          tokens_.push_back({Token::Kind::kFloat, src_.substr(pos_, end - pos_), line_});
        } else if (!after_dot && SkipExponent(end) != end) {
          end = SkipExponent(end);
          tokens_.push_back({Token::Kind::kFloat, src_.substr(pos_, end - pos_), line_});
        } else {
          tokens_.push_back({Token::Kind::kInteger, src_.substr(pos_, end - pos_), line_});
        }
        Advance(end);
        continue;
      }
      if (IsNameStart(c)) {
        size_t end = pos_;
        while (end < src_.size() && IsNameChar(src_[end])) ++end;
        tokens_.push_back({Token::Kind::kName, src_.substr(pos_, end - pos_), line_});
        Advance(end);
        continue;
      }
      static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string punct;
      for (std::string_view two : kTwo) {
        if (rest.substr(0, 2) == two) punct = std::string(two);
      }
      if (punct.empty()) {
        if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
          return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
        }
        punct = std::string(1, c);
      }
      if (punct == "{") ++braces;
      if (punct == "}") --braces;
      tokens_.push_back({Token::Kind::kPunct, punct, line_});
      Advance(pos_ + punct.size());
    }
  }

  // A string literal as Python's "unicode-escape" reads it, which is what
  // Jinja does: \n, \t and the other one-letter escapes, octal \ooo, \xhh,
  // \uhhhh and \Uhhhhhhhh (each a code point, written as UTF-8), a
  // backslash before a newline dropped, and an unknown escape kept as
  // written. \N{name} would need Unicode's name table: refused.
  absl::Status LexString(char quote) {
    int line = line_;
    std::string value;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) return Error("a string is not closed");
      char c = src_[i];
      if (c == quote) break;
      if (c == '\\' && i + 1 < src_.size()) {
        char e = src_[i + 1];
        i += 2;
        switch (e) {
          case 'a':
            value += '\a';
            break;
          case 'b':
            value += '\b';
            break;
          case 'f':
            value += '\f';
            break;
          case 'n':
            value += '\n';
            break;
          case 'r':
            value += '\r';
            break;
          case 't':
            value += '\t';
            break;
          case 'v':
            value += '\v';
            break;
          case '\\':
          case '\'':
          case '"':
            value += e;
            break;
          case '\n':
            break;
          case 'x':
          case 'u':
          case 'U': {
            const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t code = 0;
            for (size_t k = 0; k < digits; ++k, ++i) {
              const int digit = i < src_.size() ? HexDigit(src_[i]) : -1;
              if (digit < 0) {
                return Error(absl::StrCat("a \\", std::string(1, e), " escape needs ", digits,
                                          " hex digits"));
              }
              code = code * 16 + static_cast<uint32_t>(digit);
            }
            if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
              return Error(
                  absl::StrCat("a \\", std::string(1, e), " escape names no Unicode character"));
            }
            value += EncodeUtf8(std::u32string(1, static_cast<char32_t>(code)));
            break;
          }
          case 'N':
            return Error("the \\N{...} escape is not supported");
          default:
            if (e >= '0' && e <= '7') {
              uint32_t code = static_cast<uint32_t>(e - '0');
              for (int k = 1; k < 3 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7';
                   ++k, ++i) {
                code = code * 8 + static_cast<uint32_t>(src_[i] - '0');
              }
              value += EncodeUtf8(std::u32string(1, static_cast<char32_t>(code)));
              break;
            }
            // Python keeps an unknown escape as written.
            value += '\\';
            value += e;
        }
        continue;
      }
      value += c;
      ++i;
    }
    Advance(i + 1);
    tokens_.push_back({Token::Kind::kString, std::move(value), line});
    return absl::OkStatus();
  }

  absl::Status LexRaw(int line) {
    size_t search = pos_;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("template line ", line, ": '{% raw %}' has no '{% endraw %}'"));
      }
      size_t k = open + 2;
      bool strip_before = k < src_.size() && src_[k] == '-';
      // "{%+ endraw": the spaces before it stay (LstripBeforeTag).
      if (strip_before || (k < src_.size() && src_[k] == '+')) ++k;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      k += 6;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      bool strip_after = k < src_.size() && src_[k] == '-';
      bool keep_newline = k < src_.size() && src_[k] == '+';
      if (strip_after || keep_newline) ++k;
      if (src_.compare(k, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = src_.substr(pos_, open - pos_);
      if (strip_before) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else {
        LstripBeforeTag(text, pos_, open);
      }
      if (!text.empty()) AddText(std::move(text));
      Advance(k + 2);
      if (strip_after) {
        SkipSpace();
      } else if (!keep_newline) {
        SkipNewline();  // trim_blocks
      }
      return absl::OkStatus();
    }
  }

  std::string src_;
  std::vector<int> lines_;  // the template line of each character of src_
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
  size_t tokens_after_comment_ = 0;  // tokens_.size() when the last comment ended
  bool close_trims_ = false;         // the last tag closed with a plain "%}"
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(Number(NormalizeNewlines(source))).Run();
}

}  // namespace linserve::jinja
