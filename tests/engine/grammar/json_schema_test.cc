#include "engine/grammar/json_schema.h"

#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

using json = nlohmann::ordered_json;

// Compiles `gbnf` and tells which texts it matches whole.
class Language {
 public:
  explicit Language(const std::string& gbnf) {
    absl::StatusOr<Grammar> grammar = ParseGbnf(gbnf);
    EXPECT_TRUE(grammar.ok()) << grammar.status() << "\n" << gbnf;
    if (grammar.ok()) matcher_ = std::make_unique<GrammarMatcher>(*grammar);
  }
  bool Matches(const std::string& text) {
    if (!matcher_) return false;
    GrammarState state = matcher_->Start();
    return matcher_->AdvanceAll(state, text) && GrammarMatcher::CanEnd(state);
  }

 private:
  std::unique_ptr<GrammarMatcher> matcher_;
};

Language OfSchema(const json& schema) {
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  return Language(gbnf.ok() ? *gbnf : "root ::= \"\"");
}

struct Case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

TEST(JsonSchemaTest, EachKeywordAcceptsWhatTheSchemaAllowsAndNothingElse) {
  const std::vector<Case> cases = {
      {R"({"type": "string"})", {R"("")", R"("a\"b\u00e9")", "\"日本\""}, {"a", R"("a)", "1"}},
      {R"({"type": "integer"})", {"0", "-12", "123456"}, {"01", "1.5", "-", "\"1\""}},
      {R"({"type": "number"})", {"0", "-1.5", "2e10", "3.25E-3"}, {".5", "1.", "+1"}},
      {R"({"type": "boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type": "null"})", {"null"}, {"nil"}},
      {R"({"type": ["integer", "null"]})", {"1", "null"}, {"\"1\""}},
      {R"({"enum": ["red", 1, null, {"a": [1]}]})", {R"("red")", "1", "null", R"({"a":[1]})"}, {R"("blue")", "2"}},
      {R"({"const": "only"})", {R"("only")"}, {R"("other")"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "required": ["b"], "additionalProperties": false})",
       {R"({"b": "x"})", R"({"a": 1, "b": "x"})", R"({ "a" : 1 ,"b":"x" })"},
       {R"({"a": 1})", R"({"b": "x", "a": 1})", R"({"b": "x", "c": 1})", R"({})"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
          "c": {"type": "integer"}}})",
       {"{}", R"({"b": 2})", R"({"a": 1, "c": 3})", R"({"a": 1, "b": 2, "c": 3})"},
       {R"({"a": 1,})", R"({, "b": 2})", R"({"c": 3, "a": 1})"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
          "additionalProperties": {"type": "boolean"}})",
       {R"({"a": 1})", R"({"a": 1, "x": true, "y": false})"}, {R"({"a": 1, "x": 2})", R"({"x": true})"}},
      {R"({"type": "object"})", {"{}", R"({"any": [1, {"b": null}]})"}, {"[]"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1, 2, 3]"}, {"[]", "[1, 2, 3, 4]", R"(["a"])", "[1,]"}},
      {R"({"type": "array", "items": {"type": "integer"}})", {"[]", "[1]", "[1,2,3,4,5]"}, {"[,]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false,
          "minItems": 1})",
       {R"(["a"])", R"(["a", 1])"}, {"[]", R"([1])", R"(["a", 1, 2])"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"},
          "minItems": 2})",
       {R"(["a", true])", R"(["a", true, false])"}, {R"(["a"])", R"(["a", 1])"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})",
       {"12", R"("ab")"}, {R"("abc")", "true"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("a\nb")", R"("abc")"},
       {R"("a")", R"("abcd")"}},
      {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"}, {R"("ab-123")", R"("AB-1234")"}},
      {R"({"type": "string", "pattern": "ab"})", {R"("ab")", R"("xaby")"}, {R"("a b")"}},
      {R"({"type": "string", "format": "date"})", {R"("2026-11-26")", R"("2026-12-31")", R"("0001-02-28")"},
       {R"("2026-13-01")", R"("26-11-26")", R"("2026-11-31")", R"("2026-02-30")", R"("0000-01-01")"}},
      {R"({"type": "string", "format": "date-time"})", {R"("2026-11-26T20:15:11Z")", R"("2026-11-26T20:15:11.5+01:00")"},
       {R"("2026-11-26 20:15:11Z")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["value", "next"]}},
          "$ref": "#/$defs/node"})",
       {R"({"value": 1, "next": {"value": 2, "next": null}})"}, {R"({"value": 1, "next": {"value": 2}})"}},
      {R"({"title": "t", "description": "d", "type": "boolean", "default": true})", {"true"}, {"1"}},
  };
  for (const Case& c : cases) {
    Language language = OfSchema(json::parse(c.schema));
    for (const char* text : c.valid) EXPECT_TRUE(language.Matches(text)) << c.schema << "\n  " << text;
    for (const char* text : c.invalid) EXPECT_FALSE(language.Matches(text)) << c.schema << "\n  " << text;
  }
}

