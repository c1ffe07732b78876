// Every bound on what a constraint may cost, at the bound and one past it:
// accepted at it, refused past it with an error that names the limit as the
// server flag that sets it. The attacks are the inputs: deep nesting, large
// counts, ambiguous grammars whose parses multiply.

#include "engine/grammar/grammar_limits.h"

#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

using json = nlohmann::ordered_json;

std::string Repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// `depth` parentheses around one literal.
std::string NestedGbnf(int depth) {
  return "root ::= " + Repeated("(", depth) + "\"x\"" + Repeated(")", depth);
}

// `depth` schemas inside one another: arrays of arrays of an integer.
json NestedSchema(int depth) {
  json schema = {{"type", "integer"}};
  for (int i = 1; i < depth; ++i) schema = json{{"type", "array"}, {"items", schema}};
  return schema;
}

// A pattern of `depth` groups inside one another.
std::string NestedPattern(int depth) {
  return "^" + Repeated("(", depth) + "a" + Repeated(")", depth) + "$";
}

// A JSON schema compiled and parsed under the same limits, as the server does.
absl::Status CompileSchema(const json& schema, const GrammarLimits& limits) {
  JsonSchemaOptions options;
  options.limits = limits;
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema, options);
  if (!gbnf.ok()) return gbnf.status();
  return ParseGbnf(*gbnf, limits).status();
}

void ExpectRefusedNaming(const absl::Status& status, const std::string& words) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(words), std::string::npos) << status;
}

TEST(GrammarLimitsTest, DefaultsAreTheBoundsThatWereConstants) {
  const GrammarLimits limits;
  EXPECT_EQ(limits.max_nesting, 64);
  EXPECT_EQ(limits.max_repeat, 1000);
  EXPECT_EQ(limits.max_regex_nesting, 32);
  EXPECT_EQ(limits.max_symbols, 100000);
  EXPECT_TRUE(ParseGbnf(NestedGbnf(64)).ok());
  ExpectRefusedNaming(ParseGbnf(NestedGbnf(65)).status(), "grammar_max_nesting = 64");
}

TEST(GrammarLimitsTest, GbnfNestingIsAcceptedAtTheLimitAndRefusedPastIt) {
  for (int limit : {1, 8, 64, 200}) {
    GrammarLimits limits;
    limits.max_nesting = limit;
    EXPECT_TRUE(ParseGbnf(NestedGbnf(limit), limits).ok()) << limit;
    ExpectRefusedNaming(
        ParseGbnf(NestedGbnf(limit + 1), limits).status(),
        "parentheses nest deeper than grammar_max_nesting = " + std::to_string(limit));
  }
  // The attack: far deeper than any limit, refused without recursing into it.
  ExpectRefusedNaming(ParseGbnf(NestedGbnf(100000)).status(), "grammar_max_nesting = 64");
}

TEST(GrammarLimitsTest, GbnfRepetitionIsAcceptedAtTheLimitAndRefusedPastIt) {
  GrammarLimits limits;
  limits.max_repeat = 20;
  for (const char* ok : {"root ::= \"a\"{20}", "root ::= \"a\"{0,20}", "root ::= \"a\"{20,}"}) {
    EXPECT_TRUE(ParseGbnf(ok, limits).ok()) << ok;
  }
  for (const char* bad : {"root ::= \"a\"{21}", "root ::= \"a\"{0,21}", "root ::= \"a\"{21,}",
                          "root ::= \"a\"{99999999999999999999}"}) {
    ExpectRefusedNaming(ParseGbnf(bad, limits).status(),
                        "a repetition count is over grammar_max_repeat = 20");
  }
}

