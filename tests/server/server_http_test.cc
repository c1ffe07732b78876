// The OpenAI-compatible HTTP API end to end: a real `linserve` process, a
// real HTTP client (cpp-httplib) and, where the two transports are compared,
// a real gRPC client.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

// The shipped default model: it writes Shakespeare, speeches separated by
// blank lines, which is where its plain chat template ends a turn.
class HttpApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("http-store"),
                                        "--max_http_body_bytes=65536", "--max_sessions=8"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static HttpTestClient Client() { return HttpTestClient(server_->http_port()); }

  static ServerProcess* server_;
};
ServerProcess* HttpApiTest::server_ = nullptr;

Json Completion(const std::string& prompt, uint64_t seed, int max_tokens = 40) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0.8}, {"seed", seed}};
}

TEST_F(HttpApiTest, CompletionGivesTheSameTextAsGrpcWithTheSameSeed) {
  auto stub = server_->Stub();
  GenerateOutcome grpc_run = RunGenerate(*stub, MakeRequest("ROMEO:", "", 40, 7, 0.8f));
  ASSERT_TRUE(grpc_run.status.ok()) << grpc_run.status.error_message();
  ASSERT_FALSE(grpc_run.text.empty());

  HttpTestClient http = Client();
  HttpReply whole = http.Post("/v1/completions", Completion("ROMEO:", 7));
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json["object"], "text_completion");
  EXPECT_EQ(CompletionText(whole), grpc_run.text);
  EXPECT_EQ(whole.json["usage"]["completion_tokens"], grpc_run.finished.usage().generated_tokens());
  EXPECT_EQ(whole.json["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(whole.json["usage"]["total_tokens"], 6 + grpc_run.finished.usage().generated_tokens());
  EXPECT_TRUE(whole.json["usage"]["prompt_tokens_details"].contains("cached_tokens"));
  EXPECT_EQ(whole.json["choices"][0]["finish_reason"], "length");

  Json streamed_request = Completion("ROMEO:", 7);
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  HttpReply streamed = http.Stream("/v1/completions", streamed_request);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(Header(streamed, "Content-Type"), "text/event-stream");
  EXPECT_TRUE(streamed.done);
  ASSERT_GE(streamed.events.size(), 3u);
  EXPECT_EQ(CompletionText(streamed), grpc_run.text);
  const Json& usage = streamed.events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], grpc_run.finished.usage().generated_tokens());
  EXPECT_EQ(streamed.events[streamed.events.size() - 2]["choices"][0]["finish_reason"], "length");

  // The same prompt as token ids (the byte model: one id per byte, no BOS).
  Json ids = Completion("", 7);
  ids["prompt"] = Json::array({'R', 'O', 'M', 'E', 'O', ':'});
  HttpReply by_ids = http.Post("/v1/completions", ids);
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  EXPECT_EQ(CompletionText(by_ids), grpc_run.text);
}

// "seed": 0 is a seed: the same text each time, the text gRPC gives for
// seed 0, and reported back; without "seed" the server picks one.
TEST_F(HttpApiTest, SeedZeroIsASeedOnBothTransports) {
  HttpTestClient http = Client();
  const HttpReply first = http.Post("/v1/completions", Completion("ROMEO:", 0));
  const HttpReply second = http.Post("/v1/completions", Completion("ROMEO:", 0));
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(second.status, 200) << second.body;
  ASSERT_FALSE(CompletionText(first).empty());
  EXPECT_EQ(CompletionText(first), CompletionText(second));

  v1::GenerateRequest request = MakeRequest("ROMEO:", "", 40, 0, 0.8f);
  request.set_ignore_eos(false);
  request.mutable_sampling()->set_seed(0);
  GenerateOutcome grpc_run = RunGenerate(*server_->Stub(), request);
  ASSERT_TRUE(grpc_run.status.ok()) << grpc_run.status.error_message();
  EXPECT_EQ(grpc_run.finished.seed(), 0u);
  EXPECT_EQ(grpc_run.text, CompletionText(first));

  // Unseeded: the server's pick, never 0, reported in the final message.
  GenerateOutcome unseeded = RunGenerate(*server_->Stub(), MakeRequest("ROMEO:", "", 40, 0, 0.8f));
  ASSERT_TRUE(unseeded.status.ok()) << unseeded.status.error_message();
  EXPECT_NE(unseeded.finished.seed(), 0u);
}

