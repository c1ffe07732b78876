// Tool calls in the model's own format: each format's whole answers, then
// every way of cutting each answer in two (and into single bytes) gives the
// same content, the same calls and the same counts.

#include "server/http/tool_call_parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/http/openai_response.h"

namespace linserve {
namespace {

using Json = nlohmann::ordered_json;

std::vector<Json> Functions() {
  return {Json::parse(R"({"name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}, "temp": {"type": "number"},
            "metric": {"type": "boolean"}, "none": {"type": "null"},
            "where": {"type": "object"}, "tags": {"type": "array"},
            "either": {"type": ["string", "integer"]}, "free": {}}}})"),
          Json::parse(R"({"name": "noop"})")};
}

struct Call {
  std::string name;
  std::string arguments;
};

struct Case {
  ToolCallFormat format;
  std::string text;
  std::string content;
  std::vector<Call> calls;
  int64_t malformed = 0;
  int64_t unconverted = 0;
};

const std::vector<Case>& Cases() {
  using F = ToolCallFormat;
  static const std::vector<Case> cases = {
      // Qwen3.5's XML, with text before the call.
      {F::kQwen3Coder,
       "Let me look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
       "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       "Let me look.",
       {{"get_weather", R"({"city":"Paris","days":3})"}}},
      // Every JSON type; a value keeps its inner newlines and spaces.
      {F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\n New\nYork \n</parameter>\n"
       "<parameter=temp>\n-2.5e1\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n"
       "<parameter=none>\nnull\n</parameter>\n<parameter=where>\n{\"lat\": 1, \"lon\": [2]}\n"
       "</parameter>\n<parameter=tags>\n[\"a\", 1]\n</parameter>\n<parameter=either>\n7\n"
       "</parameter>\n<parameter=free>\n{\"x\"\n</parameter>\n<parameter=unknown>\n1\n"
       "</parameter>\n</function>\n</tool_call>\n",
       "",
       {{"get_weather",
         R"({"city":" New\nYork ","temp":-25.0,"metric":true,"none":null,)"
         R"("where":{"lat":1,"lon":[2]},"tags":["a",1],"either":7,"free":"{\"x\"","unknown":"1"})"}}},
      // Values that do not convert stay strings and are counted.
      {F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n"
       "<parameter=metric>\nyes\n</parameter>\n<parameter=tags>\n{}\n</parameter>\n"
       "</function>\n</tool_call>",
       "",
       {{"get_weather", R"({"days":"three","metric":"yes","tags":"{}"})"}},
       0,
       3},
      // Several calls; one without parameters.
      {F::kQwen3Coder,
       "<tool_call>\n<function=noop>\n</function>\n</tool_call>\n<tool_call>\n"
       "<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n"
       "</tool_call>",
       "",
       {{"noop", "{}"}, {"get_weather", R"({"city":"Rome"})"}}},
      // A call that is not one: left as content and counted.
      {F::kQwen3Coder, "a <tool_call> b", "a <tool_call> b", {}, 1},
      {F::kQwen3Coder,
       "<tool_call>\n<function=bad name>\n</function></tool_call>",
       "<tool_call>\n<function=bad name>\n</function></tool_call>",
       {},
       1},
      {F::kQwen3Coder, "text <tool_call>\n<funct", "text <tool_call>\n<funct", {}, 1},
      // Text after a call is content; a call cut by the turn's end keeps
      // what it has.
      {F::kQwen3Coder,
       "<tool_call>\n<function=noop>\n</function>\n</tool_call>\nDone.",
       "Done.",
       {{"noop", "{}"}}},
      {F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
       "<parameter=days>\n2",
       "",
       {{"get_weather", R"({"city":"Oslo"})"}}},
      // Garbage inside a call ends it; the rest is content.
      {F::kQwen3Coder,
       "<tool_call>\n<function=noop>\nhello\n</function>\n</tool_call>",
       "hello\n</function>\n</tool_call>",
       {{"noop", "{}"}},
       1},
      {F::kQwen3Coder, "No call here, just <b>text</b>.", "No call here, just <b>text</b>.", {}},
      // Hermes JSON.
      {F::kHermes,
       "I will call it.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"noop\", "
       "\"arguments\": {}}\n</tool_call>",
       "I will call it.",
       {{"get_weather", R"({"city":"Paris","days":3})"}, {"noop", "{}"}}},
      {F::kHermes,
       "<tool_call>\n{\"name\": \"noop\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",
       "",
       {{"noop", R"({"a":1})"}}},
      {F::kHermes,
       "<tool_call>\n{\"nam\": \"noop\"}\n</tool_call> after",
       "<tool_call>\n{\"nam\": \"noop\"}\n</tool_call> after",
       {},
       1},
      // Arguments whose strings hold the scan's delimiters, nested values.
      {F::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a, b}\", "
       "\"where\": {\"lat\": 1, \"lon\": [2, 3]}, \"tags\": [\"x\\\"y\", \"}\"]}}\n</tool_call>",
       "",
       {{"get_weather", R"({"city":"a, b}","where":{"lat":1,"lon":[2,3]},"tags":["x\"y","}"]})"}}},
      // Another shape (the arguments first) is read whole.
      {F::kHermes,
       "<tool_call>\n{\"arguments\": {\"a\": 1}, \"name\": \"noop\"}\n</tool_call>",
       "",
       {{"noop", R"({"a":1})"}}},
      // An argument that is not JSON ends the call; the rest is content.
      {F::kHermes,
       "<tool_call>\n{\"name\": \"noop\", \"arguments\": {\"a\": 1, \"b\": oops}}\n</tool_call>",
       " \"b\": oops}}\n</tool_call>",
       {{"noop", R"({"a":1})"}},
       1},
      // Cut inside the arguments: the call keeps those it has.
      {F::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2",
       "",
       {{"get_weather", R"({"city":"Oslo"})"}}},
      {F::kHermes,
       "<tool_call>\n{\"name\": \"noop\", \"argu",
       "<tool_call>\n{\"name\": \"noop\", \"argu",
       {},
       1},
  };
  return cases;
}

