// End to end: servers sharing a real Redis as their session store.

#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/gated_proxy.h"
#include "tests/server/redis_process.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::unique_ptr<ServerProcess> StartOn(const std::string& store) {
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(), "--store=" + store});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string Turn(v1::Linserve::Stub& stub, const std::string& session, const std::string& prompt,
                 uint64_t seed) {
  GenerateOutcome outcome = RunGenerate(stub, MakeRequest(prompt, session, 30, seed));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  return outcome.text;
}

class RedisServersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisProcess::Available()) GTEST_SKIP() << "redis-server is not installed";
    auto redis = RedisProcess::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
  }
  std::unique_ptr<RedisProcess> redis_;
};

TEST_F(RedisServersTest, ASessionStartedOnOneServerContinuesOnAnotherIdentically) {
  auto a = StartOn(redis_->url());
  auto b = StartOn(redis_->url());
  auto reference = StartOn("disk");  // a single server, for what the answer must be
  ASSERT_TRUE(a && b && reference);
  auto stub_a = a->Stub(), stub_b = b->Stub(), stub_ref = reference->Stub();
  auto shared = CreateSession(*stub_a, "ROMEO:\n");
  auto alone = CreateSession(*stub_ref, "ROMEO:\n");
  ASSERT_TRUE(shared.ok() && alone.ok());
  EXPECT_EQ(Turn(*stub_a, shared->id(), "", 5), Turn(*stub_ref, alone->id(), "", 5));
  // B never saw this session: it comes from Redis, at the turn A finished.
  EXPECT_EQ(Turn(*stub_b, shared->id(), "\n\nJULIET:\n", 0),
            Turn(*stub_ref, alone->id(), "\n\nJULIET:\n", 0));
}

TEST_F(RedisServersTest, AKilledServersSessionsLiveOnInRedis) {
  std::string id, expected;
  {
    auto a = StartOn(redis_->url());
    ASSERT_NE(a, nullptr);
    auto stub = a->Stub();
    auto session = CreateSession(*stub, "KING HENRY:\n");
    ASSERT_TRUE(session.ok());
    id = session->id();
    Turn(*stub, id, "", 1);
    auto twin_file = ExportSession(*stub, id);
    ASSERT_TRUE(twin_file.ok());
    v1::Session twin;
    ASSERT_TRUE(ImportSession(*stub, *twin_file, &twin).ok());
    expected = Turn(*stub, twin.id(), " and", 0);
    a->Signal(SIGKILL);
    a->Wait();
  }
  auto b = StartOn(redis_->url());
  ASSERT_NE(b, nullptr);
  auto stub = b->Stub();
  EXPECT_EQ(Turn(*stub, id, " and", 0), expected);
}

TEST_F(RedisServersTest, RedisDownIsUnavailableAndServingResumesWhenItReturns) {
  auto server = StartOn(redis_->url());
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  const int port = redis_->port();
  redis_->Kill();
  // A session the server does not hold must come from the store: unreachable.
  GenerateOutcome down =
      RunGenerate(*stub, MakeRequest("x", "0123456789abcdef0123456789abcdef", 3, 1));
  EXPECT_EQ(down.status.error_code(), grpc::StatusCode::UNAVAILABLE) << down.status.error_message();
  // Stateless work does not need the store at all.
  EXPECT_TRUE(RunGenerate(*stub, MakeRequest("x", "", 3, 1)).status.ok());
  auto back = RedisProcess::Start({}, port);
  ASSERT_TRUE(back.ok());
  redis_ = *std::move(back);
  auto session = CreateSession(*stub, "hello");
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_TRUE(RunGenerate(*stub, MakeRequest(" again", session->id(), 3, 1)).status.ok());
}


