// End to end: servers sharing a real Redis as their session store.

#include <signal.h>

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/server/e2e_helpers.h"
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

}  // namespace
}  // namespace linserve
