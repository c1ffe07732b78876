// A chat through a Jinja template end to end: the shipped default model
// served with --chat_template_file (Qwen3.5's template, which opens the
// reasoning in its generation prompt). The byte model writes no </think>,
// so its whole answer is reasoning: what a turn cut inside its reasoning
// returns.

#include <gtest/gtest.h>

#include <string>

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

TEST_F(HttpJinjaTest, RequestTemplatesReservedKwargsAndSessionsAre400) {
  HttpTestClient http = Client();
  for (const Json& extra :
       {Json{{"chat_template", "{{ 1 }}"}}, Json{{"chat_template_kwargs", {{"bos_token", "x"}}}},
        Json{{"session", "new"}}}) {
    Json request = {{"messages", kMessages}, {"max_tokens", 2}};
    request.update(extra);
    HttpReply reply = http.Post("/v1/chat/completions", request);
    EXPECT_EQ(reply.status, 400) << extra.dump() << " " << reply.body;
  }
}

}  // namespace
}  // namespace linserve
