// The HTTP API's pieces without a server: request parsing, chat templates,
// answers and errors in OpenAI's shapes.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/http/chat_template.h"
#include "server/http/chat_turn_ends.h"
#include "server/http/http_errors.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"

namespace linserve {
namespace {

using Json = RequestJson;

absl::StatusOr<OpenAiRequest> Completion(const Json& body, const std::string& header = "") {
  return ParseOpenAiRequest(OpenAiEndpoint::kCompletions, body, ChatTemplate::Plain(), header);
}

absl::StatusOr<OpenAiRequest> Chat(const Json& body) {
  return ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body, ChatTemplate::RwkvWorld(), "");
}

TEST(OpenAiRequestTest, CompletionFieldsBecomeTheGenerateRequest) {
  auto r = Completion({{"model", "m"},
                       {"prompt", "hi"},
                       {"max_tokens", 7},
                       {"temperature", 0.5},
                       {"top_p", 0.9},
                       {"top_k", -1},
                       {"min_p", 0.1},
                       {"seed", 42},
                       {"stop", "\n"},
                       {"presence_penalty", 0.5},
                       {"frequency_penalty", 0.25},
                       {"repetition_penalty", 1.1},
                       {"logprobs", 3},
                       {"ignore_eos", true},
                       {"skip_special_tokens", false},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}},
                       {"user", "u"},
                       {"cache_salt", "s"},
                       {"some_extra", 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::GenerateRequest& g = r->generate;
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(g.prompt(), "hi");
  EXPECT_EQ(g.max_new_tokens(), 7);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 0);  // -1 is "off"
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.1f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), 0.25f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  ASSERT_EQ(g.stop_size(), 1);
  EXPECT_EQ(g.stop(0), "\n");
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 3);
  EXPECT_TRUE(g.ignore_eos());
  EXPECT_TRUE(g.has_skip_special_tokens());
  EXPECT_FALSE(g.skip_special_tokens());
  EXPECT_EQ(g.cache_salt(), "s");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->ignored_fields, std::vector<std::string>{"some_extra"});
  EXPECT_TRUE(r->template_stop.empty());
}

// OpenAI's clients send "seed": 0 as a seed: it must be one, not "none".
TEST(OpenAiRequestTest, SeedZeroIsASeedAndNoSeedIsNone) {
  auto zero = Completion({{"prompt", "hi"}, {"seed", 0}});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(zero->generate.sampling().has_seed());
  EXPECT_EQ(zero->generate.sampling().seed(), 0u);
  auto none = Completion({{"prompt", "hi"}});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->generate.sampling().has_seed());
}

// A body of many unknown fields, or long names, leaves a bounded trace: the
// count, and the first few names cut short.
TEST(OpenAiRequestTest, IgnoredFieldsAreCountedAndFewAreListed) {
  Json body = {{"prompt", "hi"}};
  for (int i = 0; i < 10000; ++i) body[absl::StrCat("extra_", i, std::string(200, 'x'))] = i;
  auto r = Completion(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ignored_field_count, 10000u);
  ASSERT_EQ(r->ignored_fields.size(), OpenAiRequest::kListedIgnoredFields);
  for (const std::string& name : r->ignored_fields) {
    EXPECT_EQ(name.size(), OpenAiRequest::kListedIgnoredFieldBytes);
  }
}

// Found by fuzz_openai_request: a "type" of the wrong type threw.
TEST(OpenAiRequestTest, ResponseFormatOfAnyShapeIsRefusedNotThrown) {
  for (const Json& format : {Json{{"type", Json::array()}}, Json{{"type", 1}}, Json::array(),
                             Json("text"), Json{{"other", "text"}}}) {
    auto r = Completion({{"prompt", "hi"}, {"response_format", format}});
    ASSERT_FALSE(r.ok()) << format.dump();
    EXPECT_NE(r.status().message().find("response_format"), std::string::npos);
  }
  EXPECT_TRUE(Completion({{"prompt", "hi"}, {"response_format", {{"type", "text"}}}}).ok());
  // The same pattern in a chat message's content parts.
  Json part = {{"type", Json::array({1})}, {"text", "x"}};
  Json message = {{"role", "user"}, {"content", Json::array({part})}};
  EXPECT_FALSE(Chat({{"messages", Json::array({message})}}).ok());
}

