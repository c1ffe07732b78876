// End to end: overload, metrics, health and shutdown of a real server process.

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus Health(grpc::Channel& channel) {
  auto stub = grpc::health::v1::Health::NewStub(
      std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  grpc::health::v1::HealthCheckRequest request;
  HealthCheckResponse response;
  if (!stub->Check(&context, request, &response).ok()) return HealthCheckResponse::UNKNOWN;
  return response.status();
}

std::string ModelDir() {
  static const std::string* dir = new std::string(*WriteTinyModel(FreshDir("lifecycle-model"), 5));
  return *dir;
}

TEST(LifecycleTest, OverloadAdmitsExactlyTheCapacityAndRefusesTheRestAtOnce) {
  // Capacity C = max_batch + max_queued_requests = 4. Admitted streams that
  // are not read pause (2-message buffer), so nothing finishes and frees a
  // place until every one of the 10 x C requests has had its answer.
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("overload-store"),
                                      "--max_batch=2", "--max_queued_requests=2",
                                      "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  constexpr int kRequests = 40;
  constexpr int kTokens = 300;
  std::atomic<int> refused{0};
  std::atomic<bool> release{false};
  std::vector<grpc::StatusCode> codes(kRequests);
  std::vector<int> generated(kRequests, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      auto stub = (*server)->Stub();
      grpc::ClientContext context;
      auto reader = stub->Generate(&context, MakeRequest("load", "", kTokens, 100 + i));
      v1::GenerateResponse response;
      bool streaming = reader->Read(&response);
      if (!streaming) ++refused;
      while (streaming && !release) absl::SleepFor(absl::Milliseconds(5));
      while (streaming) {
        if (response.has_finished()) generated[i] = response.finished().usage().generated_tokens();
        streaming = reader->Read(&response);
      }
      codes[i] = reader->Finish().error_code();
    });
  }
  for (int i = 0; i < 2000 && refused < kRequests - 4; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(refused.load(), kRequests - 4);
  release = true;
  for (auto& t : threads) t.join();
  int ok = 0, exhausted = 0;
  for (int i = 0; i < kRequests; ++i) {
    if (codes[i] == grpc::StatusCode::OK) {
      ++ok;
      EXPECT_EQ(generated[i], kTokens);
    }
    exhausted += codes[i] == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(exhausted, kRequests - 4);

  auto stub = (*server)->Stub();
  GenerateOutcome later = RunGenerate(*stub, MakeRequest("later", "", 10, 1));
  EXPECT_TRUE(later.status.ok());
  GenerateOutcome refused_one = RunGenerate(*stub, MakeRequest("", "", 10, 1));
  EXPECT_EQ(refused_one.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // The metrics tell the same story.
  auto metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto value = [&](const std::string& series) { return MetricValue(*metrics, series); };
  EXPECT_EQ(value("linserve_requests_total{code=\"OK\",method=\"Generate\"}"), 5);
  EXPECT_EQ(value("linserve_requests_total{code=\"RESOURCE_EXHAUSTED\",method=\"Generate\"}"),
            kRequests - 4);
  EXPECT_EQ(value("linserve_requests_total{code=\"INVALID_ARGUMENT\",method=\"Generate\"}"), 1);
  EXPECT_EQ(value("linserve_rejections_total{reason=\"queue_full\"}"), kRequests - 4);
  EXPECT_EQ(value("linserve_generated_tokens_total"), 4 * kTokens + 10);
  // "load" four times, "later" (the model takes no BOS).
  EXPECT_EQ(value("linserve_prompt_tokens_total"), 4 * 4 + 5);
  EXPECT_EQ(value("linserve_time_to_first_token_seconds_count"), 5);
  EXPECT_EQ(value("linserve_time_per_output_token_seconds_count"), 5);
  EXPECT_EQ(value("linserve_request_duration_seconds_count"), 5);
  EXPECT_EQ(value("linserve_queue_time_seconds_count"), 5);
  EXPECT_GT(value("linserve_batch_size_count"), 0);
  EXPECT_EQ(value("linserve_active_requests"), 0);
  EXPECT_EQ(value("linserve_queue_depth"), 0);
  EXPECT_GT(value("linserve_state_bytes_per_session"), 0);
}

TEST(LifecycleTest, SessionMetricsCountSavesRestoresAndPlaces) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("spill-store"),
                                      "--max_sessions_in_memory=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto s = CreateSession(*stub, "hello");
    ASSERT_TRUE(s.ok()) << s.status();
    ids.push_back(s->id());
  }
  // Two of the four states spilled to the store; a turn on the oldest
  // restores it (spilling another).
  auto metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "linserve_sessions{place=\"device\"}"), 2);
  EXPECT_EQ(MetricValue(*metrics, "linserve_sessions{place=\"store\"}"), 2);
  EXPECT_EQ(MetricValue(*metrics, "linserve_session_save_seconds_count"), 4);
  GenerateOutcome turn = RunGenerate(*stub, MakeRequest(" again", ids[0], 5, 1));
  ASSERT_TRUE(turn.status.ok()) << turn.status.error_message();
  metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "linserve_session_restore_seconds_count"), 1);
  EXPECT_EQ(MetricValue(*metrics, "linserve_session_save_seconds_count"), 5);
  EXPECT_EQ(MetricValue(*metrics, "linserve_sessions{place=\"device\"}"), 2);
}