struct Result {
  std::string content;
  std::vector<ParsedToolCalls::Call> calls;
  int64_t malformed;
  int64_t unconverted;
};

Result Parse(const Case& c, const std::vector<std::string>& pieces, int32_t max_calls = 1 << 30) {
  ToolCallParser parser(c.format, Functions(), max_calls);
  Result out;
  auto take = [&](const ToolCallParser::Step& step) {
    out.content += step.content;
    for (const ToolCallDelta& delta : step.calls) {
      // A call's first delta names it and has no arguments yet.
      if (!delta.name.empty()) {
        EXPECT_EQ(delta.arguments, "");
        EXPECT_EQ(static_cast<size_t>(delta.index), out.calls.size());
      } else {
        EXPECT_LT(static_cast<size_t>(delta.index), out.calls.size());
      }
      AppendToolCallDeltas({delta}, out.calls);
    }
  };
  for (const std::string& piece : pieces) take(parser.Push(piece));
  take(parser.Flush());
  out.malformed = parser.malformed();
  out.unconverted = parser.unconverted();
  return out;
}

void ExpectCase(const Case& c, const Result& got, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(got.content, c.content);
  ASSERT_EQ(got.calls.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, c.calls[i].name);
    EXPECT_EQ(got.calls[i].arguments, c.calls[i].arguments);
    EXPECT_FALSE(Json::parse(got.calls[i].arguments, nullptr, false).is_discarded());
  }
  EXPECT_EQ(got.malformed, c.malformed);
  EXPECT_EQ(got.unconverted, c.unconverted);
}

TEST(ToolCallParserTest, WholeAnswers) {
  for (const Case& c : Cases()) ExpectCase(c, Parse(c, {c.text}), c.text);
}

TEST(ToolCallParserTest, EveryTwoPieceSplitGivesTheWhole) {
  for (const Case& c : Cases()) {
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ExpectCase(c, Parse(c, {c.text.substr(0, cut), c.text.substr(cut)}),
                 c.text + " cut at " + std::to_string(cut));
    }
  }
}

TEST(ToolCallParserTest, SingleBytesGiveTheWhole) {
  for (const Case& c : Cases()) {
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.emplace_back(1, ch);
    ExpectCase(c, Parse(c, bytes), c.text + " byte by byte");
  }
}