TEST(OpenAiRequestTest, PromptShapes) {
  auto ids = Completion({{"prompt", {1, 2, 3}}});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->generate.prompt_tokens_size(), 3);
  EXPECT_TRUE(ids->generate.prompt().empty());
  auto one = Completion({{"prompt", {"text"}}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->generate.prompt(), "text");
  EXPECT_NE(Completion({{"prompt", {"a", "b"}}}).status().message().find("batch"),
            std::string::npos);
  EXPECT_FALSE(Completion({{"prompt", 5}}).ok());
  auto nulls = Completion({{"prompt", "x"}, {"temperature", nullptr}, {"stop", nullptr}});
  ASSERT_TRUE(nulls.ok());  // OpenAI clients send nulls for unset fields
  EXPECT_FALSE(nulls->generate.sampling().has_temperature());
}

TEST(OpenAiRequestTest, UnsupportedFieldsAreRefusedByName) {
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, Json>>{{"n", 0},
                                                 {"best_of", 0},
                                                 {"echo", true},
                                                 {"suffix", "x"},
                                                 {"tools", {{{"a", 1}}}},
                                                 {"tool_choice", "auto"}}) {
    Json body = {{"prompt", "x"}, {field, value}};
    absl::Status status = Completion(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(ToOpenAiField(OpenAiEndpoint::kCompletions, std::string(status.message())).param,
              field)
        << status;
  }
  // Their neutral values pass.
  EXPECT_TRUE(Completion({{"prompt", "x"},
                          {"n", 1},
                          {"best_of", 1},
                          {"echo", false},
                          {"tools", Json::array()},
                          {"logit_bias", Json::object()},
                          {"response_format", {{"type", "text"}}}})
                  .ok());
}

