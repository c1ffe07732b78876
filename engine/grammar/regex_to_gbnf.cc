#include "engine/grammar/regex_to_gbnf.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/status_macros.h"
#include "engine/grammar/grammar.h"

namespace linserve {
namespace {

using Ranges = CodePointRanges;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
// One character of a JSON string's text that stands for itself.
constexpr char kJsonChar[] = R"([^"\\\x00-\x1F\x7F])";

// What a JSON string must escape: the quote, the backslash, controls.
Ranges WithoutEscaped(const Ranges& merged) {
  const Ranges forbidden = {{0x00, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};
  Ranges allowed = ComplementCodePoints(forbidden);
  Ranges out;
  for (const auto& [a, b] : merged) {
    for (const auto& [c, d] : allowed) {
      const uint32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return out;
}

std::string ClassChar(uint32_t c) {
  if (c < 0x80 && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
    return std::string(1, static_cast<char>(c));
  }
  return c <= 0xFFFF ? absl::StrFormat("\\u%04X", c) : absl::StrFormat("\\U%08X", c);
}

std::string ClassOf(const Ranges& ranges) {
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += ClassChar(lo);
    if (hi != lo) out += "-" + ClassChar(hi);
  }
  return out + "]";
}

const Ranges kDigits = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{' ', ' '}};  // the others are escapes in JSON text

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const int length = byte < 0x80 ? 1 : (byte >> 5) == 6 ? 2 : (byte >> 4) == 14 ? 3
                       : (byte >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const GrammarLimits& limits)
      : pattern_(pattern), limits_(limits) {}

  absl::StatusOr<std::string> Parse() {
    if (!IsValidUtf8(pattern_)) return Error("text that is not valid UTF-8");
    bool anchored_start = false, anchored_end = false;
    if (!pattern_.empty() && pattern_.front() == '^') {
      anchored_start = true;
      pattern_.remove_prefix(1);
    }
    if (!pattern_.empty() && pattern_.back() == '$' &&
        (pattern_.size() < 2 || pattern_[pattern_.size() - 2] != '\\')) {
      anchored_end = true;
      pattern_.remove_suffix(1);
    }
    LINSERVE_ASSIGN_OR_RETURN(std::string body, Alternation(0));
    if (pos_ < pattern_.size()) return Error("an unmatched ')'");
    std::string out = "(" + body + ")";
    if (!anchored_start) out = std::string(kJsonChar) + "* " + out;
    if (!anchored_end) out += std::string(" ") + kJsonChar + "*";
    return out;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("pattern \"", std::string(pattern_),
                                                   "\": ", std::string(what), " at offset ", pos_,
                                                   " is not supported"));
  }
  bool AtEnd() const { return pos_ >= pattern_.size(); }
  char Peek() const { return AtEnd() ? '\0' : pattern_[pos_]; }

  // Each of these leaves in nullable_ whether what it parsed can match
  // nothing: a repetition of such a group would be left-recursive in GBNF.
  absl::StatusOr<std::string> Alternation(int depth) {
    if (depth > limits_.max_regex_nesting) {
      return Error(absl::StrCat("groups nested deeper than grammar_max_regex_nesting = ",
                                limits_.max_regex_nesting));
    }
    std::string out;
    bool any = false;
    while (true) {
      LINSERVE_ASSIGN_OR_RETURN(std::string sequence, Sequence(depth));
      any = any || nullable_;
      out += sequence.empty() ? "\"\"" : sequence;
      if (Peek() != '|') {
        nullable_ = any;
        return out;
      }
      ++pos_;
      out += " | ";
    }
  }

  absl::StatusOr<std::string> Sequence(int depth) {
    std::string out;
    bool all = true;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      nullable_ = false;
      LINSERVE_ASSIGN_OR_RETURN(std::string atom, Atom(depth));
      const bool atom_nullable = nullable_;
      LINSERVE_ASSIGN_OR_RETURN(std::string quantifier, Quantifier());
      if (atom_nullable && repeats_) return Error("a repetition of a group that can match nothing");
      all = all && (atom_nullable || optional_);
      if (!out.empty()) out += ' ';
      // Every atom is one GBNF item (a literal, a class, or a group already in
      // parentheses), so a quantifier applies to it whole; wrapping it again
      // would spend a level of GBNF nesting (grammar_max_nesting) for nothing.
      out += atom + quantifier;
    }
    nullable_ = all;
    return out;
  }

  // Sets repeats_ (it may match its atom more than once) and optional_ (it
  // may match it no time).
  absl::StatusOr<std::string> Quantifier() {
    std::string out;
    const char c = Peek();
    repeats_ = optional_ = false;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      out = std::string(1, c);
      repeats_ = c != '?';
      optional_ = c != '+';
    } else if (c == '{') {
      const size_t close = pattern_.find('}', pos_);
      if (close == std::string_view::npos) return Error("an unclosed '{'");
      const std::string_view bounds = pattern_.substr(pos_ + 1, close - pos_ - 1);
      const size_t comma = bounds.find(',');
      const std::string_view low = bounds.substr(0, comma);
      const std::string_view high =
          comma == std::string_view::npos ? low : bounds.substr(comma + 1);
      int min = 0, max = 0;
      if (!Count(low, min) || (!high.empty() && !Count(high, max)) ||
          (!high.empty() && max < min)) {
        return Error(absl::StrCat(
            "a malformed {m,n} (m <= n <= grammar_max_repeat = ", limits_.max_repeat, ")"));
      }
      repeats_ = high.empty() || max > 1;
      optional_ = min == 0;
      out = "{" + std::string(bounds) + "}";
      pos_ = close + 1;
    } else {
      return out;
    }
    if (Peek() == '?' || Peek() == '+') return Error("a lazy or possessive quantifier");
    return out;
  }

  // A repetition count: digits, at most max_repeat.
  bool Count(std::string_view digits, int& value) const {
    if (digits.empty() || digits.size() > 9) return false;  // no int overflow
    value = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    return value <= limits_.max_repeat;
  }

  absl::StatusOr<std::string> Atom(int depth) {
    const char c = Peek();
    ++pos_;
    switch (c) {
      case '(': {
        if (Peek() == '?') {
          if (pattern_.substr(pos_, 2) != "?:") return Error("lookaround or a named group");
          pos_ += 2;
        }
        LINSERVE_ASSIGN_OR_RETURN(std::string inner, Alternation(depth + 1));
        if (Peek() != ')') return Error("an unclosed '('");
        ++pos_;  // nullable_ stays the group's
        return "(" + inner + ")";
      }
      case '.':
        return std::string(kJsonChar);
      case '[':
        return Class();
      case '^':
      case '$':
        return Error("an anchor inside the pattern");
      case '*':
      case '+':
      case '?':
      case '{':
        return Error("a quantifier with nothing before it");
      case '\\':
        return Escape();
      default:
        --pos_;
        return Literal(NextCodePoint());
    }
  }

  // The JSON text of one literal character.
  std::string Literal(uint32_t c) {
    switch (c) {
      case '"': return GbnfLiteral("\\\"");
      case '\\': return GbnfLiteral("\\\\");
      case '\n': return GbnfLiteral("\\n");
      case '\t': return GbnfLiteral("\\t");
      case '\r': return GbnfLiteral("\\r");
      default: break;
    }
    if (c < 0x20 || c == 0x7F) return GbnfLiteral(absl::StrFormat("\\u%04x", c));
    std::string utf8;
    if (c < 0x80) {
      utf8 = std::string(1, static_cast<char>(c));
    } else {
      utf8 = std::string(pattern_.substr(last_start_, pos_ - last_start_));
    }
    return GbnfLiteral(utf8);
  }

  uint32_t NextCodePoint() {
    last_start_ = pos_;
    const auto byte = static_cast<unsigned char>(pattern_[pos_++]);
    if (byte < 0x80) return byte;
    const int length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
    uint32_t c = byte & (0x3F >> (length - 1));
    for (int i = 1; i < length && !AtEnd(); ++i) {
      c = c << 6 | (static_cast<unsigned char>(pattern_[pos_++]) & 0x3F);
    }
    return c;
  }

  absl::StatusOr<std::string> Escape() {
    if (AtEnd()) return Error("a trailing backslash");
    const char e = pattern_[pos_++];
    switch (e) {
      case 'd': return ClassOf(kDigits);
      case 'w': return ClassOf(kWord);
      case 's': return std::string(R"((" " | "\\n" | "\\t" | "\\r"))");
      case 'D': return ClassOf(WithoutEscaped(ComplementCodePoints(kDigits)));
      case 'W': return ClassOf(WithoutEscaped(ComplementCodePoints(kWord)));
      case 'S': return ClassOf(WithoutEscaped(ComplementCodePoints(MergeCodePoints({{' ', ' '}, {'\t', '\r'}}))));
      case 'n': return Literal('\n');
      case 't': return Literal('\t');
      case 'r': return Literal('\r');
      default: break;
    }
    if ((e >= '0' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P') {
      return Error(absl::StrCat("the escape \\", std::string(1, e)));
    }
    if (static_cast<unsigned char>(e) >= 0x80 || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      return Error(absl::StrCat("the escape \\", std::string(1, e)));
    }
    return Literal(static_cast<unsigned char>(e));  // \. \\ \/ \- \( ...
  }

  absl::StatusOr<std::string> Class() {
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    Ranges ranges;
    bool first = true;
    while (AtEnd() || Peek() != ']' || first) {
      if (AtEnd()) return Error("an unclosed '['");
      first = false;
      uint32_t lo;
      if (Peek() == '\\') {
        ++pos_;
        if (AtEnd()) return Error("a trailing backslash");
        const char e = pattern_[pos_++];
        const Ranges* named = e == 'd' ? &kDigits : e == 'w' ? &kWord : e == 's' ? &kSpace : nullptr;
        if (named != nullptr) {
          ranges.insert(ranges.end(), named->begin(), named->end());
          continue;
        }
        if (e == 'n') {
          lo = '\n';
        } else if (e == 't') {
          lo = '\t';
        } else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          return Error(absl::StrCat("the escape \\", std::string(1, e), " in a class"));
        } else {
          lo = static_cast<unsigned char>(e);
        }
      } else {
        lo = NextCodePoint();
      }
      uint32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < pattern_.size() && pattern_[pos_ + 1] != ']') {
        ++pos_;
        if (Peek() == '\\') {
          ++pos_;
          if (AtEnd()) return Error("a trailing backslash");
          hi = static_cast<unsigned char>(pattern_[pos_++]);
        } else {
          hi = NextCodePoint();
        }
        if (hi < lo) return Error("a class range that ends before it starts");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    Ranges merged = MergeCodePoints(std::move(ranges));
    if (negated) merged = ComplementCodePoints(merged);
    merged = WithoutEscaped(merged);
    if (merged.empty()) return Error("a class that matches no unescaped character");
    return ClassOf(merged);
  }

  std::string_view pattern_;
  const GrammarLimits limits_;
  size_t pos_ = 0;
  size_t last_start_ = 0;
  bool nullable_ = false;
  bool repeats_ = false;
  bool optional_ = false;
};

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      out += absl::StrFormat("\\x%02X", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, const GrammarLimits& limits) {
  return RegexParser(pattern, limits).Parse();
}

}  // namespace linserve
