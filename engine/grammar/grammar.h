#ifndef LINSERVE_ENGINE_GRAMMAR_GRAMMAR_H_
#define LINSERVE_ENGINE_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

// A context-free grammar over bytes: the form every constraint (GBNF, a JSON
// schema, a choice list) is compiled to, and the one the matcher walks.
// Terminals are byte ranges, not code points, so a token that ends inside a
// UTF-8 character leaves the matcher inside that character's byte sequence,
// and the byte tokenizer and the World tokenizer are served alike. A
// character class of code points becomes alternatives of byte-range
// sequences (AppendCodePoints).
struct GrammarSymbol {
  int32_t rule = -1;  // >= 0: a reference to Grammar::rules[rule]
  uint8_t lo = 0;     // rule < 0: one byte in [lo, hi]
  uint8_t hi = 0;

  static GrammarSymbol Bytes(uint8_t lo, uint8_t hi) { return {-1, lo, hi}; }
  static GrammarSymbol Rule(int32_t rule) { return {rule, 0, 0}; }
  bool is_rule() const { return rule >= 0; }
};

using GrammarSequence = std::vector<GrammarSymbol>;  // empty: matches nothing, at once

struct GrammarRule {
  std::string name;                           // for errors; generated rules get "name_3"
  std::vector<GrammarSequence> alternatives;  // at least one
};

struct Grammar {
  std::vector<GrammarRule> rules;
  int32_t root = 0;

  // Adds an empty rule and returns its index.
  int32_t AddRule(std::string name);
  // The number of symbols in every alternative of every rule: the size that
  // the limits count.
  int64_t NumSymbols() const;
};

// Appends to `out` one alternative per byte-range sequence that together match
// exactly the UTF-8 encodings of the code points in [lo, hi] (surrogates,
// which UTF-8 cannot encode, excluded). lo <= hi <= 0x10FFFF.
void AppendCodePoints(uint32_t lo, uint32_t hi, std::vector<GrammarSequence>& out);

// Inclusive code-point ranges, as classes are written.
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
// Sorted, with overlapping and touching ranges joined.
CodePointRanges MergeCodePoints(CodePointRanges ranges);
// The code points up to U+10FFFF that `merged` (MergeCodePoints's) leaves out.
CodePointRanges ComplementCodePoints(const CodePointRanges& merged);

// Appends the UTF-8 bytes of `code_point` to `out` as single-byte symbols.
void AppendLiteral(uint32_t code_point, GrammarSequence& out);

// Checks what the matcher relies on: every reference names a rule, every rule
// has an alternative, and no rule reaches itself before consuming a byte
// (left recursion, also through rules that can match nothing), which a
// top-down matcher would loop on. The error names the rule.
absl::Status CheckGrammar(const Grammar& grammar);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_GRAMMAR_H_