// n and best_of: read as sent (their bounds are the server's); the
// combinations no server could serve are refused by name.
TEST(OpenAiRequestTest, ChoicesAreReadAndImpossibleCombinationsRefusedByName) {
  auto four = Completion({{"prompt", "x"}, {"n", 4}});
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->n, 4);
  EXPECT_EQ(four->best_of, 4);  // best_of defaults to n
  auto best = Completion({{"prompt", "x"}, {"n", 2}, {"best_of", 5}});
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->n, 2);
  EXPECT_EQ(best->best_of, 5);
  auto chat = Chat({{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"n", 3}});
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->n, 3);
  const std::string session(32, 'a');
  auto chosen = Completion(
      {{"prompt", "x"}, {"n", 3}, {"session_id", session}, {"session_choice", 2}});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->session_choice, 2);
  auto chosen_new =
      Completion({{"prompt", "x"}, {"n", 2}, {"session", "new"}, {"session_choice", 1}});
  ASSERT_TRUE(chosen_new.ok()) << chosen_new.status();
  EXPECT_EQ(chosen_new->session_choice, 1);

  struct Refused {
    Json body;
    bool chat;
    std::string param;
    std::string message;  // a part of it
  };
  const Json user = {{{"role", "user"}, {"content", "a"}}};
  const std::vector<Refused> cases = {
      {{{"prompt", "x"}, {"n", 4}, {"best_of", 2}}, false, "best_of", "is less than n = 4"},
      {{{"prompt", "x"}, {"best_of", 2}, {"stream", true}}, false, "best_of", "cannot be streamed"},
      {{{"messages", user}, {"best_of", 2}}, true, "best_of", "/v1/completions"},
      {{{"messages", user}, {"n", 2}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       true, "n", "with tools"},
      {{{"prompt", "x"}, {"n", 2}, {"session_id", session}}, false, "n", "session_choice"},
      {{{"prompt", "x"}, {"n", 2}, {"session", "new"}}, false, "n", "session_choice"},
      {{{"prompt", "x"}, {"n", 2}, {"session_choice", 1}}, false, "session_choice",
       "continues a session"},
      {{{"prompt", "x"}, {"n", 2}, {"session_id", session}, {"session_choice", 2}}, false,
       "session_choice", "is not a choice of n = 2"},
      {{{"prompt", "x"}, {"n", 1}, {"best_of", 3}, {"session_id", session}}, false, "best_of",
       "with a session"},
  };
  for (const Refused& c : cases) {
    absl::Status status = (c.chat ? Chat(c.body) : Completion(c.body)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.body;
    const OpenAiField field = ToOpenAiField(
        c.chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
        std::string(status.message()));
    EXPECT_EQ(field.param, c.param) << status;
    EXPECT_NE(field.message.find(c.message), std::string::npos) << status;
  }
}

// response_format and structured_outputs become the request's constraint;
// the schema keeps the order its keys were sent in.
TEST(OpenAiRequestTest, ConstraintsBecomeTheGenerateRequestsConstraint) {
  auto object = Completion({{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->generate.json_schema(), R"({"type": "object"})");
  auto schema = Chat(Json::parse(R"({"messages": [{"role": "user", "content": "a"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
      "schema": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}})"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->generate.json_schema(),
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  auto grammar = Completion({{"prompt", "x"}, {"structured_outputs", {{"grammar", "root ::= \"a\""}}}});
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_EQ(grammar->generate.grammar(), "root ::= \"a\"");
  auto choice = Completion({{"prompt", "x"}, {"structured_outputs", {{"choice", {"yes", "no"}}}}});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->generate.choice().choices_size(), 2);
  auto json = Completion({{"prompt", "x"}, {"structured_outputs", {{"json", {{"type", "integer"}}}}}});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->generate.json_schema(), R"({"type":"integer"})");
  auto bias = Completion({{"prompt", "x"}, {"logit_bias", {{"5", 1.5}, {"17", -100}}}});
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_EQ(bias->generate.logit_bias().at(5), 1.5f);
  EXPECT_EQ(bias->generate.logit_bias().at(17), -100.0f);

  const std::vector<std::pair<Json, std::string>> refused = {
      {{{"response_format", {{"type", "json_object"}}}, {"structured_outputs", {{"choice", {"a"}}}}},
       "more than one constraint"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema must be an object"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type = \"xml\" is not one of"},
      {{{"structured_outputs", {{"regex", "a+"}}}}, "structured_outputs.regex is not supported"},
      {{{"structured_outputs", {{"choice", {1}}}}}, "structured_outputs.choice must list strings"},
      {{{"logit_bias", {{"five", 1}}}}, "logit_bias: \"five\" is not a token id"},
      {{{"logit_bias", {{"5", "high"}}}}, "logit_bias[5] must be a number"},
  };
  for (const auto& [fields, message] : refused) {
    Json body = fields;
    body["prompt"] = "x";
    absl::Status status = Completion(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body.dump();
    EXPECT_NE(status.message().find(message), std::string::npos) << status;
  }
}

TEST(OpenAiRequestTest, WrongTypesNameTheField) {
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, Json>>{{"temperature", "hot"},
                                                 {"max_tokens", 1.5},
                                                 {"seed", -1},
                                                 {"stream", "yes"},
                                                 {"stop", 3},
                                                 {"max_tokens", 0}}) {
    Json body = {{"prompt", "x"}, {field, value}};
    absl::Status status = Completion(body).status();
    ASSERT_FALSE(status.ok()) << field;
    EXPECT_EQ(ToOpenAiField(OpenAiEndpoint::kCompletions, std::string(status.message())).param,
              field)
        << status;
  }
  EXPECT_FALSE(Completion(Json::array()).ok());
}

TEST(OpenAiRequestTest, SessionsFromBodyOrHeader) {
  const std::string id(32, 'a');
  EXPECT_EQ(Completion({{"prompt", "x"}}, id)->generate.session_id(), id);
  EXPECT_EQ(Completion({{"prompt", "x"}, {"session_id", id}})->generate.session_id(), id);
  EXPECT_FALSE(Completion({{"prompt", "x"}, {"session_id", id}}, std::string(32, 'b')).ok());
  EXPECT_TRUE(Completion({{"prompt", "x"}, {"session", "new"}})->new_session);
  EXPECT_FALSE(Completion({{"prompt", "x"}, {"session", "old"}}).ok());
  EXPECT_FALSE(Completion({{"prompt", "x"}, {"session", "new"}}, id).ok());
}

