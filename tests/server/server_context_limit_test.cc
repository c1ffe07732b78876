// End to end: the softmax baseline's KV cache grows 8 KiB a token at the
// default shape, so the server bounds it (--max_context_tokens), trims a
// session's cache to its position and reports its real bytes. Constant-state
// kinds have no such bound.

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"
#include "tests/tiny_model.h"

namespace linserve {
namespace {

constexpr int kMaxContext = 40;

ModelConfig TinySoftmaxConfig() {
  ModelConfig config = TinyModelConfig();
  config.attention.kind = AttentionKind::kSoftmax;
  return config;
}

std::unique_ptr<ServerProcess> StartWith(const ModelConfig& config, const std::string& name) {
  auto dir = WriteModel(FreshDir(name + "-model"), config, 5);
  if (!dir.ok()) return nullptr;
  auto server = ServerProcess::Start({"--model=" + *dir, "--store_dir=" + FreshDir(name + "-store"),
                                      "--max_context_tokens=" + std::to_string(kMaxContext)});
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(ContextLimitTest, SoftmaxPromptPastTheLimitIsRefusedNamingTheFlag) {
  auto server = StartWith(TinySoftmaxConfig(), "softmax-prompt");
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  GenerateOutcome outcome =
      RunGenerate(*stub, MakeRequest(std::string(kMaxContext + 1, 'a'), "", 4, 1));
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(outcome.status.error_message().find("max_context_tokens = 40"), std::string::npos)
      << outcome.status.error_message();
  // At the limit it runs, and stops there: the state never holds more.
  outcome = RunGenerate(*stub, MakeRequest(std::string(kMaxContext, 'a'), "", 100, 1));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 1);
}

TEST(ContextLimitTest, SoftmaxSessionStopsAtTheLimitThenRefusesMore) {
  auto server = StartWith(TinySoftmaxConfig(), "softmax-session");
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto session = CreateSession(*stub, std::string(10, 'b'));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_EQ(session->position(), 9);  // the last byte is held back for the first turn

  // 10 tokens fed, then the turn may sample until the cache is full.
  GenerateOutcome outcome = RunGenerate(*stub, MakeRequest("", session->id(), 1000, 2));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), kMaxContext - 10 + 1);
  EXPECT_EQ(outcome.finished.position(), kMaxContext);

  // Its real bytes, trimmed to the position: what GetSession reports and
  // the gauges add up (the only session in memory).
  const v1::Session after = GetSession(*stub, session->id());
  EXPECT_EQ(after.position(), kMaxContext);
  auto metrics = ScrapeMetrics(server->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "linserve_resident_state_bytes"), after.state_bytes());
  EXPECT_EQ(MetricValue(*metrics, "linserve_state_bytes_per_session"), after.state_bytes());

  // The pending token alone would take it past the limit.
  outcome = RunGenerate(*stub, MakeRequest("more", session->id(), 4, 3));
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(outcome.status.error_message().find("max_context_tokens"), std::string::npos);
  // Refused, the session is unchanged and free.
  EXPECT_EQ(GetSession(*stub, session->id()).position(), kMaxContext);
  EXPECT_FALSE(GetSession(*stub, session->id()).busy());
}

TEST(ContextLimitTest, ConstantStateKindsHaveNoContextLimit) {
  auto server = StartWith(TinyModelConfig(), "linear-session");
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  GenerateOutcome outcome =
      RunGenerate(*stub, MakeRequest(std::string(3 * kMaxContext, 'c'), "", 2 * kMaxContext, 4));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 2 * kMaxContext);
}

}  // namespace
}  // namespace linserve