TEST_F(HttpApiTest, ChatStreamsChunksAndLogprobsInOpenAiShapes) {
  HttpTestClient http = Client();
  Json chat = {{"messages", {{{"role", "user"}, {"content", "ROMEO:\nWhat light?"}}}},
               {"max_tokens", 12},
               {"seed", 3},
               {"stream", true},
               {"logprobs", true},
               {"top_logprobs", 2}};
  HttpReply reply = http.Stream("/v1/chat/completions", chat);
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_GE(reply.events.size(), 2u);
  EXPECT_EQ(reply.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(reply.events[0]["choices"][0]["delta"]["role"], "assistant");
  const Json& piece = reply.events[1]["choices"][0];
  ASSERT_TRUE(piece["logprobs"].is_object()) << piece.dump();
  EXPECT_EQ(piece["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_LE(piece["logprobs"]["content"][0]["logprob"].get<double>(), 0.0);

  Json completion = Completion("JULIET:", 5, 8);
  completion["logprobs"] = 1;
  HttpReply whole = http.Post("/v1/completions", completion);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json& logprobs = whole.json["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"].size(), 8u);
  EXPECT_EQ(logprobs["token_logprobs"].size(), 8u);
  EXPECT_EQ(logprobs["top_logprobs"][0].size(), 1u);
}

// The shipped Shakespeare model asked for JSON: unconstrained it would write
// a speech; constrained, its every answer parses and fits the schema, on
// both endpoints, streamed or not, and finish_reason is "stop".
TEST_F(HttpApiTest, StructuredOutputAlwaysParsesAndFitsItsSchema) {
  HttpTestClient http = Client();
  const Json schema = Json::parse(R"({"type": "object", "properties": {
      "speaker": {"type": "string", "maxLength": 12},
      "mood": {"enum": ["happy", "sad"]},
      "lines": {"type": "integer", "minimum": 1, "maximum": 99}},
      "required": ["speaker", "mood", "lines"], "additionalProperties": false})");
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const bool stream = seed % 2 == 0;
    Json chat = {{"messages", {{{"role", "user"}, {"content", "ROMEO:\nWho speaks?"}}}},
                 {"max_tokens", 200},
                 {"seed", seed},
                 {"temperature", 1.0},
                 {"stream", stream},
                 {"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"name", "speaker"}, {"schema", schema}}}}}};
    HttpReply reply = stream ? http.Stream("/v1/chat/completions", chat)
                             : http.Post("/v1/chat/completions", chat);
    ASSERT_EQ(reply.status, 200) << reply.body;
    std::string content, finish;
    if (stream) {
      for (const Json& event : reply.events) {
        const Json& choice = event["choices"][0];
        if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
      }
    } else {
      content = reply.json["choices"][0]["message"]["content"];
      finish = reply.json["choices"][0]["finish_reason"];
    }
    const Json answer = Json::parse(content, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(answer.is_object()) << content;
    EXPECT_EQ(answer.size(), 3u) << content;
    EXPECT_LE(answer["speaker"].get<std::string>().size(), 12u) << content;
    EXPECT_TRUE(answer["mood"] == "happy" || answer["mood"] == "sad") << content;
    EXPECT_GE(answer["lines"].get<int>(), 1) << content;
    EXPECT_LE(answer["lines"].get<int>(), 99) << content;
    EXPECT_EQ(finish, "stop");
  }
  Json choice = Completion("JULIET:", 9, 20);
  choice["structured_outputs"] = {{"choice", {"Romeo", "Tybalt"}}};
  HttpReply picked = http.Post("/v1/completions", choice);
  ASSERT_EQ(picked.status, 200) << picked.body;
  const std::string text = CompletionText(picked);
  EXPECT_TRUE(text == "Romeo" || text == "Tybalt") << text;
}

// The chat template ends an assistant turn at its stop string, which the
// session's state consumes (and a turn cut short by max_tokens gets it fed
// before the next one); so a session sent only each new message holds the
// text a stateless chat renders from the whole history.
TEST_F(HttpApiTest, ThreeTurnSessionChatEqualsStatelessChatsOfTheWholeHistory) {
  HttpTestClient http = Client();
  const std::vector<std::string> users = {"ROMEO:\nShe speaks, yet she says nothing.",
                                          "JULIET:\nWhat man art thou?",
                                          "ROMEO:\nBy a name I know not how to tell thee."};
  const int max_tokens[] = {600, 5, 600};
  const char* const finish[] = {"stop", "length", "stop"};
  Json history = Json::array();
  std::string session_id;
  for (size_t turn = 0; turn < users.size(); ++turn) {
    const Json message = {{"role", "user"}, {"content", users[turn]}};
    history.push_back(message);
    Json stateless = {{"messages", history},
                      {"max_tokens", max_tokens[turn]},
                      {"seed", 100 + turn},
                      {"temperature", 0.8}};
    Json in_session = stateless;
    in_session["messages"] = Json::array({message});
    httplib::Headers headers;
    if (turn == 0) {
      in_session["session"] = "new";
    } else {
      headers = {{"x-session-id", session_id}};  // the header, as a router sees it
    }
    HttpReply full = http.Post("/v1/chat/completions", stateless);
    HttpReply continued = http.Post("/v1/chat/completions", in_session, headers);
    ASSERT_EQ(full.status, 200) << full.body;
    ASSERT_EQ(continued.status, 200) << continued.body;
    ASSERT_EQ(full.json["choices"][0]["finish_reason"], finish[turn])
        << "turn " << turn << ": " << full.body;
    EXPECT_EQ(CompletionText(continued), CompletionText(full)) << "turn " << turn;
    if (turn == 0) session_id = continued.json["session_id"];
    EXPECT_EQ(continued.json["session_id"], session_id);
    EXPECT_EQ(Header(continued, "x-session-id"), session_id);
    EXPECT_GT(continued.json["session_position"].get<int64_t>(), 0);
    // Only the new message was prefilled.
    if (turn > 0) {
      EXPECT_LT(continued.json["usage"]["prompt_tokens"].get<int>(),
                full.json["usage"]["prompt_tokens"].get<int>());
    }
    history.push_back({{"role", "assistant"}, {"content", CompletionText(full)}});
  }
}

struct ErrorCase {
  std::string name;
  std::string path;
  std::string body;
  httplib::Headers headers;
  int status;
  std::string param;    // "" : null
  std::string message;  // a part of the message
};

TEST_F(HttpApiTest, EveryErrorHasOpenAiShapeAndStatus) {
  const std::string unknown_session(32, 'a');
  const std::vector<ErrorCase> cases = {
      {"n", "/v1/completions", R"({"prompt":"a","n":17})", {}, 400, "n",
       "n = 17 is outside [1, 16] (--max_n)"},
      {"best_of", "/v1/completions", R"({"prompt":"a","best_of":3,"n":4})", {}, 400, "best_of",
       "best_of = 3 is less than n = 4"},
      {"tools",
       "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]})",
       {},
       400,
       "tools",
       "tools[0] must be {\"type\": \"function\", \"function\": {...}}"},
      {"tool_choice",
       "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function",
           "function":{"name":"f"}}],"tool_choice":"auto"})",
       {},
       400,
       "tool_choice",
       "tool_choice = \"auto\" needs a chat template that declares how a call starts"},
      {"response_format",
       "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_schema",
           "json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"not":{}}}}}}})",
       {},
       400,
       "response_format.json_schema",
       "response_format.json_schema #/properties/a: the keyword 'not' is not supported"},
      {"structured_outputs",
       "/v1/completions",
       R"({"prompt":"a","structured_outputs":{"grammar":"root ::= \"a"}})",
       {},
       400,
       "structured_outputs.grammar",
       "structured_outputs.grammar: GBNF line 1, column 12: a literal is not closed"},
      {"logit_bias",
       "/v1/completions",
       R"({"prompt":"a","logit_bias":{"5":1000}})",
       {},
       400,
       "logit_bias",
       "logit_bias[5] = 1000 is outside [-100, 100]"},
      {"temperature",
       "/v1/completions",
       R"({"prompt":"a","temperature":1000})",
       {},
       400,
       "temperature",
       "temperature = 1000"},
      {"max_tokens",
       "/v1/completions",
       R"({"prompt":"a","max_tokens":100000})",
       {},
       400,
       "max_tokens",
       "max_tokens = 100000 is outside [1, 4096]"},
      {"role",
       "/v1/chat/completions",
       R"({"messages":[{"role":"robot","content":"a"}]})",
       {},
       400,
       "messages",
       "messages[0].role"},
      {"no prompt", "/v1/completions", R"({"max_tokens":3})", {}, 400, "prompt", "empty"},
      {"not json", "/v1/completions", "{", {}, 400, "", "not valid JSON"},
      {"session",
       "/v1/completions",
       R"({"prompt":"a","session_id":")" + unknown_session + "\"}",
       {},
       404,
       "",
       unknown_session},
      {"session header",
       "/v1/completions",
       R"({"prompt":"a"})",
       {{"x-session-id", unknown_session}},
       404,
       "",
       unknown_session},
      {"model", "/v1/completions", R"({"prompt":"a","model":"gpt-4"})", {}, 404, "model", "gpt-4"},
      {"path", "/v1/embeddings", R"({"input":"a"})", {}, 404, "", "/v1/embeddings"},
      {"origin",
       "/v1/completions",
       R"({"prompt":"a"})",
       {{"Origin", "https://evil.example"}},
       403,
       "",
       "--http_cors_origins"},
      {"body",
       "/v1/completions",
       R"({"prompt":")" + std::string(70000, 'a') + "\"}",
       {},
       413,
       "",
       "--max_http_body_bytes = 65536"},
  };
  HttpTestClient http = Client();
  for (const ErrorCase& c : cases) {
    HttpReply reply = http.Post(c.path, c.body, c.headers);
    EXPECT_EQ(reply.status, c.status) << c.name << ": " << reply.body;
    ASSERT_TRUE(reply.json.is_object()) << c.name << ": " << reply.body;
    const Json& error = reply.json["error"];
    EXPECT_EQ(error["code"], c.status) << c.name;
    EXPECT_TRUE(error["type"].is_string()) << c.name;
    EXPECT_NE(error["message"].get<std::string>().find(c.message), std::string::npos)
        << c.name << ": " << error["message"];
    EXPECT_EQ(error["param"], c.param.empty() ? Json(nullptr) : Json(c.param)) << c.name;
  }
}

