#include "server/http/openai_tools.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "server/http/chat_template.h"
#include "server/http/openai_request.h"

namespace linserve {
namespace {

using Json = RequestJson;

const Json kWeather = Json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                   "unit": {"enum": ["C", "F"]}}, "required": ["city"]}}})");
const Json kTime = Json::parse(R"({"type": "function", "function": {"name": "get_time"}})");

OpenAiTools Read(const Json& tools, const Json& choice = nullptr) {
  absl::StatusOr<OpenAiTools> read =
      ReadTools(&tools, choice.is_null() ? nullptr : &choice, nullptr);
  EXPECT_TRUE(read.ok()) << read.status();
  return read.ok() ? *read : OpenAiTools{};
}

// Whether the tools' grammar for the template takes `text` as a whole turn.
bool Allows(const OpenAiTools& tools, const ChatTemplate& chat, const std::string& text) {
  absl::StatusOr<std::string> gbnf = ToolGrammar(tools, chat);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  absl::StatusOr<Grammar> grammar = ParseGbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(*grammar);
  GrammarState state = matcher.Start();
  return matcher.AdvanceAll(state, text) && GrammarMatcher::CanEnd(state);
}

TEST(OpenAiToolsTest, RequiredAndNamedChoicesForceACallThatFitsTheParameters) {
  const ChatTemplate world = ChatTemplate::RwkvWorld();
  const OpenAiTools required = Read(Json::array({kWeather, kTime}), "required");
  EXPECT_EQ(required.choice, OpenAiTools::Choice::kRequired);
  EXPECT_TRUE(Allows(required, world,
                     R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)"));
  EXPECT_TRUE(Allows(required, world, R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)"));
  EXPECT_FALSE(Allows(required, world, R"(<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>)"));
  EXPECT_FALSE(Allows(required, world,
                      R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "K"}}</tool_call>)"));
  EXPECT_FALSE(Allows(required, world, "It is sunny."));
  const OpenAiTools named = Read(Json::array({kWeather, kTime}),
                                 Json{{"type", "function"}, {"function", {{"name", "get_time"}}}});
  EXPECT_EQ(named.choice, OpenAiTools::Choice::kNamed);
  EXPECT_FALSE(Allows(named, world,
                      R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)"));
  EXPECT_TRUE(Allows(named, world, R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)"));
  // A template without tools: the call is the bare JSON.
  EXPECT_TRUE(Allows(named, ChatTemplate::Plain(), R"({"name": "get_time", "arguments": {}})"));
}

// "auto": a whole call, or text that does not start one.
TEST(OpenAiToolsTest, AutoAllowsACallOrTextThatDoesNotStartOne) {
  const ChatTemplate world = ChatTemplate::RwkvWorld();
  const OpenAiTools tools = Read(Json::array({kWeather}));
  EXPECT_EQ(tools.choice, OpenAiTools::Choice::kAuto);
  EXPECT_TRUE(Allows(tools, world, "It is sunny in Paris."));
  EXPECT_TRUE(Allows(tools, world, "<tool"));  // text that stops short of a call
  EXPECT_TRUE(Allows(tools, world, "<b>bold</b>"));
  EXPECT_TRUE(Allows(tools, world,
                     R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)"));
  EXPECT_FALSE(Allows(tools, world, "<tool_call>I will check."));
  absl::StatusOr<std::string> plain = ToolGrammar(tools, ChatTemplate::Plain());
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("needs a chat template that declares how a call starts"),
            std::string::npos);
}

TEST(OpenAiToolsTest, ACallRoundTripsThroughTextAndTheTemplate) {
  const ChatTemplate world = ChatTemplate::RwkvWorld();
  const std::string text = ToolCallText(world, "get_weather", R"({"city": "Oslo"})");
  EXPECT_EQ(text, R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)");
  std::optional<ParsedToolCall> call = ParseToolCall(world, text);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "get_weather");
  EXPECT_EQ(call->arguments, R"({"city":"Oslo"})");
  EXPECT_FALSE(ParseToolCall(world, "It is sunny.").has_value());
  EXPECT_FALSE(ParseToolCall(world, R"(<tool_call>{"name": "get_weather", "argum)").has_value());
  EXPECT_TRUE(ParseToolCall(ChatTemplate::Plain(), R"({"name": "f", "arguments": {}})").has_value());
  EXPECT_FALSE(NewToolCallId() == NewToolCallId());
  EXPECT_EQ(NewToolCallId().rfind("call_", 0), 0u);
}

// A chat with tools, an assistant's call and its result renders as the
// template says, the tools' list first.
TEST(OpenAiToolsTest, MessagesWithCallsAndResultsRenderThroughTheTemplate) {
  const Json body = Json::parse(R"({"messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})");
  absl::StatusOr<OpenAiRequest> request =
      ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body, ChatTemplate::RwkvWorld(), "");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->generate.prompt(),
            "System: You can call these functions, each given with a JSON schema of its arguments:\n"
            R"({"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}})"
            "\nTo call one, answer with <tool_call>{\"name\": the function's name, \"arguments\": its "
            "arguments}</tool_call> and nothing else.\n\n"
            "User: Weather in Oslo?\n\n"
            R"(Assistant:<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)"
            "\n\nTool: -3 C\n\nAssistant:");
  EXPECT_FALSE(request->generate.grammar().empty());
  EXPECT_EQ(request->tools.choice, OpenAiTools::Choice::kAuto);
}

TEST(OpenAiToolsTest, BadToolsAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"tools": [{"type": "function"}]})", "tools[0] must be {\"type\": \"function\""},
      {R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})",
       "tools[0].function.name must be 1 to 64"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}},
                     {"type": "function", "function": {"name": "f"}}]})",
       "tools[1].function.name \"f\" is given twice"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
       "tools[0].function.parameters must be a JSON schema object"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"})",
       "tool_choice = \"always\" is not none, auto, required or a function"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       "tool_choice names \"g\", which is not in tools"},
      {R"({"tool_choice": "required"})", "tool_choice is set but tools is empty"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": true})",
       "parallel_tool_calls = true is not supported"},
      {R"({"tools": [{"type": "function", "function": {"name": "f",
           "parameters": {"type": "object", "properties": {"x": {"not": {}}}}}}]})",
       "tools: json_schema #/anyOf/0/properties/arguments/properties/x: the keyword 'not'"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}],
           "response_format": {"type": "json_object"}})",
       "tools and a response_format or structured_outputs constraint are both set"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
           "arguments": "{oops"}}]}]})",
       "messages[0].tool_calls[0].function.arguments is not JSON text"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id must be a string"},
  };
  for (const auto& [text, message] : cases) {
    Json body = Json::parse(text);
    if (!body.contains("messages")) body["messages"] = Json::array({{{"role", "user"}, {"content", "x"}}});
    absl::StatusOr<OpenAiRequest> request =
        ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body, ChatTemplate::RwkvWorld(), "");
    ASSERT_FALSE(request.ok()) << text;
    EXPECT_NE(request.status().message().find(message), std::string::npos)
        << text << " -> " << request.status().message();
  }
  // Tools on a template without them: a tool message cannot render.
  absl::StatusOr<OpenAiRequest> plain = ParseOpenAiRequest(
      OpenAiEndpoint::kChatCompletions,
      Json::parse(R"({"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]})"),
      ChatTemplate::Plain(), "");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("declares no tools"), std::string::npos);
}

}  // namespace
}  // namespace linserve