TEST(LifecycleTest, IdleSessionsExpireAfterTheTtl) {
  const std::string store = FreshDir("ttl-store");
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store,
                                      "--session_ttl_seconds=1"});
  ASSERT_TRUE(server.ok());
  auto stub = (*server)->Stub();
  auto session = CreateSession(*stub, "short-lived");
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store), {}), 1);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"sessions_expired\"", absl::Seconds(10)));
  grpc::ClientContext context;
  v1::GetSessionRequest get;
  get.set_session_id(session->id());
  v1::Session gone;
  EXPECT_EQ(stub->GetSession(&context, get, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  // The writer deletes the file right after the sweep.
  for (int i = 0; i < 100 && !std::filesystem::is_empty(store); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(std::filesystem::is_empty(store));
}

TEST(LifecycleTest, HealthGoesServingAfterLoadAndNotServingOnSigterm) {
  const std::string store = FreshDir("health-store");
  // A long warm-up keeps the model "loading" long enough to see it.
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store,
                                      "--warmup_steps=1500", "--shutdown_grace_seconds=30",
                                      "--stream_buffer_messages=2"},
                                     absl::Seconds(120), "listening");
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::Channel& channel = *(*server)->channel();
  std::vector<HealthCheckResponse::ServingStatus> seen;
  for (int i = 0; i < 6000; ++i) {
    const auto status = Health(channel);
    if (seen.empty() || seen.back() != status) seen.push_back(status);
    if (status == HealthCheckResponse::SERVING) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(seen, (std::vector<HealthCheckResponse::ServingStatus>{
                      HealthCheckResponse::NOT_SERVING, HealthCheckResponse::SERVING}));
  // Before the model is loaded every RPC is UNAVAILABLE; after, it works.
  auto stub = (*server)->Stub();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = CreateSession(*stub, "context " + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.status();
    ids.push_back(s->id());
  }

  // A long turn in flight when SIGTERM arrives: it may finish.
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, MakeRequest("", ids[0], 2000, 9));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"shutting_down\"", absl::Seconds(10)));
  EXPECT_EQ(Health(channel), HealthCheckResponse::NOT_SERVING);
  GenerateOutcome refused = RunGenerate(*stub, MakeRequest("new", "", 5, 1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::Finished finished;
  while (reader->Read(&response)) {
    if (response.has_finished()) finished = response.finished();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ((*server)->Wait(), 0);

  // Every session is on disk, the streamed one after its finished turn.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store), {}), 3);
  auto restarted = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store});
  ASSERT_TRUE(restarted.ok());
  auto again = (*restarted)->Stub();
  grpc::ClientContext get_context;
  v1::GetSessionRequest get;
  get.set_session_id(ids[0]);
  v1::Session found;
  ASSERT_TRUE(again->GetSession(&get_context, get, &found).ok());
  EXPECT_EQ(found.position(), finished.position());
}

TEST(LifecycleTest, ShutdownCutsStreamsAtTheGraceDeadline) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("cut-store"),
                                      "--shutdown_grace_seconds=1", "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok());
  auto stub = (*server)->Stub();
  auto session = CreateSession(*stub, "keep me");
  ASSERT_TRUE(session.ok());
  // Never read past the first message: the turn pauses and cannot finish.
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, MakeRequest("", session->id(), 4000, 2));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"drain_deadline\"", absl::Seconds(20)));
  v1::Finished finished;
  while (reader->Read(&response)) {
    if (response.has_finished()) finished = response.finished();
  }
  reader->Finish();
  EXPECT_EQ(finished.reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_EQ((*server)->Wait(), 0);
}

}  // namespace
}  // namespace linserve