TEST(OpenAiRequestTest, ChatRendersMessagesWithTheTemplate) {
  auto r = Chat({{"messages",
                  {{{"role", "system"}, {"content", "Be brief."}},
                   {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}},
                   {{"role", "assistant"}, {"content", " Hello."}},
                   {{"role", "user"}, {"content", "Bye"}}}},
                 {"logprobs", true},
                 {"top_logprobs", 2},
                 {"max_completion_tokens", 9}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.prompt(),
            "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: Bye\n\nAssistant:");
  EXPECT_EQ(r->template_stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 2);
  EXPECT_EQ(r->generate.max_new_tokens(), 9);
  absl::Status robot = Chat({{"messages", {{{"role", "robot"}, {"content", "x"}}}}}).status();
  EXPECT_EQ(ToOpenAiField(OpenAiEndpoint::kChatCompletions, std::string(robot.message())).param,
            "messages");
  EXPECT_FALSE(Chat({{"messages", Json::array()}}).ok());
  EXPECT_FALSE(
      Chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}).ok());
}

TEST(OpenAiRequestTest, ValidationMessagesGetOpenAiNames) {
  OpenAiField f =
      ToOpenAiField(OpenAiEndpoint::kCompletions, "max_new_tokens = 0 is outside [1, 4]");
  EXPECT_EQ(f.param, "max_tokens");
  EXPECT_EQ(f.message, "max_tokens = 0 is outside [1, 4]");
  f = ToOpenAiField(OpenAiEndpoint::kChatCompletions, "prompt is 9 bytes; at most 8 are allowed");
  EXPECT_EQ(f.param, "messages");
  f = ToOpenAiField(OpenAiEndpoint::kCompletions, "prompt_tokens[3] = 999 is outside [0, 258)");
  EXPECT_EQ(f.param, "prompt");
  EXPECT_EQ(ToOpenAiField(OpenAiEndpoint::kCompletions, "stop[2] is empty").param, "stop");
  EXPECT_EQ(ToOpenAiField(OpenAiEndpoint::kCompletions, "the model is loading").param, "");
}

TEST(ChatTemplateTest, FileDefaultsAndErrors) {
  EXPECT_EQ(*ChatTemplate::Plain().Render({{"user", "ROMEO:\nHi"}}), "ROMEO:\nHi\n\n");
  EXPECT_EQ(*ChatTemplate::RwkvWorld().Render({{"user", "Hi"}}), "User: Hi\n\nAssistant:");
  const std::string dir = ::testing::TempDir() + "/chat-template-model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_EQ(ChatTemplate::ForModel(dir, "rwkv7")->source(), "rwkv_world");
  EXPECT_EQ(ChatTemplate::ForModel(dir, "transformer")->source(), "plain");
  std::ofstream(dir + "/chat_template.json")
      << R"({"roles": {"system": {}, "user": {"prefix": "Q: ", "suffix": "\n"},
                       "assistant": {"prefix": "A:", "suffix": "\n"}}, "stop": ["\n"]})";
  auto from_file = ChatTemplate::ForModel(dir + "/model.pth", "rwkv7");  // a file's directory
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(*from_file->Render({{"system", "S"}, {"user", "x"}}), "SQ: x\nA:");
  EXPECT_EQ(from_file->turn_end(), "\n");
  EXPECT_NE(ChatTemplate::Parse(R"({"roles": {"user": {}}})", "t.json")
                .status()
                .message()
                .find("roles.system"),
            std::string::npos);
  EXPECT_NE(ChatTemplate::Parse(R"({"roles": {"system": {}, "user": {}, "assistant": {}},
                                    "stop": [""]})",
                                "t.json")
                .status()
                .message()
                .find("stop"),
            std::string::npos);
  EXPECT_FALSE(ChatTemplate::Parse("nope", "t.json").ok());
}

