// A chat through a Jinja template end to end: the shipped default model
// served with --chat_template_file (Qwen3.5's template, which opens the
// reasoning in its generation prompt). The byte model writes no </think>,
// so its whole answer is reasoning: what a turn cut inside its reasoning
// returns.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

class HttpJinjaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("http-jinja-store"),
                                        std::string("--chat_template_file=") + LINSERVE_SOURCE_DIR +
                                            "/tests/engine/jinja/templates/Qwen3.5-4B.jinja"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }
  static HttpTestClient Client() { return HttpTestClient(server_->http_port()); }
  static ServerProcess* server_;
};
ServerProcess* HttpJinjaTest::server_ = nullptr;

const Json kMessages = Json::array({{{"role", "user"}, {"content", "Hi"}}});

TEST_F(HttpJinjaTest, TokenizeReturnsTheRenderedPromptWithoutBos) {
  HttpTestClient http = Client();
  HttpReply reply = http.Post(
      "/tokenize",
      Json{{"messages", kMessages}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::string prompt =
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  EXPECT_EQ(reply.json["prompt"], prompt);
  // The byte model: one id per byte, and no BOS before them.
  EXPECT_EQ(reply.json["count"], prompt.size());
  EXPECT_EQ(reply.json["tokens"][0], static_cast<unsigned char>('<'));
  reply = http.Post("/tokenize", Json{{"messages", kMessages}, {"add_generation_prompt", false}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.json["prompt"], "<|im_start|>user\nHi<|im_end|>\n");
}

TEST_F(HttpJinjaTest, ReasoningWholeAndStreamedAgreeAndAreCounted) {
  HttpTestClient http = Client();
  Json request = {{"messages", kMessages}, {"max_tokens", 12}, {"seed", 3}, {"temperature", 0.8}};
  HttpReply whole = http.Post("/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json& message = whole.json["choices"][0]["message"];
  ASSERT_TRUE(message["reasoning_content"].is_string()) << whole.body;
  EXPECT_FALSE(message["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(message["content"], "");
  EXPECT_EQ(whole.json["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole.json["usage"]["completion_tokens_details"]["reasoning_tokens"], 12);

  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  HttpReply streamed = http.Stream("/v1/chat/completions", request);
  ASSERT_EQ(streamed.status, 200);
  std::string reasoning, content;
  for (const Json& event : streamed.events) {
    if (event["choices"].empty()) continue;
    const Json& delta = event["choices"][0]["delta"];
    if (delta.contains("reasoning_content"))
      reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  EXPECT_EQ(content, "");
  EXPECT_EQ(streamed.events.back()["usage"]["completion_tokens_details"]["reasoning_tokens"], 12);
}

// n = 2: each choice has its own reasoning (split on its own: choice 1's
// stream is not taken for a continuation of choice 0's), and the usage
// counts both choices' reasoning tokens.
TEST_F(HttpJinjaTest, EachOfNChoicesSplitsItsOwnReasoning) {
  HttpTestClient http = Client();
  Json request = {
      {"messages", kMessages}, {"max_tokens", 7}, {"seed", 4}, {"temperature", 0.8}, {"n", 2}};
  HttpReply whole = http.Post("/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  ASSERT_EQ(whole.json["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const Json& message = whole.json["choices"][i]["message"];
    ASSERT_TRUE(message["reasoning_content"].is_string()) << whole.body;
    EXPECT_EQ(message["content"], "");
  }
  EXPECT_EQ(whole.json["usage"]["completion_tokens_details"]["reasoning_tokens"], 14);

  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  HttpReply streamed = http.Stream("/v1/chat/completions", request);
  ASSERT_EQ(streamed.status, 200);
  std::string reasoning[2];
  for (const Json& event : streamed.events) {
    if (event["choices"].empty()) continue;
    const Json& choice = event["choices"][0];
    const Json& delta = choice["delta"];
    EXPECT_FALSE(delta.contains("content") && !delta["content"].get<std::string>().empty());
    if (delta.contains("reasoning_content")) {
      reasoning[choice["index"].get<int>()] += delta["reasoning_content"].get<std::string>();
    }
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(reasoning[i], whole.json["choices"][i]["message"]["reasoning_content"]) << i;
  }
  EXPECT_EQ(streamed.events.back()["usage"]["completion_tokens_details"]["reasoning_tokens"], 14);
}

// gRPC marks the same split: a prompt ending in the opening tag starts
// inside the reasoning, each message's reasoning and answer are what the
// HTTP answer's reasoning_content and content hold, and ModelInfo names the
// format. The whole text still streams in `text`.
TEST_F(HttpJinjaTest, GrpcMarksReasoningAndAnswer) {
  auto stub = v1::Linserve::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.reasoning_format(), "qwen3");

  HttpReply rendered = Client().Post("/tokenize", Json{{"messages", kMessages}});
  ASSERT_EQ(rendered.status, 200) << rendered.body;
  const std::string prompt = rendered.json["prompt"];
  ASSERT_EQ(prompt.substr(prompt.size() - 8), "<think>\n");
  HttpReply http = Client().Post(
      "/v1/chat/completions",
      Json{{"messages", kMessages}, {"max_tokens", 12}, {"seed", 3}, {"temperature", 0.8}});
  ASSERT_EQ(http.status, 200) << http.body;

  GenerateOutcome grpc_turn = RunGenerate(*stub, MakeRequest(prompt, "", 12, 3));
  ASSERT_TRUE(grpc_turn.status.ok()) << grpc_turn.status.error_message();
  std::string reasoning, answer;
  for (const v1::GenerateResponse& message : grpc_turn.messages) {
    reasoning += message.reasoning();
    answer += message.answer();
  }
  EXPECT_FALSE(grpc_turn.text.empty());
  EXPECT_EQ(reasoning, http.json["choices"][0]["message"]["reasoning_content"]);
  EXPECT_EQ(answer, http.json["choices"][0]["message"]["content"]);

  // A prompt that does not open the reasoning: text that never opens it is
  // all answer.
  GenerateOutcome plain = RunGenerate(*stub, MakeRequest("Hello", "", 8, 3));
  ASSERT_TRUE(plain.status.ok());
  std::string plain_answer;
  for (const v1::GenerateResponse& message : plain.messages) plain_answer += message.answer();
  if (plain.text.find("<think>") == std::string::npos) EXPECT_EQ(plain_answer, plain.text);
}

// A constraint with a prompt that opened the reasoning: the reasoning is
// closed at once and the constrained text is the answer (content), whole and
// streamed; without the constraint the same turn would be all reasoning.
TEST_F(HttpJinjaTest, AConstraintHoldsTheAnswerNotTheReasoning) {
  HttpTestClient http = Client();
  const Json schema = {
      {"type", "object"},
      {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}}}},
      {"required", {"n"}}};
  Json request = {
      {"messages", kMessages},
      {"max_tokens", 40},
      {"seed", 5},
      {"temperature", 1.0},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}};
  HttpReply whole = http.Post("/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json& message = whole.json["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning_content"].is_null()) << whole.body;
  const Json object = Json::parse(message["content"].get<std::string>());
  EXPECT_TRUE(object["n"].is_number_integer()) << whole.body;

  request["stream"] = true;
  HttpReply streamed = http.Stream("/v1/chat/completions", request);
  ASSERT_EQ(streamed.status, 200);
  std::string content;
  for (const Json& event : streamed.events) {
    if (event["choices"].empty()) continue;
    const Json& delta = event["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("reasoning_content")) << event.dump();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, message["content"]);

  // structured_outputs' choice and grammar take the same lead.
  HttpReply choice =
      http.Post("/v1/chat/completions", Json{{"messages", kMessages},
                                             {"max_tokens", 20},
                                             {"structured_outputs", {{"choice", {"yes", "no"}}}}});
  ASSERT_EQ(choice.status, 200) << choice.body;
  const std::string answer = choice.json["choices"][0]["message"]["content"];
  EXPECT_TRUE(answer == "yes" || answer == "no") << choice.body;
  HttpReply grammar = http.Post("/v1/chat/completions",
                                Json{{"messages", kMessages},
                                     {"max_tokens", 20},
                                     {"structured_outputs", {{"grammar", "root ::= \"ok\""}}}});
  ASSERT_EQ(grammar.status, 200) << grammar.body;
  EXPECT_EQ(grammar.json["choices"][0]["message"]["content"], "ok");
}

TEST_F(HttpJinjaTest, ModelsNameTheTemplateAndTheReasoningFormat) {
  HttpReply reply = Client().Get("/v1/models");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json& model = reply.json["data"][0];
  EXPECT_EQ(model["reasoning_format"], "qwen3");  // auto: the template writes </think>
  EXPECT_NE(model["chat_template"].get<std::string>().find("Qwen3.5-4B.jinja"), std::string::npos);
}

TEST_F(HttpJinjaTest, StreamedChatWithToolsStreamsAsText) {
  HttpTestClient http = Client();
  const Json tool = {{"type", "function"},
                     {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  HttpReply streamed = http.Stream("/v1/chat/completions", Json{{"messages", kMessages},
                                                                {"tools", {tool}},
                                                                {"max_tokens", 6},
                                                                {"seed", 5},
                                                                {"stream", true}});
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_TRUE(streamed.done);
}

const Json kWeatherTool = Json::parse(R"({"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 10}, "days": {"type": "integer", "minimum": 1,
    "maximum": 7}}, "required": ["city", "days"]}}})");

void ExpectWeatherArguments(const std::string& text) {
  const Json arguments = Json::parse(text, nullptr, false);
  ASSERT_TRUE(arguments.is_object()) << text;
  ASSERT_TRUE(arguments["city"].is_string()) << text;
  const std::string city = arguments["city"];
  EXPECT_LE(std::count_if(city.begin(), city.end(), [](char c) { return (c & 0xC0) != 0x80; }), 10)
      << text;
  ASSERT_TRUE(arguments["days"].is_number_integer()) << text;
  EXPECT_GE(arguments["days"].get<int>(), 1);
  EXPECT_LE(arguments["days"].get<int>(), 7);
}

TEST_F(HttpJinjaTest, ModelsNameTheToolCallFormat) {
  HttpReply reply = Client().Get("/v1/models");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.json["data"][0]["tool_call_format"], "qwen3_coder");  // auto: <function=
}

// "required" holds the untrained model to Qwen3.5's XML: every seed's answer
// at temperature 1 parses into one call whose arguments fit the schema (the
// opened reasoning is closed at once). One server, short answers.
TEST_F(HttpJinjaTest, RequiredAlwaysParsesOverManySeeds) {
  // Several clients at once, so that the turns decode in one batch.
  constexpr int kClients = 8;
  const int seeds = SeedsForThisRun(200);
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([c, seeds, &failures] {
      HttpTestClient http = Client();
      for (int seed = 1 + c; seed <= seeds && failures[c].empty(); seed += kClients) {
        Json request = {{"messages", kMessages},
                        {"tools", {kWeatherTool}},
                        {"tool_choice", "required"},
                        {"parallel_tool_calls", false},
                        {"max_tokens", 256},
                        {"temperature", 1.0},
                        {"seed", seed}};
        HttpReply reply = http.Post("/v1/chat/completions", request);
        const Json& choice = reply.json["choices"][0];
        if (reply.status != 200 || choice["finish_reason"] != "tool_calls" ||
            choice["message"]["tool_calls"].size() != 1 ||
            choice["message"]["tool_calls"][0]["function"]["name"] != "get_weather") {
          failures[c] = "seed " + std::to_string(seed) + ": " + reply.body;
          continue;
        }
        const Json arguments = Json::parse(
            choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr,
            false);
        if (!arguments.is_object() || !arguments["city"].is_string() ||
            !arguments["days"].is_number_integer() || arguments["days"] < 1 ||
            arguments["days"] > 7) {
          failures[c] = "seed " + std::to_string(seed) + ": " + reply.body;
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
}

// Streamed, each call's name comes first (arguments ""), then its
// arguments as they arrive; put together they are the whole answer's. The
// model may call several times (parallel_tool_calls is true by default):
// each call its own index and id.
TEST_F(HttpJinjaTest, StreamedCallArgumentsAddUpToTheWholeAnswer) {
  HttpTestClient http = Client();
  Json request = {{"messages", kMessages},
                  {"tools", {kWeatherTool}},
                  {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                  {"max_tokens", 256},
                  {"temperature", 1.0},
                  {"seed", 11}};
  HttpReply whole = http.Post("/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json& message = whole.json["choices"][0]["message"];
  const Json& calls = message["tool_calls"];
  ASSERT_GE(calls.size(), 2u) << whole.body;  // this seed calls twice
  EXPECT_TRUE(message["content"].is_null()) << whole.body;
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);

  request["stream"] = true;
  HttpReply streamed = http.Stream("/v1/chat/completions", request);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::vector<std::string> names(calls.size()), arguments(calls.size()), ids(calls.size());
  std::string finish;
  for (const Json& event : streamed.events) {
    const Json& choice = event["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const Json& delta : choice["delta"]["tool_calls"]) {
      const size_t index = delta["index"];
      ASSERT_LT(index, calls.size()) << event.dump();
      if (delta.contains("id")) {
        EXPECT_TRUE(ids[index].empty());
        ids[index] = delta["id"];
        EXPECT_EQ(delta["type"], "function");
        EXPECT_EQ(delta["function"]["arguments"], "");
        names[index] = delta["function"]["name"];
      } else {
        EXPECT_FALSE(ids[index].empty()) << "arguments before the call's name";
        arguments[index] += delta["function"]["arguments"].get<std::string>();
      }
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(names[i], "get_weather");
    EXPECT_EQ(arguments[i], calls[i]["function"]["arguments"]) << i;
    ExpectWeatherArguments(arguments[i]);
  }
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(finish, "tool_calls");

  // parallel_tool_calls = false keeps the first.
  request["stream"] = false;
  request["parallel_tool_calls"] = false;
  HttpReply first = http.Post("/v1/chat/completions", request);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json["choices"][0]["message"]["tool_calls"].size(), 1u) << first.body;
}

// A call and its result go back through the template, in Qwen3.5's form.
TEST_F(HttpJinjaTest, ToolCallsAndResultsRenderThroughTheTemplate) {
  HttpTestClient http = Client();
  const Json messages = Json::parse(R"([
      {"role": "user", "content": "Weather in Oslo and Rome?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}},
        {"id": "call_2", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\", \"days\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
      {"role": "tool", "tool_call_id": "call_2", "content": "sun"}])");
  HttpReply reply = http.Post("/tokenize", Json{{"messages", messages}, {"tools", {kWeatherTool}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::string prompt = reply.json["prompt"];
  for (const char* part :
       {"<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n2\n",
        "<tool_response>\nrain\n</tool_response>", "<tool_response>\nsun\n</tool_response>",
        "<function=example_function_name>"}) {
    EXPECT_NE(prompt.find(part), std::string::npos) << part << " in " << prompt;
  }
  HttpReply answer = http.Post("/v1/chat/completions", Json{{"messages", messages},
                                                            {"tools", {kWeatherTool}},
                                                            {"tool_choice", "required"},
                                                            {"max_tokens", 256},
                                                            {"seed", 2},
                                                            {"temperature", 1.0}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.json["choices"][0]["finish_reason"], "tool_calls") << answer.body;
}

TEST_F(HttpJinjaTest, ToolCallMetricsAreExposed) {
  absl::StatusOr<std::string> metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find("linserve_tool_calls_malformed_total"), std::string::npos);
  EXPECT_NE(metrics->find("linserve_tool_call_values_unconverted_total"), std::string::npos);
}

TEST_F(HttpJinjaTest, RequestTemplatesAndReservedKwargsAre400) {
  HttpTestClient http = Client();
  for (const Json& extra :
       {Json{{"chat_template", "{{ 1 }}"}}, Json{{"chat_template_kwargs", {{"bos_token", "x"}}}}}) {
    Json request = {{"messages", kMessages}, {"max_tokens", 2}};
    request.update(extra);
    HttpReply reply = http.Post("/v1/chat/completions", request);
    EXPECT_EQ(reply.status, 400) << extra.dump() << " " << reply.body;
  }
}

// A chat session under a Jinja template that sends its whole conversation
// ("session_messages": "replace"), as a stateless chat does, gives what the
// stateless chat gives at every turn (message, logprobs). The template drops each earlier turn's
// reasoning once a new user message follows, so the session goes back to
// the state it kept where that turn's generation prompt began and prefills
// from there: the re-rendered answer and the new message.
TEST_F(HttpJinjaTest, AChatSessionEqualsTheStatelessChatAndPrefillsOnlyWhatIsNew) {
  HttpTestClient http = Client();
  Json messages = Json::array({{{"role", "system"}, {"content", "Be brief."}}});
  const std::vector<std::string> questions = {"Hi", "Why?", "And then?"};
  std::string session;
  int64_t kept_tokens = 0;  // the previous turn's history, rendered
  for (size_t n = 0; n < questions.size(); ++n) {
    SCOPED_TRACE("turn " + std::to_string(n + 1));
    messages.push_back({{"role", "user"}, {"content", questions[n]}});
    Json request = {{"messages", messages}, {"max_tokens", 10},  {"seed", 20 + n},
                    {"temperature", 0.8},   {"logprobs", true}, {"top_logprobs", 2}};
    // Its own salt: the session's first turn must not find its prefix cached.
    Json stateless = request;
    stateless["cache_salt"] = "alone";
    HttpReply alone = http.Post("/v1/chat/completions", stateless);
    ASSERT_EQ(alone.status, 200) << alone.body;
    if (session.empty()) {
      request["session"] = "new";
    } else {
      request["session_id"] = session;
    }
    request["session_messages"] = "replace";
    HttpReply live = http.Post("/v1/chat/completions", request);
    ASSERT_EQ(live.status, 200) << live.body;
    if (session.empty()) session = live.json["session_id"].get<std::string>();
    EXPECT_EQ(live.json["choices"][0]["message"], alone.json["choices"][0]["message"]);
    // This model's kind gives the same bits only for prefills cut at the
    // same chunk boundaries (docs/DESIGN.md, "What is bit-identical"); the
    // session's prefill starts where it kept its state. Qwen3.5's is exact
    // at any cut (server_qwen35_test holds its conversations to the bit).
    const Json& live_tokens = live.json["choices"][0]["logprobs"]["content"];
    const Json& alone_tokens = alone.json["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(live_tokens.size(), alone_tokens.size());
    for (size_t i = 0; i < live_tokens.size(); ++i) {
      EXPECT_EQ(live_tokens[i]["token"], alone_tokens[i]["token"]);
      EXPECT_NEAR(live_tokens[i]["logprob"].get<double>(), alone_tokens[i]["logprob"].get<double>(),
                  1e-4);
    }
    EXPECT_EQ(live.json["usage"]["prompt_tokens"], alone.json["usage"]["prompt_tokens"]);
    EXPECT_EQ(live.json["usage"]["prompt_tokens_details"]["cached_tokens"], kept_tokens);
    HttpReply history =
        http.Post("/tokenize", Json{{"messages", messages}, {"add_generation_prompt", false}});
    ASSERT_EQ(history.status, 200) << history.body;
    kept_tokens = history.json["count"].get<int64_t>();
    // What the client keeps of the answer: its reasoning, which the template
    // renders for this turn only until the next user message.
    const Json& message = live.json["choices"][0]["message"];
    messages.push_back({{"role", "assistant"},
                        {"content", "Answer " + std::to_string(n + 1) + "."},
                        {"reasoning_content", message["reasoning_content"]}});
  }
  const std::string metrics = ScrapeMetrics(server_->metrics_port()).value_or("");
  EXPECT_GE(MetricValue(metrics, "linserve_conversation_turns_total{resumed=\"kept_state\"}"), 2);
}

// One turn of a stored-messages session, and the stateless chat of the
// conversation a client keeps (every message sent, every answer as it came):
// the same message, tokens and prompt.
void ExpectSameTurn(const HttpReply& live, const HttpReply& alone) {
  ASSERT_EQ(live.status, 200) << live.body;
  ASSERT_EQ(alone.status, 200) << alone.body;
  EXPECT_EQ(live.json["choices"][0]["message"], alone.json["choices"][0]["message"]);
  const Json& live_tokens = live.json["choices"][0]["logprobs"]["content"];
  const Json& alone_tokens = alone.json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(live_tokens.size(), alone_tokens.size());
  for (size_t i = 0; i < live_tokens.size(); ++i) {
    EXPECT_EQ(live_tokens[i]["token"], alone_tokens[i]["token"]) << i;
  }
  EXPECT_EQ(live.json["usage"]["prompt_tokens"], alone.json["usage"]["prompt_tokens"]);
}

// By default a Jinja chat session stores its messages: each turn sends only
// its new ones, and the session renders them after what it holds (its
// earlier messages and answers, each answer as the client received it).
// It equals the stateless chat of the whole conversation at every turn,
// prefills only what is new, and its messages travel in its state file.
TEST_F(HttpJinjaTest, AChatSessionStoresItsMessagesAndTakesOnlyTheNewOnes) {
  HttpTestClient http = Client();
  Json conversation = Json::array({{{"role", "system"}, {"content", "Be brief."}}});
  std::string session;
  // A turn without thinking answers in content, which later turns render.
  auto turn = [&](const std::string& id, const Json& sent, int seed, bool thinking = true) {
    Json request = {{"messages", sent},   {"max_tokens", 8},   {"seed", seed},
                    {"temperature", 0.8}, {"logprobs", true},
                    {"chat_template_kwargs", {{"enable_thinking", thinking}}}};
    Json stateless = request;
    stateless["messages"] = conversation;
    stateless["cache_salt"] = "alone";
    HttpReply alone = http.Post("/v1/chat/completions", stateless);
    if (id.empty()) {
      request["session"] = "new";
    } else {
      request["session_id"] = id;
    }
    HttpReply live = http.Post("/v1/chat/completions", request);
    ExpectSameTurn(live, alone);
    return live;
  };
  const std::vector<std::string> questions = {"Hi", "Why?", "And then?"};
  for (size_t n = 0; n < questions.size(); ++n) {
    SCOPED_TRACE("turn " + std::to_string(n + 1));
    Json sent = Json::array();
    if (n == 0) sent.push_back(conversation[0]);
    sent.push_back({{"role", "user"}, {"content", questions[n]}});
    conversation.push_back(sent.back());
    HttpReply live = turn(session, sent, 30 + static_cast<int>(n), /*thinking=*/n != 1);
    if (HasFatalFailure()) return;
    if (n == 1) {
      EXPECT_FALSE(live.json["choices"][0]["message"]["content"].get<std::string>().empty());
    }
    if (session.empty()) session = live.json["session_id"].get<std::string>();
    if (n > 0) EXPECT_GT(live.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    Json answer = live.json["choices"][0]["message"];
    conversation.push_back(answer);
  }

  // A fork holds them too; so does a copy exported and imported.
  HttpReply fork = http.Post("/v1/sessions/" + session + "/fork", std::string());
  ASSERT_EQ(fork.status, 200) << fork.body;
  {
    SCOPED_TRACE("the fork");
    const Json aside = Json::array({{{"role", "user"}, {"content", "Aside."}}});
    const Json before_fork = conversation;
    conversation.push_back(aside[0]);
    turn(fork.json["id"].get<std::string>(), aside, 50);
    conversation = before_fork;
  }
  HttpReply file = http.Get("/v1/sessions/" + session + "/state");
  ASSERT_EQ(file.status, 200);
  httplib::Client raw("127.0.0.1", server_->http_port());
  HttpReply imported =
      FromResult(raw.Post("/v1/sessions/import", file.body, "application/octet-stream"));
  ASSERT_EQ(imported.status, 200) << imported.body;
  const Json next = Json::array({{{"role", "user"}, {"content", "Bye."}}});
  conversation.push_back(next[0]);
  turn(imported.json["id"].get<std::string>(), next, 40);
}

// A session whose last turn was not a chat turn holds no messages for new
// ones to follow: refused by name; "replace" still serves it, and an
// unknown mode, or one without a session, is a 400 naming the field.
TEST_F(HttpJinjaTest, StoredMessagesAreRefusedByNameWhereTheSessionHasNone) {
  HttpTestClient http = Client();
  HttpReply made = http.Post("/v1/sessions", Json{{"prompt", "Once upon a time"}});
  ASSERT_EQ(made.status, 200) << made.body;
  const std::string id = made.json["id"].get<std::string>();
  Json request = {{"messages", kMessages}, {"max_tokens", 2}, {"session_id", id}};
  HttpReply refused = http.Post("/v1/chat/completions", request);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(refused.json["error"]["param"], "session_messages") << refused.body;
  EXPECT_NE(refused.body.find("replace"), std::string::npos) << refused.body;
  request["session_messages"] = "replace";
  EXPECT_EQ(http.Post("/v1/chat/completions", request).status, 200);
  for (const Json& bad : {Json{{"session_messages", "prepend"}, {"session_id", id}},
                          Json{{"session_messages", "append"}}}) {
    SCOPED_TRACE(bad.dump());
    Json sent = {{"messages", kMessages}, {"max_tokens", 2}};
    sent.update(bad);
    HttpReply reply = http.Post("/v1/chat/completions", sent);
    EXPECT_EQ(reply.status, 400) << reply.body;
    EXPECT_EQ(reply.json["error"]["param"], "session_messages") << reply.body;
  }
  // What a session keeps is bounded before it is kept: messages whose JSON
  // (each newline escaped) outgrows max_prompt_bytes, though their rendered
  // prompt fits, are refused naming the limit.
  Json long_turn = {{"messages", Json::array({{{"role", "user"},
                                               {"content", std::string(9000, '\n')}}})},
                    {"max_tokens", 2}, {"session_id", id}, {"session_messages", "replace"}};
  HttpReply too_long = http.Post("/v1/chat/completions", long_turn);
  EXPECT_EQ(too_long.status, 400) << too_long.body;
  EXPECT_EQ(too_long.json["error"]["param"], "messages") << too_long.body;
  EXPECT_NE(too_long.body.find("as JSON; at most max_prompt_bytes"), std::string::npos)
      << too_long.body;
  // A malformed id is never looked up: the validation names it.
  Json malformed = {{"messages", kMessages}, {"max_tokens", 2}, {"session_id", "../x"}};
  HttpReply reply = http.Post("/v1/chat/completions", malformed);
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_EQ(reply.json["error"]["param"], "session_id") << reply.body;
}

}  // namespace
}  // namespace linserve
