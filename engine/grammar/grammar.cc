#include "engine/grammar/grammar.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace linserve {

int32_t Grammar::AddRule(std::string name) {
  rules.push_back({std::move(name), {}});
  return static_cast<int32_t>(rules.size() - 1);
}

int64_t Grammar::NumSymbols() const {
  int64_t symbols = 0;
  for (const GrammarRule& rule : rules) {
    for (const GrammarSequence& alternative : rule.alternatives) {
      symbols += static_cast<int64_t>(alternative.size());
    }
  }
  return symbols;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogatesBegin = 0xD800;
constexpr uint32_t kSurrogatesEnd = 0xDFFF;

int EncodedLength(uint32_t code_point) {
  if (code_point < 0x80) return 1;
  if (code_point < 0x800) return 2;
  if (code_point < 0x10000) return 3;
  return 4;
}

int Encode(uint32_t code_point, uint8_t bytes[4]) {
  const int n = EncodedLength(code_point);
  if (n == 1) {
    bytes[0] = static_cast<uint8_t>(code_point);
    return 1;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    bytes[i] = static_cast<uint8_t>(0x80 | (code_point & 0x3F));
    code_point >>= 6;
  }
  bytes[0] = static_cast<uint8_t>(kLead[n] | code_point);
  return n;
}

// [lo, hi] within one encoded length: split until every byte position ranges
// independently (the lower bytes of lo are all 0x80 and those of hi all 0xBF
// wherever their leading bytes differ), then one sequence of ranges each.
void AppendSameLength(uint32_t lo, uint32_t hi, std::vector<GrammarSequence>& out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t low_bits = (1u << (6 * i)) - 1;
    if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
    if ((lo & low_bits) != 0) {
      AppendSameLength(lo, lo | low_bits, out);
      AppendSameLength((lo | low_bits) + 1, hi, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      AppendSameLength(lo, (hi & ~low_bits) - 1, out);
      AppendSameLength(hi & ~low_bits, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  GrammarSequence sequence;
  for (int i = 0; i < n; ++i) sequence.push_back(GrammarSymbol::Bytes(a[i], b[i]));
  out.push_back(std::move(sequence));
}

}  // namespace

void AppendCodePoints(uint32_t lo, uint32_t hi, std::vector<GrammarSequence>& out) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  if (lo <= kSurrogatesEnd && hi >= kSurrogatesBegin) {
    if (lo < kSurrogatesBegin) AppendCodePoints(lo, kSurrogatesBegin - 1, out);
    if (hi > kSurrogatesEnd) AppendCodePoints(kSurrogatesEnd + 1, hi, out);
    return;
  }
  for (uint32_t limit : {0x7Fu, 0x7FFu, 0xFFFFu, kMaxCodePoint}) {
    if (lo > limit) continue;
    AppendSameLength(lo, std::min(hi, limit), out);
    if (hi <= limit) return;
    lo = limit + 1;
  }
}

CodePointRanges MergeCodePoints(CodePointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (const auto& [lo, hi] : ranges) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  return merged;
}

CodePointRanges ComplementCodePoints(const CodePointRanges& merged) {
  CodePointRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : merged) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

void AppendLiteral(uint32_t code_point, GrammarSequence& out) {
  uint8_t bytes[4];
  const int n = Encode(code_point, bytes);
  for (int i = 0; i < n; ++i) out.push_back(GrammarSymbol::Bytes(bytes[i], bytes[i]));
}

absl::Status CheckGrammar(const Grammar& grammar) {
  const auto rules = static_cast<int32_t>(grammar.rules.size());
  if (grammar.root < 0 || grammar.root >= rules) {
    return absl::InvalidArgumentError("the grammar has no root rule");
  }
  for (const GrammarRule& rule : grammar.rules) {
    if (rule.alternatives.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", rule.name, "' is used but never defined"));
    }
    for (const GrammarSequence& alternative : rule.alternatives) {
      for (const GrammarSymbol& symbol : alternative) {
        if (symbol.rule >= rules || (!symbol.is_rule() && symbol.lo > symbol.hi)) {
          return absl::InternalError(absl::StrCat("rule '", rule.name, "' has a bad symbol"));
        }
      }
    }
  }
  // Which rules can match the empty string: a fixed point.
  std::vector<bool> nullable(rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < rules; ++r) {
      if (nullable[r]) continue;
      for (const GrammarSequence& alternative : grammar.rules[r].alternatives) {
        bool all = true;
        for (const GrammarSymbol& symbol : alternative) {
          if (!symbol.is_rule() || !nullable[symbol.rule]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // The rules each rule can start with before a byte is consumed.
  std::vector<std::vector<int32_t>> leftmost(rules);
  for (int32_t r = 0; r < rules; ++r) {
    for (const GrammarSequence& alternative : grammar.rules[r].alternatives) {
      for (const GrammarSymbol& symbol : alternative) {
        if (!symbol.is_rule()) break;
        leftmost[r].push_back(symbol.rule);
        if (!nullable[symbol.rule]) break;
      }
    }
  }
  // A cycle among them is left recursion. Depth-first, iteratively: a
  // generated grammar may chain thousands of rules.
  enum Mark : uint8_t { kUnseen, kOnPath, kDone };
  std::vector<Mark> mark(rules, kUnseen);
  for (int32_t start = 0; start < rules; ++start) {
    if (mark[start] != kUnseen) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{start, 0}};
    mark[start] = kOnPath;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == leftmost[rule].size()) {
        mark[rule] = kDone;
        path.pop_back();
        continue;
      }
      const int32_t callee = leftmost[rule][next++];
      if (mark[callee] == kOnPath) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rule '", grammar.rules[callee].name,
            "' is left-recursive: it can reach itself before matching a byte; "
            "write the repetition with * or + instead"));
      }
      if (mark[callee] == kUnseen) {
        mark[callee] = kOnPath;
        path.push_back({callee, 0});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace linserve