TEST(ChatTurnEndsTest, RemembersSessionsWhoseTurnStoppedShortWithinItsBound) {
  ChatTurnEnds ends(2);
  ends.Finished("a", /*at_stop=*/false);
  ends.Finished("b", /*at_stop=*/true);
  EXPECT_FALSE(ends.TakeMissingEnd("b"));
  EXPECT_TRUE(ends.TakeMissingEnd("a"));
  EXPECT_FALSE(ends.TakeMissingEnd("a"));  // taken once
  ends.Finished("a", false);
  ends.Forget("a");
  EXPECT_FALSE(ends.TakeMissingEnd("a"));
  ends.Finished("x", false);
  ends.Finished("y", false);
  ends.Finished("z", false);  // the oldest goes
  EXPECT_FALSE(ends.TakeMissingEnd("x"));
  EXPECT_TRUE(ends.TakeMissingEnd("y"));
  EXPECT_TRUE(ends.TakeMissingEnd("z"));
}

TEST(OpenAiResponseTest, WholeAnswersAndChunks) {
  TurnSummary summary;
  summary.reason = FinishReason::kLength;
  summary.prompt_tokens = 4;
  summary.cached_tokens = 2;
  summary.generated_tokens = 3;
  summary.position = 9;
  TurnPiece piece;
  piece.text = "abc";
  piece.tokens.push_back({{97, "a", -0.5f}, {{97, "a", -0.5f}, {98, "b", -1.5f}}});
  OpenAiResponder chat(OpenAiEndpoint::kChatCompletions, "m", true, "sid");
  const Json whole = chat.Whole({piece}, summary);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "abc");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], "b");
  EXPECT_EQ(whole["usage"]["total_tokens"], 7);
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(whole["session_id"], "sid");
  EXPECT_EQ(whole["session_position"], 9);
  EXPECT_EQ(chat.Opening().size(), 1u);
  EXPECT_EQ(chat.Chunk(piece)["choices"][0]["delta"]["content"], "abc");
  summary.reason = FinishReason::kEos;
  EXPECT_EQ(chat.Closing(summary)["choices"][0]["finish_reason"], "stop");
  summary.cancelled = true;
  EXPECT_EQ(OpenAiFinishReason(summary), "abort");

  OpenAiResponder completion(OpenAiEndpoint::kCompletions, "m", true, "");
  EXPECT_TRUE(completion.Opening().empty());
  const Json chunk = completion.Chunk(piece);
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "abc");
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["top_logprobs"][0]["b"], -1.5);
  EXPECT_FALSE(chunk.contains("session_id"));
  // A token's bytes may end inside a UTF-8 character: replaced, not thrown on.
  EXPECT_NE(DumpJson(Json{{"t", std::string("\xe2\x82", 2)}}).find("\xef\xbf\xbd"),
            std::string::npos);
}

TEST(HttpErrorsTest, StatusCodesMapToHttpStatusesAndShapes) {
  const std::pair<absl::Status, int> table[] = {{absl::InvalidArgumentError("x"), 400},
                                                {absl::UnauthenticatedError("x"), 401},
                                                {absl::PermissionDeniedError("x"), 403},
                                                {absl::NotFoundError("x"), 404},
                                                {absl::FailedPreconditionError("x"), 409},
                                                {absl::AbortedError("x"), 409},
                                                {absl::AlreadyExistsError("x"), 409},
                                                {absl::ResourceExhaustedError("x"), 429},
                                                {absl::UnavailableError("x"), 503},
                                                {absl::DataLossError("x"), 500}};
  for (const auto& [status, http] : table) {
    const HttpError error = ToHttpError(status, "f");
    EXPECT_EQ(error.status, http) << status;
    EXPECT_EQ(error.body["error"]["code"], http);
    EXPECT_EQ(error.body["error"]["param"], "f");
    EXPECT_EQ(error.body["error"]["message"], "x");
    EXPECT_EQ(error.retry_after_seconds > 0, http == 429 || http == 503) << status;
  }
  EXPECT_EQ(HttpErrorOf(413, "big").body["error"]["type"], "request_too_large");
  EXPECT_EQ(CodeNameOfHttpStatus(429), "RESOURCE_EXHAUSTED");
}

}  // namespace
}  // namespace linserve