TEST_F(RedisServersTest, ARedisTimeoutOutsideItsRangeIsRefusedAtStart) {
  for (const char* timeout : {"0", "-1", "nan", "inf", "3601"}) {
    ProcessResult run = RunProcess({LinserveBinary(), "--model=" + DefaultModelDir(),
                                    "--store=" + redis_->url(), "--listen=127.0.0.1:0",
                                    "--http_listen=", "--metrics_port=-1",
                                    std::string("--redis_timeout_seconds=") + timeout});
    EXPECT_EQ(run.exit_code, 1) << timeout;
    EXPECT_NE(run.err.find("is outside (0, 3600]"), std::string::npos) << run.err;
  }
}

// The engine thread never waits for the store: with Redis stalled behind a
// closed gate, and a session lookup stuck in it, a session turn already
// running keeps decoding and a stateless turn runs to its end. Decided by
// events: the lookup reached the gate; the streams delivered while it held.
TEST_F(RedisServersTest, DecodingGoesOnWhileTheStoreStalls) {
  auto proxy = GatedProxy::Start(redis_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  // Redis commands wait as long as the gate holds them (the default gives
  // up after 2 s and answers UNAVAILABLE).
  auto started = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                       "--store=" + (*proxy)->redis_url(),
                                       "--redis_timeout_seconds=600"});
  ASSERT_TRUE(started.ok()) << started.status();
  auto server = *std::move(started);
  auto stub = server->Stub();
  auto session = CreateSession(*stub, "ROMEO:\n");
  ASSERT_TRUE(session.ok()) << session.status();

  // A long turn on a 1 KB receive window: it advances only as it is read
  // (about 160 messages fit in the window and the server's buffer).
  const auto narrow = NarrowWindowStub(server->address());
  grpc::ClientContext context;
  auto reader = narrow->Generate(&context, MakeRequest("go", session->id(), 4000, 2));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response)) << reader->Finish().error_message();  // running, leased

  (*proxy)->Close();
  // A session this server does not hold: it must be looked up in the store.
  const std::string unknown = "0123456789abcdef0123456789abcdef";
  GenerateOutcome lookup;
  std::atomic<bool> looked_up{false};
  std::thread stuck([&] {
    lookup = RunGenerate(*stub, MakeRequest("x", unknown, 3, 1), absl::Minutes(10));
    looked_up = true;
  });
  // The store knows sessions by a hash of tenant and id; a lookup is the
  // only MGET this server sends now.
  if (!(*proxy)->WaitHeld("MGET", absl::Minutes(2))) {
    (*proxy)->Open();
    context.TryCancel();
    stuck.join();
    FAIL() << "the lookup never reached Redis";
  }

  // Failure guards only: on a server whose engine waits for the store,
  // these never finish while the gate is closed.
  absl::Notification streamed;
  int read_while_stalled = 0;
  std::thread reading([&] {
    while (read_while_stalled < 1000 && reader->Read(&response)) ++read_while_stalled;
    streamed.Notify();
  });
  const bool kept_pace = streamed.WaitForNotificationWithTimeout(absl::Minutes(2));
  GenerateOutcome stateless;
  if (kept_pace) stateless = RunGenerate(*stub, MakeRequest("y", "", 20, 1), absl::Minutes(2));
  EXPECT_TRUE(kept_pace) << "the running turn stopped while Redis was stalled";
  EXPECT_EQ(read_while_stalled, 1000);
  EXPECT_FALSE(looked_up) << "the lookup was answered before the gate opened";
  EXPECT_TRUE(stateless.status.ok()) << stateless.status.error_message();
  EXPECT_TRUE(stateless.has_finished);
  EXPECT_TRUE((*proxy)->WaitHeld("MGET", absl::ZeroDuration())) << "the gate let it through";

  (*proxy)->Open();
  context.TryCancel();
  reading.join();
  reader->Finish();  // CANCELLED: the turn still had tokens to go
  stuck.join();
  EXPECT_EQ(lookup.status.error_code(), grpc::StatusCode::NOT_FOUND) << lookup.status.error_message();
  // The store answers again: the session goes on.
  EXPECT_TRUE(RunGenerate(*stub, MakeRequest(" again", session->id(), 3, 1)).status.ok());
}

}  // namespace
}  // namespace linserve
