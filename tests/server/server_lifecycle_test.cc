// End to end: overload, metrics, health and shutdown of a real server process.

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
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
  // Long enough for any machine: only a server that never answers reaches it.
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  grpc::health::v1::HealthCheckRequest request;
  HealthCheckResponse response;
  if (!stub->Check(&context, request, &response).ok()) return HealthCheckResponse::UNKNOWN;
  return response.status();
}

std::string ModelDir() {
  static const std::string* dir = new std::string(*WriteTinyModel(FreshDir("lifecycle-model"), 5));
  return *dir;
}

// These tests decide by events, never by how fast the machine is: a turn
// that must still run when something happens is one that cannot finish
// before it, because its client does not read and its messages cannot fit in
// the client's HTTP/2 window, or because its token budget is past what any
// machine generates in the time.

// With logprobs and 20 alternatives every sampled token is one message of
// more than 200 bytes, so a few dozen of them overflow the 1 KB window of
// NarrowWindowStub and the server's --stream_buffer_messages behind it: such
// a turn cannot finish while its client does not read.
v1::GenerateRequest WideRequest(const std::string& prompt, const std::string& session_id,
                                int32_t tokens, uint64_t seed) {
  v1::GenerateRequest request = MakeRequest(prompt, session_id, tokens, seed);
  request.set_logprobs(true);
  request.set_top_logprobs(20);
  return request;
}

// A token budget that no machine generates within the test: 2^31 - 1 decode
// steps (the server's cap is raised to allow it).
constexpr int32_t kEndless = INT_MAX;
const char kEndlessCap[] = "--max_new_tokens_cap=2147483647";

// Waits until the server reports a Generate turn paused for its reader and
// its token count stands still between two scrapes 20 ms apart, then
// returns true; false after `timeout`. A turn can pause for an iteration
// while a write is merely in flight, so this tells a stuck write from a slow
// one only as well as the engine thread ran between the scrapes; what a test
// decides after it must not depend on which it was.
bool WaitUntilStalled(const ServerProcess& server, absl::Duration timeout) {
  double last = -1;
  for (const absl::Time give_up = absl::Now() + timeout; absl::Now() < give_up;) {
    absl::StatusOr<std::string> metrics = ScrapeMetrics(server.metrics_port());
    if (!metrics.ok()) return false;
    const double tokens = MetricValue(*metrics, "linserve_generated_tokens_total");
    const bool paused = MetricValue(*metrics, "linserve_paused_requests") == 1;
    if (paused && tokens == last) return true;
    last = paused ? tokens : -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// The position the session has on a fresh server over `store`, or -1.
int64_t PositionAfterRestart(const std::string& store, const std::string& id) {
  auto restarted = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store});
  if (!restarted.ok()) {
    ADD_FAILURE() << restarted.status();
    return -1;
  }
  auto stub = (*restarted)->Stub();
  grpc::ClientContext context;
  v1::GetSessionRequest get;
  get.set_session_id(id);
  v1::Session found;
  const grpc::Status status = stub->GetSession(&context, get, &found);
  if (!status.ok()) {
    ADD_FAILURE() << status.error_message();
    return -1;
  }
  EXPECT_FALSE(found.busy());
  return found.position();
}

