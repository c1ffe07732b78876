// End to end: a real linserve process on loopback, a real gRPC client.
// Streaming, determinism inside batches, UTF-8, logprobs, and agreement with
// the engine's own non-streamed Generate.

#include <signal.h>

#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/transformer/transformer_model.h"
#include "engine/generation/one_shot_generation.h"
#include "engine/text/tokenizer.h"
#include "engine/text/utf8_assembler.h"
#include "server/requests/request_validation.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A model that takes a BOS: the server must put it first (the other
    // suites' models take none, as the shipped one).
    model_dir_ = new std::string(*WriteTinyModel(FreshDir("generate-model"), 7, /*add_bos=*/true));
    // The warm-up the other suites' servers skip.
    auto server = ServerProcess::Start({"--model=" + *model_dir_,
                                        "--store_dir=" + FreshDir("generate-store"),
                                        "--stream_buffer_messages=4", "--max_batch=32",
                                        "--warmup_steps=16"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_dir_;
  }

  static std::string* model_dir_;
  static ServerProcess* server_;
};

std::string* GenerateTest::model_dir_ = nullptr;
ServerProcess* GenerateTest::server_ = nullptr;

TEST_F(GenerateTest, TheServerWarmsUpBeforeItSaysServing) {
  int warmed_up = -1, serving = -1;
  const std::vector<std::string> log = server_->Log();
  for (int i = 0; i < static_cast<int>(log.size()); ++i) {
    if (absl::StrContains(log[i], "\"event\":\"warmed_up\"")) {
      warmed_up = i;
      EXPECT_EQ(nlohmann::json::parse(log[i])["steps"], 16) << log[i];
    }
    if (absl::StrContains(log[i], "\"event\":\"serving\"")) serving = i;
  }
  ASSERT_GE(warmed_up, 0) << "no warmed_up event";
  EXPECT_LT(warmed_up, serving);
}

TEST_F(GenerateTest, StreamedTextEqualsTheEnginesNonStreamedResult) {
  auto stub = server_->Stub();
  const v1::GenerateRequest request = MakeRequest("To be, or not", "", 200, 1234);
  GenerateOutcome outcome = RunGenerate(*stub, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  ASSERT_TRUE(outcome.has_finished);
  EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 200);
  EXPECT_EQ(outcome.finished.usage().prompt_tokens(), 14);  // BOS + 13 bytes
  EXPECT_EQ(outcome.finished.seed(), 1234u);

  auto model = TransformerModel::Load(*model_dir_, LoadOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  State state = (*model)->NewState();
  SamplingParams params;
  params.temperature = 0.8f;
  params.seed = 1234;
  params.max_new_tokens = 200;
  params.ignore_eos = true;
  auto expected = Generate(**model, state, (*model)->tokenizer().Encode("To be, or not", /*starts_text=*/true),
                           params);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(outcome.text, expected->text);
}

TEST_F(GenerateTest, PiecesArriveBeforeTheCallEndsAndAreWholeUtf8) {
  // 2,000 tokens cannot all fit the narrow window and the 4-message stream
  // buffer: after reading one message the call must still be running,
  // paused for this reader.
  auto stub = NarrowWindowStub(server_->address());
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, MakeRequest("héllo → 世界 ", "", 2000, 99, 1.5f));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_FALSE(first.has_finished());
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(MetricValue(*metrics, "linserve_active_requests"), 1);

  // Meanwhile other requests are served: a slow reader stalls only itself.
  auto other = server_->Stub();
  GenerateOutcome quick = RunGenerate(*other, MakeRequest("x", "", 50, 3));
  EXPECT_TRUE(quick.status.ok());
  EXPECT_EQ(quick.finished.usage().generated_tokens(), 50);

  int pieces = 1;
  std::string text = first.text();
  EXPECT_TRUE(ValidateUtf8("piece", first.text()).ok());
  v1::GenerateResponse response;
  v1::Finished finished;
  while (reader->Read(&response)) {
    EXPECT_TRUE(ValidateUtf8("piece", response.text()).ok()) << response.text();
    text += response.text();
    if (response.has_finished()) finished = response.finished();
    ++pieces;
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finished.usage().generated_tokens(), 2000);
  // A random model writes invalid UTF-8 too: those bytes come out as U+FFFD,
  // and a piece never splits a character, so there are fewer pieces than
  // tokens but many more than one.
  EXPECT_GT(pieces, 100);
  EXPECT_TRUE(ValidateUtf8("text", text).ok());
}