TEST_F(HttpApiTest, ASessionLimitIs429WithRetryAfter) {
  HttpTestClient http = Client();
  Json request = Completion("ROMEO:", 1, 2);
  request["session"] = "new";
  HttpReply reply;
  for (int i = 0; i <= 8; ++i) {  // --max_sessions=8
    reply = http.Post("/v1/completions", request);
    if (reply.status != 200) break;
  }
  EXPECT_EQ(reply.status, 429) << reply.body;
  EXPECT_EQ(Header(reply, "Retry-After"), "1");
  EXPECT_NE(reply.body.find("max_sessions"), std::string::npos) << reply.body;
  EXPECT_EQ(reply.json["error"]["type"], "rate_limit_error");
}

TEST_F(HttpApiTest, ModelsTokenizeDetokenizeAndHealth) {
  HttpTestClient http = Client();
  HttpReply models = http.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json["data"][0]["id"], "default");
  EXPECT_EQ(models.json["data"][0]["architecture"], "transformer");
  EXPECT_GT(models.json["data"][0]["state_bytes_per_session"].get<int64_t>(), 0);
  EXPECT_EQ(models.json["data"][0]["fingerprint"].get<std::string>().size(), 64u);

  HttpReply tokens = http.Post("/tokenize", Json{{"prompt", "Hi!"}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(tokens.json["tokens"], Json::array({'H', 'i', '!'}));
  EXPECT_EQ(tokens.json["count"], 3);
  HttpReply text = http.Post("/detokenize", Json{{"tokens", tokens.json["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.json["prompt"], "Hi!");
  HttpReply bad = http.Post("/detokenize", Json{{"tokens", {1, 99999}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["error"]["param"], "tokens");

  HttpReply health = http.Get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json["status"], "ok");

  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_GE(MetricValue(*metrics,
                        "linserve_requests_total{code=\"OK\",method=\"Models\",protocol=\"http\"}"),
            1);
  // A completion is timed under its protocol.
  ASSERT_EQ(http.Post("/v1/completions", Completion("KING:", 1, 2)).status, 200);
  metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_GE(MetricValue(*metrics, "linserve_time_to_first_token_seconds_count{protocol=\"http\"}"),
            1);
}

// Streams to 64 clients at once: every connection gets a thread of the
// server's pool (a process with LibTorch loaded must be able to start them).
TEST_F(HttpApiTest, SixtyFourConcurrentStreamsAllFinish) {
  constexpr int kClients = 64;
  std::atomic<int> finished{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      HttpTestClient http = Client();
      Json request = Completion("KING:", 1000 + i, 16);
      request["stream"] = true;
      HttpReply reply = http.Stream("/v1/completions", request);
      EXPECT_EQ(reply.status, 200) << httplib::to_string(reply.error) << " " << reply.body;
      EXPECT_TRUE(reply.done) << "client " << i << ": " << reply.events.size() << " events";
      if (reply.status == 200 && reply.done) ++finished;
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(finished.load(), kClients);
}

// Decided by events: the turn cannot finish by itself (4096 tokens, EOS
// ignored) while the client reads two events and hangs up.
TEST(HttpLifecycleTest, AClientThatHangsUpMidStreamCancelsItsTurn) {
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                      "--store_dir=" + FreshDir("http-cancel-store"),
                                      "--stream_buffer_messages=4"});
  ASSERT_TRUE(server.ok()) << server.status();
  HttpTestClient http((*server)->http_port());
  Json request = Completion("ROMEO:", 1, 4096);
  request["ignore_eos"] = true;
  request["stream"] = true;
  int events = 0;
  HttpReply reply =
      http.Stream("/v1/completions", request, {}, [&](const Json&) { return ++events < 2; });
  EXPECT_EQ(reply.status, 200);
  EXPECT_FALSE(reply.done);
  ASSERT_TRUE((*server)->WaitForLog("\"code\":\"CANCELLED\"", absl::Seconds(60)));
  for (const std::string& line : (*server)->Log()) {
    if (line.find("\"event\":\"generate\"") == std::string::npos) continue;
    EXPECT_NE(line.find("\"protocol\":\"http\""), std::string::npos) << line;
    // Cut long before its 4096 tokens.
    const Json event = Json::parse(line);
    if (event.contains("generated_tokens")) EXPECT_LT(event["generated_tokens"].get<int>(), 4096);
  }
  auto metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics,
                        "linserve_requests_total{code=\"CANCELLED\",method=\"Completions\","
                        "protocol=\"http\"}"),
            1);
}

TEST(HttpLifecycleTest, LoadingAndDrainingAre503) {
  const HeldModel held = HoldModel(DefaultModelDir(), "http-held-model");
  auto server = ServerProcess::Start({"--model=" + held.dir, "--store_dir=" + FreshDir("http-held"),
                                      "--shutdown_grace_seconds=120"},
                                     absl::Seconds(120), "listening");
  ASSERT_TRUE(server.ok()) << server.status();
  HttpTestClient http((*server)->http_port());
  HttpReply loading = http.Post("/v1/completions", Completion("a", 1, 2));
  EXPECT_EQ(loading.status, 503) << loading.body;
  EXPECT_NE(loading.body.find("still loading"), std::string::npos);
  EXPECT_FALSE(Header(loading, "Retry-After").empty());
  EXPECT_EQ(http.Get("/health").status, 503);

  ReleaseModel(held);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"serving\"", absl::Seconds(120)));
  EXPECT_EQ(http.Get("/health").status, 200);

  // A turn that cannot finish by itself keeps the server draining.
  Json endless = Completion("ROMEO:", 1, 4096);
  endless["ignore_eos"] = true;
  endless["stream"] = true;
  std::atomic<bool> streaming{false};
  std::thread reader([&] {
    HttpTestClient own((*server)->http_port());
    own.Stream("/v1/completions", endless, {}, [&](const Json&) {
      streaming = true;
      return true;
    });
  });
  while (!streaming) absl::SleepFor(absl::Milliseconds(10));
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"shutting_down\"", absl::Seconds(60)));
  HttpReply draining = http.Post("/v1/completions", Completion("a", 1, 2));
  EXPECT_EQ(draining.status, 503) << draining.body;
  EXPECT_EQ(http.Get("/health").status, 503);
  (*server)->Signal(SIGKILL);
  reader.join();
}

}  // namespace
}  // namespace linserve
