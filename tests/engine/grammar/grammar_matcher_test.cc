#include "engine/grammar/grammar_matcher.h"

#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

Grammar Parse(const char* text) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(text);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  return grammar.ok() ? *std::move(grammar) : Grammar{};
}

// Every code point of a range, encoded, is matched by AppendCodePoints's
// sequences, and the neighbours outside it are not.
TEST(AppendCodePointsTest, MatchesExactlyTheRangesEncodings) {
  struct Range {
    uint32_t lo, hi;
  };
  for (Range range : {Range{0x41, 0x5A}, Range{0x70, 0x90}, Range{0x7FF, 0x801},
                      Range{0x3B1, 0x3C9}, Range{0xD7F0, 0xE010}, Range{0xFFF0, 0x10010},
                      Range{0x1F600, 0x1F64F}, Range{0x10FFF0, 0x10FFFF}}) {
    Grammar grammar;
    grammar.AddRule("root");
    AppendCodePoints(range.lo, range.hi, grammar.rules[0].alternatives);
    ASSERT_TRUE(CheckGrammar(grammar).ok());
    GrammarMatcher matcher(grammar);
    auto matches = [&](uint32_t code_point) {
      GrammarSequence bytes;
      AppendLiteral(code_point, bytes);
      std::string text;
      for (const GrammarSymbol& s : bytes) text.push_back(static_cast<char>(s.lo));
      GrammarState state = matcher.Start();
      return matcher.AdvanceAll(state, text) && GrammarMatcher::CanEnd(state);
    };
    for (uint32_t c = range.lo; c <= range.hi; ++c) {
      const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
      EXPECT_EQ(matches(c), !surrogate) << std::hex << c;
    }
    if (range.lo > 0) EXPECT_FALSE(matches(range.lo - 1)) << std::hex << range.lo - 1;
    if (range.hi < 0x10FFFF) EXPECT_FALSE(matches(range.hi + 1)) << std::hex << range.hi + 1;
  }
}

// Byte by byte: a multi-byte character is a prefix until its last byte.
TEST(GrammarMatcherTest, ACharacterSplitAcrossTokensIsAPrefixUntilItsLastByte) {
  const Grammar grammar = Parse(R"(root ::= [α-ω]+)");
  GrammarMatcher matcher(grammar);
  GrammarState state = matcher.Start();
  const std::string beta = "β";  // CE B2
  ASSERT_TRUE(matcher.AdvanceAll(state, beta.substr(0, 1)));
  EXPECT_FALSE(GrammarMatcher::CanEnd(state));
  ASSERT_TRUE(matcher.AdvanceAll(state, beta.substr(1)));
  EXPECT_TRUE(GrammarMatcher::CanEnd(state));
  GrammarState wrong = state;
  EXPECT_FALSE(matcher.AdvanceAll(wrong, "\xCE\x80"));  // U+0380, below alpha
  EXPECT_FALSE(matcher.AdvanceAll(state, "a"));
}

TEST(GrammarMatcherTest, RightRecursionDoesNotGrowTheStacks) {
  const Grammar grammar = Parse(R"(root ::= ("ab" | "c")* "!")");
  GrammarMatcher matcher(grammar);
  GrammarState state = matcher.Start();
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(matcher.AdvanceAll(state, i % 3 ? "ab" : "c"));
  EXPECT_LT(matcher.num_nodes(), 16u);
  EXPECT_FALSE(GrammarMatcher::CanEnd(state));
  ASSERT_TRUE(matcher.AdvanceAll(state, "!"));
  EXPECT_TRUE(GrammarMatcher::CanEnd(state));
  EXPECT_FALSE(GrammarMatcher::CanContinue(state));
}

TEST(GrammarMatcherTest, NestingIsCountedByTheStack) {
  const Grammar grammar = Parse(R"g(root ::= "(" root ")" | "x")g");
  GrammarMatcher matcher(grammar);
  GrammarState state = matcher.Start();
  const std::string open(200, '('), close(200, ')');
  ASSERT_TRUE(matcher.AdvanceAll(state, open + "x" + close.substr(1)));
  EXPECT_FALSE(GrammarMatcher::CanEnd(state));
  ASSERT_TRUE(matcher.AdvanceAll(state, ")"));
  EXPECT_TRUE(GrammarMatcher::CanEnd(state));
  EXPECT_FALSE(matcher.AdvanceAll(state, ")"));
}

// Equal positions are equal states, whatever the path: what makes them keys.
TEST(GrammarMatcherTest, EqualPositionsReachedTwoWaysAreEqualStates) {
  const Grammar grammar = Parse(R"(root ::= ("a" | "bc") "d")");
  GrammarMatcher matcher(grammar);
  GrammarState one = matcher.Start(), two = matcher.Start();
  ASSERT_TRUE(matcher.AdvanceAll(one, "a"));
  ASSERT_TRUE(matcher.AdvanceAll(two, "bc"));
  EXPECT_EQ(one, two);
}

// Every byte of ambiguity doubles the parses; past the bound the matcher
// refuses and says so rather than growing without limit.
TEST(GrammarMatcherTest, AmbiguityPastTheParseBoundIsRefusedAndReported) {
  const Grammar grammar = Parse(R"(root ::= x*
x ::= "a" y | "a" z
y ::= x? "b"
z ::= x? "c")");
  GrammarMatcher matcher(grammar, /*max_parses=*/64);
  GrammarState state = matcher.Start();
  bool refused = false;
  for (int i = 0; i < 20 && !refused; ++i) refused = !matcher.AdvanceAll(state, "a");
  EXPECT_TRUE(refused);
  EXPECT_TRUE(matcher.overflowed());
}

}  // namespace
}  // namespace linserve
