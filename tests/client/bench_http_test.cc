// The HTTP load test's pieces without a server: SSE framing, the request
// body, and what each event of a completion stream adds to an outcome.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench_http.h"
#include "client/sse.h"

namespace linserve {
namespace {

using Events = std::vector<std::string>;

TEST(SseReaderTest, SplitsEventsWhereverTheBytesBreak) {
  const std::string body =
      "data: {\"a\":1}\n\n: keep-alive\n\nevent: x\ndata: two\ndata: lines\n\ndata: [DONE]\n\n";
  for (size_t step : {1, 2, 3, 7, 1000}) {
    SseReader reader;
    Events events;
    for (size_t i = 0; i < body.size(); i += step) {
      for (std::string& e : reader.Feed(std::string_view(body).substr(i, step))) {
        events.push_back(std::move(e));
      }
    }
    EXPECT_EQ(events, (Events{"{\"a\":1}", "two\nlines", "[DONE]"})) << "step " << step;
  }
}

TEST(SseReaderTest, AnyLineEndingAndNoSpaceAfterTheColon) {
  SseReader reader;
  EXPECT_EQ(reader.Feed("data:a\r\n\r\ndata: b\r\rdata: c"), (Events{"a", "b"}));
  EXPECT_EQ(reader.Feed("\n"), Events{});  // the event is not over yet
  EXPECT_EQ(reader.Feed("\n"), (Events{"c"}));
}

TEST(CompletionRequestBodyTest, StreamsWithUsageAndNamesTheSession) {
  BenchRequest request;
  request.prompt = "the king";
  request.max_tokens = 16;
  request.sampling.temperature = 0.5f;
  request.seed = 9;
  nlohmann::json body = CompletionRequestBody(request);
  EXPECT_EQ(body["prompt"], "the king");
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["seed"], 9);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_FALSE(body.contains("session"));
  EXPECT_FALSE(body.contains("session_id"));
  // Sampling settings at their defaults are left to the server.
  for (const char* key : {"top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                          "frequency_penalty"}) {
    EXPECT_FALSE(body.contains(key)) << key;
  }
  request.sampling.top_p = 0.3f;
  request.sampling.presence_penalty = 0.5f;
  request.sampling.frequency_penalty = 0.25f;
  body = CompletionRequestBody(request);
  EXPECT_FLOAT_EQ(body["top_p"].get<float>(), 0.3f);
  EXPECT_FLOAT_EQ(body["presence_penalty"].get<float>(), 0.5f);
  EXPECT_FLOAT_EQ(body["frequency_penalty"].get<float>(), 0.25f);
  EXPECT_FALSE(body.contains("top_k"));
  EXPECT_FALSE(body.contains("logit_bias"));
  request.sampling.logit_bias = {{129, -100.0f}, {7, 1.5f}};
  EXPECT_EQ(CompletionRequestBody(request)["logit_bias"],
            nlohmann::json::parse(R"({"7": 1.5, "129": -100.0})"));
  request.new_session = true;
  EXPECT_EQ(CompletionRequestBody(request)["session"], "new");
  request.new_session = false;
  request.session_id = "s1";
  EXPECT_EQ(CompletionRequestBody(request)["session_id"], "s1");
}

TEST(CompletionRequestBodyTest, APromptOfTokenIdsIsAListOfIds) {
  BenchRequest request;
  request.prompt_tokens = {17, 0, 255};
  request.max_tokens = 4;
  EXPECT_EQ(CompletionRequestBody(request)["prompt"], nlohmann::json::array({17, 0, 255}));
  request.prompt_tokens = {42};  // one id is still a list, not a string
  EXPECT_EQ(CompletionRequestBody(request)["prompt"], nlohmann::json::array({42}));
}

TEST(ParseModelsVocabularyTest, ReadsTheSizeAndTheSpecialRanges) {
  absl::StatusOr<BenchVocabulary> v = ParseModelsVocabulary(
      R"({"object":"list","data":[{"id":"m","vocab_size":65536,)"
      R"("special_token_ranges":[{"begin":0,"end":1},{"begin":65530,"end":65536}]}]})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->vocab_size, 65536);
  EXPECT_EQ(v->special_ranges,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {65530, 65536}}));
  // llama.cpp's llama-server: meta.n_vocab, no special ranges.
  v = ParseModelsVocabulary(
      R"({"object":"list","data":[{"id":"m.gguf","object":"model","owned_by":"llamacpp",)"
      R"("meta":{"vocab_type":5,"n_vocab":65536,"n_ctx":4096}}]})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->vocab_size, 65536);
  EXPECT_TRUE(v->special_ranges.empty());
  // A server that reports no vocabulary cannot take prompts of ids from the
  // bench: the error says what to do instead.
  for (const char* body : {R"({"object":"list","data":[{"id":"m"}]})", "{}", "not json",
                           R"({"data":[{"vocab_size":5,"special_token_ranges":[[0,1]]}]})"}) {
    absl::StatusOr<BenchVocabulary> bad = ParseModelsVocabulary(body);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << body;
  }
  EXPECT_NE(ParseModelsVocabulary("{}").status().message().find("--prompt_mode=text"),
            std::string::npos);
}

TEST(ApplyCompletionEventTest, PiecesUsageSessionAndDone) {
  BenchOutcome outcome;
  PieceClock clock(absl::Now());
  const auto chunk = [](const std::string& text, const std::string& finish) {
    return "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"session_id\":\"s7\","
           "\"choices\":[{\"index\":0,\"text\":\"" +
           text + "\",\"logprobs\":null,\"finish_reason\":" + finish + "}]}";
  };
  EXPECT_FALSE(ApplyCompletionEvent(chunk("To", "null"), clock, outcome));
  EXPECT_GE(outcome.ttft_ms, 0);
  EXPECT_EQ(outcome.session_id, "s7");
  EXPECT_FALSE(ApplyCompletionEvent(chunk(" be", "null"), clock, outcome));
  EXPECT_FALSE(ApplyCompletionEvent(chunk("", "\"length\""), clock, outcome));  // no piece
  EXPECT_EQ(outcome.itl_ms.size(), 1u);
  EXPECT_FALSE(
      ApplyCompletionEvent("{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,"
                           "\"total_tokens\":8}}",
                           clock, outcome));
  EXPECT_EQ(outcome.output_tokens, 3);
  EXPECT_EQ(outcome.prompt_tokens, 5);
  EXPECT_TRUE(ApplyCompletionEvent("[DONE]", clock, outcome));
  EXPECT_TRUE(outcome.ok());
}

TEST(ApplyCompletionEventTest, AnErrorEventOrGarbageFailsTheRequest) {
  PieceClock clock(absl::Now());
  BenchOutcome errored;
  ApplyCompletionEvent("{\"error\":{\"message\":\"draining\",\"type\":\"x\",\"code\":503}}", clock,
                       errored);
  EXPECT_EQ(errored.status, "HTTP_503");
  BenchOutcome garbled;
  ApplyCompletionEvent("{not json", clock, garbled);
  EXPECT_EQ(garbled.status, "UNKNOWN");
}

}  // namespace
}  // namespace linserve