// A hermes call streams as it arrives: its name once the arguments' brace
// is read, each argument once its value is whole, before the closing tag.
TEST(ToolCallParserTest, HermesArgumentsStreamAsTheyArrive) {
  ToolCallParser parser(ToolCallFormat::kHermes, Functions());
  ToolCallParser::Step step = parser.Push("<tool_call>\n{\"name\": \"get_weather\", ");
  EXPECT_TRUE(step.calls.empty());
  step = parser.Push("\"arguments\": {\"city\": \"Par");
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_EQ(step.calls[0].name, "get_weather");
  step = parser.Push("is\", \"days\": 3");
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_EQ(step.calls[0].arguments, R"({"city":"Paris")");
  step = parser.Push("}}\n</tool_");
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_EQ(step.calls[0].arguments, R"(,"days":3})");
  step = parser.Push("call>");
  EXPECT_TRUE(step.calls.empty());
  EXPECT_EQ(step.content, "");
  EXPECT_EQ(parser.malformed(), 0);
}

TEST(ToolCallParserTest, WholeHelperMatches) {
  for (const Case& c : Cases()) {
    const ParsedToolCalls got = ParseToolCalls(c.format, Functions(), c.text);
    ExpectCase(c, {got.content, got.calls, got.malformed, got.unconverted}, c.text);
  }
}

TEST(ToolCallParserTest, MaxCallsKeepsTheFirst) {
  const Case& c = Cases()[3];
  const Result got = Parse(c, {c.text}, 1);
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0].name, "noop");
  EXPECT_EQ(got.content, "");
}

TEST(ToolCallParserTest, FormatNamesAndDetection) {
  for (ToolCallFormat f :
       {ToolCallFormat::kLinserve, ToolCallFormat::kHermes, ToolCallFormat::kQwen3Coder}) {
    EXPECT_EQ(*ParseToolCallFormat(ToolCallFormatName(f)), f);
  }
  EXPECT_FALSE(ParseToolCallFormat("pythonic").ok());
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n<function=example>"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n{\"name\": "), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{ messages }}"), ToolCallFormat::kLinserve);
}

// The HTTP answer: reasoning split first, then the answer read for calls;
// streamed at every two-piece split, the chunks carry what the whole answer
// does (the call's deltas add up to its arguments).
TEST(ToolCallAnswerTest, StreamedEqualsWholeAfterTheReasoningAtEverySplit) {
  const std::string text =
      "<think>\nI should look.\n</think>\n\nChecking.\n\n<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=noop>\n</function>\n</tool_call>";
  TurnSummary summary;
  summary.reason = FinishReason::kStop;
  auto responder = [] {
    auto r = std::make_unique<OpenAiResponder>(OpenAiEndpoint::kChatCompletions, "m", false, "");
    r->SetReasoning(ReasoningFormat::kQwen3, false);
    r->SetToolCalls(ToolCallFormat::kQwen3Coder, Functions(), 1 << 30);
    return r;
  };
  const nlohmann::json whole = responder()->Whole({TurnPiece{text, {}}}, summary);
  const nlohmann::json& choice = whole["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["reasoning_content"], "I should look.");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u) << whole.dump();
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"],
            R"({"city":"Paris","days":3})");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["name"], "noop");
  EXPECT_NE(choice["message"]["tool_calls"][0]["id"], choice["message"]["tool_calls"][1]["id"]);

  for (size_t cut = 0; cut <= text.size(); ++cut) {
    SCOPED_TRACE(cut);
    auto streamed = responder();
    std::string reasoning, content, finish;
    std::vector<ParsedToolCalls::Call> calls;
    std::vector<std::string> ids;
    auto take = [&](const nlohmann::json& chunk) {
      const nlohmann::json& c = chunk["choices"][0];
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      const nlohmann::json& delta = c["delta"];
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
      if (delta.contains("content")) content += delta["content"];
      if (!delta.contains("tool_calls")) return;
      for (const nlohmann::json& call : delta["tool_calls"]) {
        const size_t index = call["index"];
        if (call.contains("id")) {
          ASSERT_EQ(index, calls.size());
          calls.push_back({call["function"]["name"], ""});
          ids.push_back(call["id"]);
        } else {
          ASSERT_LT(index, calls.size());
          calls[index].arguments += call["function"]["arguments"].get<std::string>();
        }
      }
    };
    take(streamed->Chunk({text.substr(0, cut), {}}));
    take(streamed->Chunk({text.substr(cut), {}}));
    take(streamed->Closing(summary));
    EXPECT_EQ(reasoning, "I should look.");
    EXPECT_EQ(content, "Checking.");
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(calls.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(calls[i].name, choice["message"]["tool_calls"][i]["function"]["name"]);
      EXPECT_EQ(calls[i].arguments, choice["message"]["tool_calls"][i]["function"]["arguments"]);
    }
    EXPECT_NE(ids[0], ids[1]);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace linserve