// docs/DESIGN.md, "What is bit-identical", row "decode": a seeded request's
// tokens alone and inside a batch of 16 are the same.
TEST_F(GenerateTest, SameSeedSameTokensAloneAndInsideABatchOf16) {
  auto stub = server_->Stub();
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 16; ++i) {
    requests.push_back(MakeRequest("Prompt number " + std::to_string(i % 4), "", 64 + 8 * i,
                                   1000 + i, 0.9f));
  }
  std::vector<std::string> alone;
  for (const auto& request : requests) {
    GenerateOutcome outcome = RunGenerate(*stub, request);
    ASSERT_TRUE(outcome.status.ok());
    alone.push_back(outcome.text);
  }
  std::vector<std::string> batched(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto own = server_->Stub();
      batched[i] = RunGenerate(*own, requests[i]).text;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  // The concurrent requests really shared decode steps.
  EXPECT_GT(MetricValue(*metrics, "linserve_batch_size_sum"),
            MetricValue(*metrics, "linserve_batch_size_count"));
  // Where those steps' time went: every phase happened (turns joined and
  // left the batch, so it was restacked; they finished), and took time.
  for (const char* phase :
       {"restack", "engine", "prefill", "sampling", "emission", "finish", "scheduling"}) {
    const std::string labels = absl::StrCat("{phase=\"", phase, "\"}");
    EXPECT_GT(MetricValue(*metrics, "linserve_step_phase_seconds_count" + labels), 0) << phase;
    EXPECT_GT(MetricValue(*metrics, "linserve_step_phase_seconds_sum" + labels), 0) << phase;
  }
}

TEST_F(GenerateTest, LogprobsDescribeEachSampledToken) {
  auto stub = server_->Stub();
  v1::GenerateRequest request = MakeRequest("abc", "", 20, 5, 0.0f);
  request.set_logprobs(true);
  request.set_top_logprobs(3);
  GenerateOutcome outcome = RunGenerate(*stub, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  int tokens = 0;
  for (const auto& message : outcome.messages) {
    for (const auto& token : message.tokens()) {
      ++tokens;
      ASSERT_EQ(token.top_size(), 3);
      EXPECT_LE(token.token().logprob(), 0.0f);
      EXPECT_GE(token.top(0).logprob(), token.top(1).logprob());
      // Greedy: the sampled token is the most likely one.
      EXPECT_EQ(token.token().token(), token.top(0).token());
    }
  }
  EXPECT_EQ(tokens, 20);
}

// The bytes of every sampled token of a run with logprobs on, in order.
std::vector<std::string> TokenBytes(const GenerateOutcome& outcome) {
  std::vector<std::string> tokens;
  for (const auto& m : outcome.messages) {
    for (const auto& t : m.tokens()) tokens.push_back(t.token().text());
  }
  return tokens;
}

TEST_F(GenerateTest, StopSequenceEndsTheTurnBeforeIt) {
  auto stub = server_->Stub();
  // What the model writes without the stop sequence (same prompt and seed,
  // greedy): the bytes of each sampled token.
  v1::GenerateRequest free_request = MakeRequest("q", "", 40, 11, 0.0f);
  free_request.set_logprobs(true);
  GenerateOutcome free_run = RunGenerate(*stub, free_request);
  ASSERT_TRUE(free_run.status.ok()) << free_run.status.error_message();
  const std::vector<std::string> free_tokens = TokenBytes(free_run);
  std::string raw;
  for (const std::string& bytes : free_tokens) raw += bytes;
  ASSERT_GE(raw.size(), 30u);
  // Stop on three bytes from the middle; the turn stops at their first
  // occurrence (at byte 20 or earlier), with the token that completes it.
  const std::string stop = raw.substr(20, 3);
  const size_t at = raw.find(stop);
  ASSERT_LE(at, 20u);
  size_t tokens_to_stop = 0;
  for (size_t bytes = 0; bytes < at + stop.size(); ++tokens_to_stop) {
    bytes += free_tokens[tokens_to_stop].size();
  }

  v1::GenerateRequest request = MakeRequest("q", "", 40, 11, 0.0f);
  request.add_stop(stop);
  request.set_logprobs(true);
  GenerateOutcome stopped = RunGenerate(*stub, request);
  ASSERT_TRUE(stopped.status.ok()) << stopped.status.error_message();
  EXPECT_EQ(stopped.finished.reason(), v1::FINISH_REASON_STOP);
  // The same tokens as the free run, up to the one that completed the stop.
  EXPECT_EQ(stopped.finished.usage().generated_tokens(), static_cast<int32_t>(tokens_to_stop));
  const std::vector<std::string> stopped_tokens = TokenBytes(stopped);
  EXPECT_EQ(stopped_tokens, std::vector<std::string>(free_tokens.begin(),
                                                     free_tokens.begin() + tokens_to_stop));
  // The text is exactly the bytes before the stop sequence, as UTF-8 (what
  // the server streams of any bytes), and never holds the stop sequence.
  Utf8Assembler assembler;
  std::string expected = assembler.Push(raw.substr(0, at));
  expected += assembler.Flush();
  EXPECT_EQ(stopped.text, expected);
  EXPECT_EQ(stopped.text.find(stop), std::string::npos);
  // Without the stop sequence the same turn wrote on through it.
  EXPECT_EQ(free_run.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_GT(free_tokens.size(), tokens_to_stop);
}

}  // namespace
}  // namespace linserve