TEST(GrammarLimitsTest, SchemaNestingIsAcceptedAtTheLimitAndRefusedPastIt) {
  for (int limit : {8, 64}) {
    GrammarLimits limits;
    limits.max_nesting = limit;
    EXPECT_TRUE(CompileSchema(NestedSchema(limit), limits).ok()) << limit;
    const absl::Status past = CompileSchema(NestedSchema(limit + 1), limits);
    ExpectRefusedNaming(past,
                        "schemas nest deeper than grammar_max_nesting = " + std::to_string(limit));
    EXPECT_NE(past.message().find("json_schema #/items"), std::string::npos) << past;
  }
  // A $ref that recurses is not nesting: it is one rule, however deep the text.
  GrammarLimits limits;
  limits.max_nesting = 8;
  EXPECT_TRUE(CompileSchema(
                  json::parse(R"({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                                          "$ref": "#/$defs/t"})"),
                  limits)
                  .ok());
}

TEST(GrammarLimitsTest, SchemaCountsAreAcceptedAtTheRepeatLimitAndRefusedPastIt) {
  GrammarLimits limits;
  limits.max_repeat = 20;
  for (const char* key : {"minLength", "maxLength"}) {
    EXPECT_TRUE(CompileSchema(json{{"type", "string"}, {key, 20}}, limits).ok()) << key;
    const absl::Status past = CompileSchema(json{{"type", "string"}, {key, 21}}, limits);
    ExpectRefusedNaming(past, "must be an integer in [0, grammar_max_repeat = 20]");
    EXPECT_NE(past.message().find(std::string("#/") + key), std::string::npos) << past;
  }
  for (const char* key : {"minItems", "maxItems"}) {
    EXPECT_TRUE(CompileSchema(json{{"type", "array"}, {key, 20}}, limits).ok()) << key;
    ExpectRefusedNaming(CompileSchema(json{{"type", "array"}, {key, 21}}, limits),
                        "grammar_max_repeat = 20");
  }
  // Far past it, and past int64.
  ExpectRefusedNaming(
      CompileSchema(json::parse(R"({"type": "string", "maxLength": 1e300})"), limits),
      "grammar_max_repeat = 20");
  ExpectRefusedNaming(
      CompileSchema(json::parse(R"({"type": "string", "maxLength": 18446744073709551615})"),
                    limits),
      "grammar_max_repeat = 20");
}

TEST(GrammarLimitsTest, PatternNestingIsAcceptedAtTheLimitAndRefusedPastIt) {
  for (int limit : {1, 4, 32}) {
    GrammarLimits limits;
    limits.max_regex_nesting = limit;
    EXPECT_TRUE(RegexToGbnf(NestedPattern(limit), limits).ok()) << limit;
    ExpectRefusedNaming(RegexToGbnf(NestedPattern(limit + 1), limits).status(),
                        "grammar_max_regex_nesting = " + std::to_string(limit));
  }
  // At the default limits, a pattern of 32 groups, each repeated, still fits
  // the GBNF nesting it compiles to (a group costs one level, not two).
  const std::string repeated = "^" + Repeated("(", 32) + "a" + Repeated(")+", 32) + "$";
  const absl::Status repeated_status =
      CompileSchema(json{{"type", "string"}, {"pattern", repeated}}, GrammarLimits());
  EXPECT_TRUE(repeated_status.ok()) << repeated_status;
  ExpectRefusedNaming(RegexToGbnf(NestedPattern(5000)).status(), "grammar_max_regex_nesting = 32");
}

TEST(GrammarLimitsTest, PatternRepetitionIsAcceptedAtTheLimitAndRefusedPastIt) {
  GrammarLimits limits;
  limits.max_repeat = 20;
  for (const char* ok : {"^a{20}$", "^a{0,20}$", "^a{20,}$"}) {
    EXPECT_TRUE(CompileSchema(json{{"type", "string"}, {"pattern", ok}}, limits).ok()) << ok;
  }
  for (const char* bad : {"^a{21}$", "^a{0,21}$", "^a{21,}$", "^a{999999999999}$"}) {
    const absl::Status status = CompileSchema(json{{"type", "string"}, {"pattern", bad}}, limits);
    ExpectRefusedNaming(status, "grammar_max_repeat = 20");
    EXPECT_NE(status.message().find("#/pattern"), std::string::npos) << status;
  }
}

// The smallest values the server takes (--grammar_max_nesting 8,
// --grammar_max_repeat 16) still compile the JSON grammar every schema
// builds on, its formats included.
TEST(GrammarLimitsTest, TheServersSmallestLimitsStillCompileTheJsonGrammar) {
  GrammarLimits limits;
  limits.max_nesting = 8;
  limits.max_repeat = 16;
  limits.max_regex_nesting = 7;
  EXPECT_TRUE(ParseGbnf(JsonObjectGbnf(), limits).ok());
  const json schema = json::parse(R"({"type": "object", "properties": {
      "when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"},
      "day": {"type": "string", "format": "date"}, "n": {"type": "number"},
      "tags": {"type": "array", "items": {"type": "string", "pattern": "^((((((([a-z]+)))))))$"}}}})");
  const absl::Status status = CompileSchema(schema, limits);
  EXPECT_TRUE(status.ok()) << status;
}

// "x" then K optional z's: after the x, each copy of the optional is a parse
// of its own (which copy the next z is), and the y after them one more.
std::string AmbiguousGbnf(int copies) {
  return "root ::= \"x\" (\"z\"?){" + std::to_string(copies) + "} \"y\"";
}

TEST(GrammarLimitsTest, ParsesAreAcceptedAtTheLimitAndRefusedPastIt) {
  for (int copies : {3, 15, 100}) {
    absl::StatusOr<Grammar> grammar = ParseGbnf(AmbiguousGbnf(copies));
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    {
      GrammarMatcher unbounded(*grammar, 1 << 30);
      GrammarState state = unbounded.Start();
      ASSERT_TRUE(unbounded.AdvanceAll(state, "x"));
      EXPECT_EQ(state.size(),
                static_cast<size_t>(copies + 1));  // the count the server test relies on
    }
    GrammarMatcher at(*grammar, copies + 1);
    GrammarState state = at.Start();
    EXPECT_TRUE(at.AdvanceAll(state, "x" + Repeated("z", copies) + "y"));
    EXPECT_TRUE(GrammarMatcher::CanEnd(state));
    EXPECT_FALSE(at.overflowed());

    GrammarMatcher past(*grammar, copies);
    state = past.Start();
    EXPECT_FALSE(past.AdvanceAll(state, "x"));
    EXPECT_TRUE(past.overflowed());
    EXPECT_EQ(past.overflows(), 1);
  }
}

}  // namespace
}  // namespace linserve