TEST(LifecycleTest, OverloadAdmitsExactlyTheCapacityAndRefusesTheRestAtOnce) {
  // Capacity C = max_batch + max_queued_requests = 4. Admitted streams are
  // not read, and 300 wide messages do not fit in the narrow window: they
  // pause (2-message buffer), so nothing finishes and frees a place until
  // every one of the 10 x C requests has had its answer, however fast the
  // machine generates.
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("overload-store"),
                                      "--max_batch=2", "--max_queued_requests=2",
                                      "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  const auto narrow = NarrowWindowStub((*server)->address());
  constexpr int kRequests = 40;
  constexpr int kTokens = 300;
  std::atomic<int> refused{0};
  std::atomic<bool> release{false};
  std::vector<grpc::StatusCode> codes(kRequests);
  std::vector<int> generated(kRequests, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      auto reader = narrow->Generate(&context, WideRequest("load", "", kTokens, 100 + i));
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
  // Only a failure waits the whole minute.
  for (int i = 0; i < 12000 && refused < kRequests - 4; ++i) absl::SleepFor(absl::Milliseconds(5));
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
  // Generate's count of one status code over gRPC.
  auto generates = [&](const std::string& code) {
    return MetricValue(*metrics, "linserve_requests_total{code=\"" + code +
                                     "\",method=\"Generate\",protocol=\"grpc\"}");
  };
  auto value = [&](const std::string& series) { return MetricValue(*metrics, series); };
  EXPECT_EQ(generates("OK"), 5);
  EXPECT_EQ(generates("RESOURCE_EXHAUSTED"), kRequests - 4);
  EXPECT_EQ(generates("INVALID_ARGUMENT"), 1);
  EXPECT_EQ(value("linserve_rejections_total{reason=\"queue_full\"}"), kRequests - 4);
  EXPECT_EQ(value("linserve_generated_tokens_total"), 4 * kTokens + 10);
  // "load" four times, "later" (the model takes no BOS).
  EXPECT_EQ(value("linserve_prompt_tokens_total"), 4 * 4 + 5);
  EXPECT_EQ(value("linserve_time_to_first_token_seconds_count{protocol=\"grpc\"}"), 5);
  EXPECT_EQ(value("linserve_time_per_output_token_seconds_count{protocol=\"grpc\"}"), 5);
  EXPECT_EQ(value("linserve_request_duration_seconds_count{protocol=\"grpc\"}"), 5);
  EXPECT_EQ(value("linserve_queue_time_seconds_count{protocol=\"grpc\"}"), 5);
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
  // Saved before CreateSession answered: one file, or none when a machine
  // slower than the TTL has swept it already (the sweep's log line follows).
  EXPECT_LE(std::distance(std::filesystem::directory_iterator(store), {}), 1);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"sessions_expired\"", absl::Seconds(60)));
  grpc::ClientContext context;
  v1::GetSessionRequest get;
  get.set_session_id(session->id());
  v1::Session gone;
  EXPECT_EQ(stub->GetSession(&context, get, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  // The writer deletes the file right after the sweep (only a failure waits
  // the whole minute).
  for (int i = 0; i < 6000 && !std::filesystem::is_empty(store); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(std::filesystem::is_empty(store));
}

TEST(LifecycleTest, EveryRpcIsUnavailableAndHealthNotServingUntilTheModelIsLoaded) {
  const HeldModel held = HoldModel(ModelDir(), "held-model");
  auto server = ServerProcess::Start(
      {"--model=" + held.dir, "--store_dir=" + FreshDir("held-store")}, absl::Seconds(120),
      "listening");
  ASSERT_TRUE(server.ok()) << server.status();
  // The server listens and is blocked reading config.json.
  grpc::Channel& channel = *(*server)->channel();
  EXPECT_EQ(Health(channel), HealthCheckResponse::NOT_SERVING);
  auto stub = (*server)->Stub();
  const std::string id = "00000000000000000000000000000001";
  std::vector<std::pair<std::string, grpc::Status>> calls;
  calls.emplace_back("Generate", RunGenerate(*stub, MakeRequest("hello", "", 5, 1)).status);
  {
    grpc::ClientContext c;
    v1::CreateSessionRequest r;
    v1::Session out;
    calls.emplace_back("CreateSession", stub->CreateSession(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::GetSessionRequest r;
    r.set_session_id(id);
    v1::Session out;
    calls.emplace_back("GetSession", stub->GetSession(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::ListSessionsRequest r;
    v1::ListSessionsResponse out;
    calls.emplace_back("ListSessions", stub->ListSessions(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::DeleteSessionRequest r;
    r.set_session_id(id);
    v1::DeleteSessionResponse out;
    calls.emplace_back("DeleteSession", stub->DeleteSession(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::ForkSessionRequest r;
    r.set_session_id(id);
    v1::Session out;
    calls.emplace_back("ForkSession", stub->ForkSession(&c, r, &out));
  }
  {
    absl::StatusOr<std::string> file = ExportSession(*stub, id);
    calls.emplace_back("ExportSession",
                       grpc::Status(static_cast<grpc::StatusCode>(file.status().code()),
                                    std::string(file.status().message())));
  }
  {
    v1::Session out;
    calls.emplace_back("ImportSession", ImportSession(*stub, "not read", &out));
  }
  {
    grpc::ClientContext c;
    v1::GetModelInfoRequest r;
    v1::ModelInfo out;
    calls.emplace_back("GetModelInfo", stub->GetModelInfo(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::CreateNamedStateRequest r;
    r.set_name("persona");
    r.set_prompt("a prompt");
    v1::NamedState out;
    calls.emplace_back("CreateNamedState", stub->CreateNamedState(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::NamedState out;
    auto writer = stub->UploadNamedState(&c, &out);
    v1::NamedStateChunk chunk;
    chunk.set_name("persona");
    chunk.set_data("not read");
    writer->Write(chunk);
    writer->WritesDone();
    calls.emplace_back("UploadNamedState", writer->Finish());
  }
  {
    grpc::ClientContext c;
    v1::GetNamedStateRequest r;
    r.set_name("persona");
    v1::NamedState out;
    calls.emplace_back("GetNamedState", stub->GetNamedState(&c, r, &out));
  }
  {
    grpc::ClientContext c;
    v1::ListNamedStatesResponse out;
    calls.emplace_back("ListNamedStates",
                       stub->ListNamedStates(&c, v1::ListNamedStatesRequest(), &out));
  }
  {
    grpc::ClientContext c;
    v1::DeleteNamedStateRequest r;
    r.set_name("persona");
    v1::DeleteNamedStateResponse out;
    calls.emplace_back("DeleteNamedState", stub->DeleteNamedState(&c, r, &out));
  }
  // Every method of the service, as the proto lists them, each refused (a
  // new RPC fails here until it is added above).
  const google::protobuf::ServiceDescriptor* service =
      v1::GenerateRequest::descriptor()->file()->FindServiceByName("Linserve");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(calls.size(), static_cast<size_t>(service->method_count()));
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_EQ(calls[i].first, service->method(i)->name());
  }
  auto metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (const auto& [method, status] : calls) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << method;
    EXPECT_NE(status.error_message().find("the model is still loading"), std::string::npos)
        << method << ": " << status.error_message();
    EXPECT_EQ(MetricValue(*metrics, "linserve_requests_total{code=\"UNAVAILABLE\",method=\"" +
                                        method + "\",protocol=\"grpc\"}"),
              1)
        << method;
  }
  EXPECT_EQ(Health(channel), HealthCheckResponse::NOT_SERVING);

  // Once the model is in, health says SERVING and the same calls work.
  ReleaseModel(held);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"serving\"", absl::Seconds(120)));
  EXPECT_EQ(Health(channel), HealthCheckResponse::SERVING);
  grpc::ClientContext c;
  v1::GetModelInfoRequest r;
  v1::ModelInfo info;
  EXPECT_TRUE(stub->GetModelInfo(&c, r, &info).ok());
  EXPECT_TRUE(RunGenerate(*stub, MakeRequest("hello", "", 5, 1)).status.ok());
  EXPECT_TRUE(CreateSession(*stub, "hello").ok());
}

TEST(LifecycleTest, SigtermStopsServingAndLetsARunningTurnFinish) {
  const std::string store = FreshDir("health-store");
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store,
                                      "--shutdown_grace_seconds=120",
                                      "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::Channel& channel = *(*server)->channel();
  EXPECT_EQ(Health(channel), HealthCheckResponse::SERVING);
  auto stub = (*server)->Stub();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = CreateSession(*stub, "context " + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.status();
    ids.push_back(s->id());
  }

  // A turn in flight when SIGTERM arrives: unread, its 200 wide messages
  // cannot all leave, so it is still running at the signal; read on, it
  // finishes inside the grace (200 decode steps against 120 s).
  const auto narrow = NarrowWindowStub((*server)->address());
  grpc::ClientContext context;
  auto reader = narrow->Generate(&context, WideRequest("", ids[0], 200, 9));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"shutting_down\"", absl::Seconds(60)));
  EXPECT_TRUE((*server)->WaitForLog("\"running_requests\":1", absl::ZeroDuration()));
  EXPECT_EQ(Health(channel), HealthCheckResponse::NOT_SERVING);
  GenerateOutcome refused = RunGenerate(*stub, MakeRequest("new", "", 5, 1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::Finished finished;
  while (reader->Read(&response)) {
    if (response.has_finished()) finished = response.finished();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(finished.usage().generated_tokens(), 200);
  EXPECT_EQ((*server)->Wait(), 0);
  EXPECT_FALSE((*server)->WaitForLog("drain_deadline", absl::ZeroDuration()));

  // Every session is on disk, the streamed one after its finished turn.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store), {}), 3);
  EXPECT_EQ(PositionAfterRestart(store, ids[0]), finished.position());
}

TEST(LifecycleTest, ShutdownCutsStreamsAtTheGraceDeadline) {
  const std::string store = FreshDir("cut-store");
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store,
                                      "--shutdown_grace_seconds=1", kEndlessCap});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  auto session = CreateSession(*stub, "keep me");
  ASSERT_TRUE(session.ok()) << session.status();
  // A client reading everything, on a turn no machine finishes in the grace
  // second: it runs until the deadline cuts it.
  absl::Notification first;
  v1::Finished finished;
  int64_t messages = 0;
  grpc::Status status;
  std::thread client([&] {
    grpc::ClientContext context;
    auto reader = stub->Generate(&context, MakeRequest("", session->id(), kEndless, 2));
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (++messages == 1) first.Notify();
      if (response.has_finished()) finished = response.finished();
    }
    status = reader->Finish();
    if (!first.HasBeenNotified()) first.Notify();
  });
  first.WaitForNotification();
  (*server)->Signal(SIGTERM);
  EXPECT_TRUE((*server)->WaitForLog("\"event\":\"drain_deadline\"", absl::Seconds(60)));
  EXPECT_TRUE((*server)->WaitForLog("\"cut_requests\":1", absl::ZeroDuration()));
  client.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(finished.reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_GT(finished.usage().generated_tokens(), 0);
  EXPECT_EQ((*server)->Wait(), 0);
  // The cut turn left the session at its last finished turn.
  EXPECT_EQ(PositionAfterRestart(store, session->id()), session->position());
}

TEST(LifecycleTest, AClientThatStopsReadingNeverKeepsTheServerFromStopping) {
  const std::string store = FreshDir("stalled-store");
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + store,
                                      "--shutdown_grace_seconds=1", kEndlessCap});
  ASSERT_TRUE(server.ok()) << server.status();
  auto session = CreateSession(*(*server)->Stub(), "stalled");
  ASSERT_TRUE(session.ok()) << session.status();
  // The client reads one message and no more, and keeps its connection
  // open: once its window is full the server's write cannot complete, and
  // the turn sits paused.
  const auto narrow = NarrowWindowStub((*server)->address());
  grpc::ClientContext context;
  auto reader = narrow->Generate(&context, WideRequest("", session->id(), kEndless, 3));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_TRUE(WaitUntilStalled(**server, absl::Seconds(120)));
  (*server)->Signal(SIGTERM);
  EXPECT_TRUE((*server)->WaitForLog("\"event\":\"drain_deadline\"", absl::Seconds(60)));
  EXPECT_TRUE((*server)->WaitForLog("\"cut_requests\":1", absl::ZeroDuration()));
  ASSERT_TRUE((*server)->WaitForLog("\"event\":\"stopped\"", absl::Seconds(60)));
  EXPECT_EQ((*server)->Wait(), 0);
  // Whatever the client gets now, the server is gone and the session kept
  // its last finished turn.
  while (reader->Read(&response)) {
  }
  reader->Finish();
  EXPECT_EQ(PositionAfterRestart(store, session->id()), session->position());
}

}  // namespace
}  // namespace linserve