// Every integer of a window, against the bounds, by brute force.
TEST(JsonSchemaTest, IntegerBoundsMatchExactlyTheIntegersBetweenThem) {
  struct Bounds {
    const char* schema;
    int64_t lo, hi;  // inclusive, within the window
  };
  const Bounds bounds[] = {
      {R"({"type": "integer", "minimum": -123, "maximum": 4567})", -123, 4567},
      {R"({"type": "integer", "minimum": 7})", 7, 20000},
      {R"({"type": "integer", "maximum": -15})", -20000, -15},
      {R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})", 1, 99},
      {R"({"type": "integer", "minimum": 1000, "maximum": 1999})", 1000, 1999},
      {R"({"type": "integer", "minimum": 0, "maximum": 0})", 0, 0},
  };
  for (const Bounds& b : bounds) {
    Language language = OfSchema(json::parse(b.schema));
    for (int64_t n = -20000; n <= 20000; ++n) {
      ASSERT_EQ(language.Matches(std::to_string(n)), n >= b.lo && n <= b.hi) << b.schema << " " << n;
    }
    EXPECT_FALSE(language.Matches("007"));
  }
}

TEST(JsonSchemaTest, AnythingItCannotHonourIsRefusedNamingTheKeywordAndWhere) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}}})",
       "json_schema #/properties/a: the keyword 'contentEncoding' is not supported"},
      {R"({"type": "number", "minimum": 0.5})", "'minimum' on a number is not supported"},
      {R"({"not": {"type": "string"}})", "the keyword 'not' is not supported"},
      {R"({"type": "string", "format": "email"})", "the format '\"email\"' is not supported"},
      {R"({"type": "string", "pattern": "(?=a)b"})", "lookaround"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "the escape \\1"},
      {R"({"$ref": "#/$defs/missing"})", "'#/$defs/missing' names no schema"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "exactly one schema"},
      {R"({"type": "date"})", "'date' is not a JSON type"},
      {R"({"type": "integer", "minimum": 5, "maximum": 1})", "no integer lies between its bounds"},
      // Found by fuzz_grammar: each compiled to GBNF the parser then refused.
      {R"({"type": "string", "pattern": "a{8,4}"})", "a malformed {m,n}"},
      {R"({"type": "string", "pattern": "(a|)*b"})", "a repetition of a group that can match nothing"},
      {R"({"type": "string", "pattern": "(a?)+"})", "a repetition of a group that can match nothing"},
  };
  for (const auto& [schema, message] : cases) {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(json::parse(schema));
    ASSERT_FALSE(gbnf.ok()) << schema;
    EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(gbnf.status().message().find(message), std::string::npos)
        << schema << " -> " << gbnf.status().message();
  }
}

TEST(JsonSchemaTest, APatternThatIsNotUtf8IsRefused) {
  absl::StatusOr<std::string> gbnf = RegexToGbnf("a\xff\xff" "b");
  ASSERT_FALSE(gbnf.ok());
  EXPECT_NE(gbnf.status().message().find("not valid UTF-8"), std::string::npos) << gbnf.status();
  // A group that can match nothing may still be optional.
  Language optional = OfSchema(json::parse(R"({"type": "string", "pattern": "^x(a|)?y$"})"));
  EXPECT_TRUE(optional.Matches(R"("xy")"));
  EXPECT_TRUE(optional.Matches(R"("xay")"));
  EXPECT_FALSE(optional.Matches(R"("xaay")"));
}

TEST(JsonSchemaTest, JsonObjectMatchesAnyObject) {
  Language language(JsonObjectGbnf());
  EXPECT_TRUE(language.Matches(R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_FALSE(language.Matches("[1]"));
  EXPECT_FALSE(language.Matches(R"({"a": })"));
}

}  // namespace
}  // namespace linserve
