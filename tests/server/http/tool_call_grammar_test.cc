// tool_choice "required" and a named function in the model's own format:
// the grammar takes calls as the model writes them (and as the parser reads
// them back), and nothing that does not fit the schema.

#include "server/http/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"

namespace linserve {
namespace {

using Json = RequestJson;

const Json kWeather = Json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}, "unit": {"enum": ["C", "F"]},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}},
              "required": ["lat"]}}, "required": ["city", "days"]}}})");
const Json kTime = Json::parse(R"({"type": "function", "function": {"name": "get_time"}})");

OpenAiTools Read(ToolCallFormat format, const Json& choice, bool parallel = false) {
  const Json tools = Json::array({kWeather, kTime});
  const Json parallel_json = parallel;
  absl::StatusOr<OpenAiTools> read = ReadTools(&tools, &choice, &parallel_json, format);
  EXPECT_TRUE(read.ok()) << read.status();
  return read.ok() ? *read : OpenAiTools{};
}

bool Allows(const OpenAiTools& tools, const std::string& text, const std::string& lead = "") {
  absl::StatusOr<std::string> gbnf = ModelToolGrammar(tools, tools.format, {}, lead);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  if (!gbnf.ok()) return false;
  absl::StatusOr<Grammar> grammar = ParseGbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(*grammar);
  GrammarState state = matcher.Start();
  return matcher.AdvanceAll(state, text) && GrammarMatcher::CanEnd(state);
}

const char kXmlCall[] =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=unit>\nC\n</parameter>\n"
    "<parameter=where>\n{\"lat\": 59.9}\n</parameter>\n</function>\n</tool_call>";

TEST(ToolCallGrammarTest, XmlCallsFitTheSchemaAndParseBack) {
  const OpenAiTools required = Read(ToolCallFormat::kQwen3Coder, "required");
  EXPECT_TRUE(Allows(required, kXmlCall));
  EXPECT_TRUE(Allows(required, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>"));
  // Optional parameters may go; required ones may not.
  EXPECT_TRUE(Allows(required,
                     "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Allows(required,
                      "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                      "</function>\n</tool_call>"));
  // Out of range, too long, not in the enum, or not JSON where JSON is due.
  for (const char* bad : {"<parameter=days>\n9\n", "<parameter=days>\nthree\n"}) {
    std::string text = kXmlCall;
    text.replace(text.find("<parameter=days>\n3\n"), 19, bad);
    EXPECT_FALSE(Allows(required, text)) << text;
  }
  std::string long_city = kXmlCall;
  long_city.replace(long_city.find("Oslo"), 4, "Oslo-Oslo");
  EXPECT_FALSE(Allows(required, long_city));
  std::string unit = kXmlCall;
  unit.replace(unit.find("\nC\n"), 3, "\nK\n");
  EXPECT_FALSE(Allows(required, unit));
  EXPECT_FALSE(Allows(required, "It is sunny."));
  // One call unless parallel; the lead closes an opened reasoning.
  const std::string two = std::string(kXmlCall) + "\n" + kXmlCall;
  EXPECT_FALSE(Allows(required, two));
  EXPECT_TRUE(Allows(Read(ToolCallFormat::kQwen3Coder, "required", true), two));
  EXPECT_TRUE(Allows(required, std::string("</think>\n\n") + kXmlCall, "</think>\n\n"));
  // What the grammar takes, the parser reads whole, typed by the schema.
  const ParsedToolCalls parsed =
      ParseToolCalls(ToolCallFormat::kQwen3Coder, required.functions, two, required.max_calls);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments,
            R"({"city":"Oslo","days":3,"unit":"C","where":{"lat":59.9}})");
  EXPECT_EQ(parsed.unconverted, 0);
  // A named function: only that one.
  const OpenAiTools named = Read(ToolCallFormat::kQwen3Coder,
                                 Json{{"type", "function"}, {"function", {{"name", "get_time"}}}});
  EXPECT_FALSE(Allows(named, kXmlCall));
  EXPECT_TRUE(Allows(named, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>"));
}

TEST(ToolCallGrammarTest, HermesCallsFitTheSchema) {
  const OpenAiTools required = Read(ToolCallFormat::kHermes, "required");
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": "
      "3}}\n</tool_call>";
  EXPECT_TRUE(Allows(required, call));
  EXPECT_FALSE(Allows(required,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Oslo\"}}\n</tool_call>"));
  const ParsedToolCalls parsed =
      ParseToolCalls(ToolCallFormat::kHermes, required.functions, call, required.max_calls);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Oslo","days":3})");
}

TEST(ToolCallGrammarTest, ParallelToolCallsFollowTheFormat) {
  const Json tools = Json::array({kTime});
  const Json yes = true;
  // linserve's format makes one call a turn: true is refused there.
  EXPECT_FALSE(ReadTools(&tools, nullptr, &yes, ToolCallFormat::kLinserve).ok());
  absl::StatusOr<OpenAiTools> xml =
      ReadTools(&tools, nullptr, nullptr, ToolCallFormat::kQwen3Coder);
  ASSERT_TRUE(xml.ok());
  EXPECT_GT(xml->max_calls, 1);  // OpenAI's default: several
}

}  // namespace
}  // namespace linserve
