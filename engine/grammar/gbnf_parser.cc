#include "engine/grammar/gbnf_parser.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A class's ranges, merged, then (for [^...]) what they leave out.
CodePointRanges Normalize(CodePointRanges ranges, bool negated) {
  CodePointRanges merged = MergeCodePoints(std::move(ranges));
  return negated ? ComplementCodePoints(merged) : merged;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GbnfLimits& limits) : text_(text), limits_(limits) {}

  absl::StatusOr<Grammar> Parse() {
    SkipSpace(/*newlines=*/true);
    while (!AtEnd()) {
      LINSERVE_RETURN_IF_ERROR(ParseRule());
      SkipSpace(/*newlines=*/true);
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) return absl::InvalidArgumentError("GBNF: no rule named 'root'");
    grammar_.root = root->second;
    for (const GrammarRule& rule : grammar_.rules) {
      if (rule.alternatives.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("GBNF: rule '", rule.name, "' is used but never defined"));
      }
    }
    if (grammar_.NumSymbols() > limits_.max_symbols) return TooLarge();
    LINSERVE_RETURN_IF_ERROR(CheckGrammar(grammar_));
    return std::move(grammar_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  absl::Status Error(std::string_view what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("GBNF line ", line, ", column ", column, ": ", std::string(what)));
  }

  absl::Status TooLarge() const {
    return Error(absl::StrCat("the grammar grows past max_grammar_symbols = ", limits_.max_symbols,
                              " symbols (repetitions expanded)"));
  }

  // Spaces, tabs and comments; newlines too where the rule goes on.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  // At a line's end: whether the next non-blank line starts with "|".
  bool ContinuesOnNextLine() const {
    size_t p = pos_;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r' ||
                                text_[p] == '\n')) {
      ++p;
    }
    return p < text_.size() && text_[p] == '|';
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  int32_t RuleId(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, 0);
    if (inserted) it->second = grammar_.AddRule(name);
    return it->second;
  }

  int32_t NewRule(std::string_view base) {
    return grammar_.AddRule(absl::StrCat(std::string(base), "_", grammar_.rules.size()));
  }

  absl::Status ParseRule() {
    const std::string name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(/*newlines=*/false);
    if (text_.substr(pos_, 3) != "::=") return Error("expected '::=' after the rule name");
    pos_ += 3;
    SkipSpace(/*newlines=*/true);
    const int32_t id = RuleId(name);
    if (!grammar_.rules[id].alternatives.empty()) {
      return Error(absl::StrCat("rule '", name, "' is defined twice"));
    }
    std::vector<GrammarSequence> alternatives;
    LINSERVE_RETURN_IF_ERROR(ParseAlternatives(name, /*depth=*/0, alternatives));
    grammar_.rules[id].alternatives = std::move(alternatives);
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') {
      return Error("expected the end of the line after the rule");
    }
    return absl::OkStatus();
  }

  absl::Status ParseAlternatives(std::string_view rule, int depth,
                                 std::vector<GrammarSequence>& out) {
    const bool nested = depth > 0;
    while (true) {
      GrammarSequence sequence;
      LINSERVE_RETURN_IF_ERROR(ParseSequence(rule, depth, sequence));
      out.push_back(std::move(sequence));
      if (!nested && ContinuesOnNextLine()) SkipSpace(/*newlines=*/true);
      if (Peek() != '|') return absl::OkStatus();
      ++pos_;
      SkipSpace(/*newlines=*/true);
    }
  }

  absl::Status ParseSequence(std::string_view rule, int depth, GrammarSequence& out) {
    const bool nested = depth > 0;
    while (!AtEnd()) {
      const size_t item_start = out.size();
      const char c = Peek();
      if (c == '"') {
        ++pos_;
        while (Peek() != '"') {
          if (AtEnd() || Peek() == '\n') return Error("a literal is not closed with '\"'");
          LINSERVE_ASSIGN_OR_RETURN(const uint32_t code_point, ParseChar());
          AppendLiteral(code_point, out);
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        LINSERVE_RETURN_IF_ERROR(ParseClass(rule, out));
      } else if (c == '.') {
        ++pos_;
        const int32_t any = NewRule(rule);
        AppendCodePoints(0, kMaxCodePoint, grammar_.rules[any].alternatives);
        out.push_back(GrammarSymbol::Rule(any));
      } else if (IsNameChar(c)) {
        out.push_back(GrammarSymbol::Rule(RuleId(ParseName())));
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          return Error(absl::StrCat("parentheses nest deeper than grammar_max_nesting = ",
                                    limits_.max_nesting));
        }
        ++pos_;
        SkipSpace(/*newlines=*/true);
        const int32_t group = NewRule(rule);
        std::vector<GrammarSequence> alternatives;
        LINSERVE_RETURN_IF_ERROR(ParseAlternatives(rule, depth + 1, alternatives));
        grammar_.rules[group].alternatives = std::move(alternatives);
        if (Peek() != ')') return Error("expected ')'");
        ++pos_;
        out.push_back(GrammarSymbol::Rule(group));
      } else {
        break;  // '|', ')', a newline, or an error the caller names
      }
      SkipSpace(nested);
      LINSERVE_RETURN_IF_ERROR(ParsePostfix(rule, nested, item_start, out));
    }
    return absl::OkStatus();
  }

  // One character of a literal or class, escapes decoded, as a code point.
  absl::StatusOr<uint32_t> ParseChar() {
    const auto byte = static_cast<unsigned char>(Peek());
    if (byte == '\\') {
      ++pos_;
      const char e = Peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': return e;
        case 'x': return ParseHex(2);
        case 'u': return ParseHex(4);
        case 'U': return ParseHex(8);
        default:
          --pos_;
          return Error("unknown escape");
      }
    }
    // UTF-8: the text is a JSON string or a file, so it should be valid.
    int length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0;
    if (length == 0 || pos_ + length > text_.size()) return Error("invalid UTF-8");
    uint32_t code_point = length == 1 ? byte : byte & (0x3F >> (length - 1));
    for (int i = 1; i < length; ++i) {
      const auto next = static_cast<unsigned char>(text_[pos_ + i]);
      if ((next & 0xC0) != 0x80) return Error("invalid UTF-8");
      code_point = code_point << 6 | (next & 0x3F);
    }
    pos_ += length;
    return code_point;
  }

  absl::StatusOr<uint32_t> ParseHex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int v = HexValue(Peek());
      if (v < 0) return Error(absl::StrCat("expected ", digits, " hexadecimal digits"));
      value = value << 4 | static_cast<uint32_t>(v);
      ++pos_;
    }
    if (value > kMaxCodePoint) return Error("the code point is past U+10FFFF");
    return value;
  }

  absl::Status ParseClass(std::string_view rule, GrammarSequence& out) {
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    CodePointRanges ranges;
    while (Peek() != ']') {
      if (AtEnd() || Peek() == '\n') return Error("a character class is not closed with ']'");
      LINSERVE_ASSIGN_OR_RETURN(const uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        LINSERVE_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("a range in a character class ends before it starts");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    const int32_t id = NewRule(rule);
    for (const auto& [lo, hi] : Normalize(std::move(ranges), negated)) {
      AppendCodePoints(lo, hi, grammar_.rules[id].alternatives);
    }
    if (grammar_.rules[id].alternatives.empty()) {
      return Error("the character class matches no character");
    }
    out.push_back(GrammarSymbol::Rule(id));
    return absl::OkStatus();
  }

  // Applies the postfix operators after the item that starts at `item_start`
  // of `out`, as llama.cpp does: x{m,n} is m copies of x, then n - m nested
  // optionals (x (x (x)?)?)?, so a repetition never matches two ways.
  absl::Status ParsePostfix(std::string_view rule, bool nested, size_t item_start,
                            GrammarSequence& out) {
    while (true) {
      const char c = Peek();
      int min = 0, max = -1;  // -1: unbounded
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        ++pos_;
        LINSERVE_RETURN_IF_ERROR(ParseBounds(min, max));
      } else {
        return absl::OkStatus();
      }
      const GrammarSequence item(out.begin() + static_cast<std::ptrdiff_t>(item_start), out.end());
      out.resize(item_start);
      // Counted before the copies are made: the text of a repetition is
      // small, what it expands to need not be.
      copied_symbols_ += static_cast<int64_t>(item.size()) * (std::max(min, max) + 1);
      if (copied_symbols_ > limits_.max_symbols) return TooLarge();
      for (int i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
      if (max < 0) {
        // R ::= item R | (nothing)
        const int32_t star = NewRule(rule);
        GrammarSequence again = item;
        again.push_back(GrammarSymbol::Rule(star));
        grammar_.rules[star].alternatives = {std::move(again), {}};
        out.push_back(GrammarSymbol::Rule(star));
      } else if (max > min) {
        int32_t inner = -1;
        for (int i = 0; i < max - min; ++i) {
          const int32_t optional = NewRule(rule);
          GrammarSequence once = item;
          if (inner >= 0) once.push_back(GrammarSymbol::Rule(inner));
          grammar_.rules[optional].alternatives = {std::move(once), {}};
          inner = optional;
        }
        out.push_back(GrammarSymbol::Rule(inner));
      }
      SkipSpace(nested);
    }
  }

  absl::Status ParseBounds(int& min, int& max) {
    auto number = [this](int& value) -> absl::Status {
      SkipSpace(false);
      if (!(Peek() >= '0' && Peek() <= '9')) return Error("expected a number in {m,n}");
      int64_t n = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        n = n * 10 + (Peek() - '0');
        if (n > limits_.max_repeat) {
          return Error(
              absl::StrCat("a repetition count is over grammar_max_repeat = ", limits_.max_repeat));
        }
        ++pos_;
      }
      value = static_cast<int>(n);
      SkipSpace(false);
      return absl::OkStatus();
    };
    LINSERVE_RETURN_IF_ERROR(number(min));
    max = min;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      if (Peek() == '}') {
        max = -1;
      } else {
        LINSERVE_RETURN_IF_ERROR(number(max));
        if (max < min) return Error("in {m,n}, n is less than m");
      }
    }
    if (Peek() != '}') return Error("expected '}'");
    ++pos_;
    return absl::OkStatus();
  }

  std::string_view text_;
  const GbnfLimits& limits_;
  size_t pos_ = 0;
  int64_t copied_symbols_ = 0;  // by repetitions, so far
  Grammar grammar_;
  absl::flat_hash_map<std::string, int32_t> ids_;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GbnfLimits& limits) {
  return GbnfParser(text, limits).Parse();
}

}  // namespace linserve
