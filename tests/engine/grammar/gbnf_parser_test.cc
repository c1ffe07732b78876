#include "engine/grammar/gbnf_parser.h"

#include <string>

#include "absl/status/status.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

// Whether `text` is a whole sentence of the grammar.
bool Matches(const Grammar& grammar, const std::string& text) {
  GrammarMatcher matcher(grammar);
  GrammarState state = matcher.Start();
  return matcher.AdvanceAll(state, text) && GrammarMatcher::CanEnd(state);
}

TEST(GbnfParserTest, ParsesLlamaCppsJsonGrammar) {
  constexpr char kJson[] = R"(# JSON, as llama.cpp ships it
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";
  absl::StatusOr<Grammar> grammar = ParseGbnf(kJson);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Matches(*grammar, R"({"a": [1, 2.5e3, "x\"y", true, null], "b": {}})"));
  EXPECT_TRUE(Matches(*grammar, "{\"é\": \"日本\"}"));
  EXPECT_TRUE(Matches(*grammar, R"({"u": "\u00e9"})"));
  EXPECT_FALSE(Matches(*grammar, R"({"a": })"));
  EXPECT_FALSE(Matches(*grammar, R"({"a": 1)"));
  EXPECT_FALSE(Matches(*grammar, R"({"a": "\u00g9"})"));
  EXPECT_FALSE(Matches(*grammar, "[1]"));  // root is an object
}

TEST(GbnfParserTest, AlternativesMayContinueOnALineStartingWithABar) {
  absl::StatusOr<Grammar> grammar = ParseGbnf("root ::= \"a\"\n  | \"b\"\n");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Matches(*grammar, "a"));
  EXPECT_TRUE(Matches(*grammar, "b"));
}

TEST(GbnfParserTest, EscapesAndRanges) {
  absl::StatusOr<Grammar> grammar =
      ParseGbnf(R"(root ::= "\x41\u00e9\U0001F600\t\n\\\"" [\]\-a-c]+ .)");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Matches(*grammar, "Aé😀\t\n\\\"]-bx"));
  EXPECT_TRUE(Matches(*grammar, "Aé😀\t\n\\\"a😀"));
  EXPECT_FALSE(Matches(*grammar, "Aé😀\t\n\\\"dx"));
  EXPECT_FALSE(Matches(*grammar, "Aé😀\t\n\\\"a"));  // "." needs one more character
}

TEST(GbnfParserTest, RepetitionBounds) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(R"(root ::= "ab"{2,3} "c"{2} "d"{1,} "e"?)");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Matches(*grammar, "ababccd"));
  EXPECT_TRUE(Matches(*grammar, "abababccdddde"));
  EXPECT_FALSE(Matches(*grammar, "abccd"));
  EXPECT_FALSE(Matches(*grammar, "abababababccd"));
  EXPECT_FALSE(Matches(*grammar, "ababcd"));
  EXPECT_FALSE(Matches(*grammar, "ababcc"));
  EXPECT_FALSE(Matches(*grammar, "ababccdee"));
}

// Each malformed grammar is refused with the place and what was wrong.
TEST(GbnfParserTest, ErrorsNameTheLineAndWhatIsWrong) {
  struct Case {
    const char* grammar;
    const char* message;
  };
  const Case cases[] = {
      {"root := \"a\"", "line 1, column 6: expected '::=' after the rule name"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 10: rule 'root' is defined twice"},
      {"rot ::= \"a\"", "no rule named 'root'"},
      {"root ::= item", "rule 'item' is used but never defined"},
      {"root ::= \"abc", "line 1, column 14: a literal is not closed"},
      {"root ::= [a-", "a character class is not closed"},
      {"root ::= [z-a]", "a range in a character class ends before it starts"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"\\xZZ\"", "expected 2 hexadecimal digits"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root ::= \"a\"{3,2}", "n is less than m"},
      {"root ::= \"a\"{5000}", "a repetition count is over grammar_max_repeat = 1000"},
      {"root ::= \"a\" )", "expected the end of the line after the rule"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
      {"root ::= x \"a\"\nx ::= \"\" | root", "is left-recursive"},
      {"root ::= [^\\x00-\\U0010FFFF]", "matches no character"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Grammar> grammar = ParseGbnf(c.grammar);
    ASSERT_FALSE(grammar.ok()) << c.grammar;
    EXPECT_EQ(grammar.status().code(), absl::StatusCode::kInvalidArgument) << c.grammar;
    EXPECT_NE(grammar.status().message().find(c.message), std::string::npos)
        << c.grammar << " -> " << grammar.status().message();
  }
}

// A repetition's text is small and what it expands to need not be: it is
// counted before it is built.
TEST(GbnfParserTest, ExpansionPastTheSymbolLimitIsRefusedBeforeItIsBuilt) {
  GbnfLimits limits;
  limits.max_symbols = 5000;
  const std::string ten(10, 'x');
  absl::StatusOr<Grammar> grammar = ParseGbnf("root ::= \"" + ten + "\"{1000}", limits);
  ASSERT_FALSE(grammar.ok());
  EXPECT_NE(grammar.status().message().find("grows past max_grammar_symbols = 5000 symbols"),
            std::string::npos)
      << grammar.status();
  // Nesting repetitions goes through rules, which stay small.
  EXPECT_TRUE(ParseGbnf("root ::= ((\"x\"{1000}){1000}){1000}", limits).ok());
  std::string deep = "root ::= ";
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "\"a\"";
  for (int i = 0; i < 100; ++i) deep += ")";
  grammar = ParseGbnf(deep, limits);
  ASSERT_FALSE(grammar.ok());
  EXPECT_NE(grammar.status().message().find("nest deeper than grammar_max_nesting = 64"),
            std::string::npos);
}

}  // namespace
}  // namespace linserve
