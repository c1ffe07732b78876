// End to end: servers sharing a real Redis as their session store (and the
// store of their named states).

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/gated_proxy.h"
#include "tests/server/http_client.h"
#include "tests/server/redis_process.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::unique_ptr<ServerProcess> StartOn(const std::string& store) {
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(), "--store=" + store});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// A Qwen3.5 model of random weights (the tiny shape), made once.
const std::string& HybridModelDir() {
  static const std::string* dir = [] {
    auto* made = new std::string(FreshDir("redis-qwen35-model"));
    absl::StatusOr<Qwen35Config> config = Qwen35ShapeByName("tiny");
    EXPECT_TRUE(config.ok()) << config.status();
    if (config.ok()) {
      const absl::Status written = WriteRandomQwen35Directory(*config, *made, {});
      EXPECT_TRUE(written.ok()) << written;
    }
    return made;
  }();
  return *dir;
}

// That model with Qwen3.5's own chat template.
std::unique_ptr<ServerProcess> StartHybridOn(const std::string& store) {
  auto server = ServerProcess::Start(
      {"--model=" + HybridModelDir(), "--store=" + store, "--dtype=float32",
       std::string("--chat_template_file=") + LINSERVE_SOURCE_DIR +
           "/tests/engine/jinja/templates/Qwen3.5-4B.jinja"});
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

// A hybrid's session goes between servers whole through Redis: its
// recurrent part, its KV cache, its tokens and its chat messages. A chat
// that sends only its new messages, each turn on the other server, answers
// to the bit as one server alone does.
TEST_F(RedisServersTest, AHybridChatSessionGoesBetweenServersWithItsMessages) {
  auto a = StartHybridOn(redis_->url());
  auto b = StartHybridOn(redis_->url());
  auto reference = StartHybridOn("disk");
  ASSERT_TRUE(a && b && reference);
  HttpTestClient on_a(a->http_port()), on_b(b->http_port()), alone(reference->http_port());
  std::string shared_id, alone_id;
  const std::vector<std::string> questions = {"Hi", "Why?", "And then?", "Bye."};
  for (size_t n = 0; n < questions.size(); ++n) {
    SCOPED_TRACE("turn " + std::to_string(n + 1));
    nlohmann::json request = {
        {"messages", nlohmann::json::array({{{"role", "user"}, {"content", questions[n]}}})},
        {"max_tokens", 6},
        {"seed", 5 + n},
        {"temperature", 0.9},
        {"logprobs", true}};
    nlohmann::json shared = request, single = request;
    if (n == 0) {
      shared["session"] = single["session"] = "new";
    } else {
      shared["session_id"] = shared_id;
      single["session_id"] = alone_id;
    }
    HttpReply live = (n % 2 == 0 ? on_a : on_b).Post("/v1/chat/completions", shared);
    HttpReply expected = alone.Post("/v1/chat/completions", single);
    ASSERT_EQ(live.status, 200) << live.body;
    ASSERT_EQ(expected.status, 200) << expected.body;
    if (n == 0) {
      shared_id = live.json["session_id"].get<std::string>();
      alone_id = expected.json["session_id"].get<std::string>();
    }
    EXPECT_EQ(live.json["choices"][0]["message"], expected.json["choices"][0]["message"]);
    EXPECT_EQ(live.json["choices"][0]["logprobs"], expected.json["choices"][0]["logprobs"]);
    EXPECT_EQ(live.json["usage"]["prompt_tokens"], expected.json["usage"]["prompt_tokens"]);
  }
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

// Named states over the RPCs (CreateNamedState, GetNamedState, ...); a
// failed call comes back as its status.
grpc::Status MakeNamedState(v1::Linserve::Stub& stub, const std::string& name,
                            const std::string& prompt, v1::NamedState* made) {
  grpc::ClientContext context;
  v1::CreateNamedStateRequest request;
  request.set_name(name);
  request.set_prompt(prompt);
  return stub.CreateNamedState(&context, request, made);
}

grpc::Status GetNamedState(v1::Linserve::Stub& stub, const std::string& name,
                           v1::NamedState* state) {
  grpc::ClientContext context;
  v1::GetNamedStateRequest request;
  request.set_name(name);
  return stub.GetNamedState(&context, request, state);
}

// The listing's entry for `name` (false when it has none, or the call failed).
bool ListedNamedState(v1::Linserve::Stub& stub, const std::string& name, v1::NamedState* state) {
  grpc::ClientContext context;
  v1::ListNamedStatesResponse listing;
  grpc::Status status = stub.ListNamedStates(&context, v1::ListNamedStatesRequest(), &listing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (const v1::NamedState& listed : listing.states()) {
    if (listed.name() == name) {
      *state = listed;
      return true;
    }
  }
  return false;
}

grpc::Status DeleteNamedState(v1::Linserve::Stub& stub, const std::string& name) {
  grpc::ClientContext context;
  v1::DeleteNamedStateRequest request;
  request.set_name(name);
  v1::DeleteNamedStateResponse response;
  return stub.DeleteNamedState(&context, request, &response);
}

// A greedy stateless turn from the named state `name`.
GenerateOutcome TurnFrom(v1::Linserve::Stub& stub, const std::string& name) {
  v1::GenerateRequest request = MakeRequest("\n", "", 30, 1, 0.0f);
  request.set_initial_state(name);
  return RunGenerate(stub, request);
}

// Debian's redis-cli (redis-tools, which redis-server depends on).
constexpr char kRedisCli[] = "/usr/bin/redis-cli";

// redis-cli against `redis`: its stdout's lines (none when it failed).
std::vector<std::string> RedisCli(const RedisProcess& redis, std::vector<std::string> args) {
  args.insert(args.begin(), {kRedisCli, "-p", std::to_string(redis.port())});
  ProcessResult run = RunProcess(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  if (run.exit_code != 0) return {};
  return absl::StrSplit(run.out, '\n', absl::SkipEmpty());
}

// A named state made on one replica is every replica's; deleted or made
// again on one, no other serves its cached copy: each use asks the store.
TEST_F(RedisServersTest, ANamedStateMadeOnOneServerIsServedByAnotherAndNeverStale) {
  auto start = [this] {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(), "--store=" + redis_->url(),
                                        "--session_ttl_seconds=3600"});
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  };
  auto a = start();
  auto b = start();
  ASSERT_TRUE(a && b);
  auto stub_a = a->Stub(), stub_b = b->Stub();
  const std::string name = "persona";

  v1::NamedState made;
  grpc::Status status = MakeNamedState(*stub_a, name, "ROMEO:\nBut soft, what light", &made);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(made.source(), "prompt");
  EXPECT_GT(made.position(), 0);
  ASSERT_FALSE(made.digest().empty());

  // B never saw it made: it comes from Redis, and gives A's text.
  GenerateOutcome on_a = TurnFrom(*stub_a, name);
  GenerateOutcome on_b = TurnFrom(*stub_b, name);
  ASSERT_TRUE(on_a.status.ok()) << on_a.status.error_message();
  ASSERT_TRUE(on_b.status.ok()) << on_b.status.error_message();
  EXPECT_EQ(on_b.text, on_a.text);
  EXPECT_EQ(on_b.finished.usage().generated_tokens(), 30);
  // Not the text of a fresh state.
  GenerateOutcome fresh = RunGenerate(*stub_b, MakeRequest("\n", "", 30, 1, 0.0f));
  ASSERT_TRUE(fresh.status.ok()) << fresh.status.error_message();
  EXPECT_NE(fresh.text, on_b.text);

  v1::NamedState got, listed;
  status = GetNamedState(*stub_b, name, &got);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(got.digest(), made.digest());
  EXPECT_EQ(got.position(), made.position());
  EXPECT_EQ(got.source(), "prompt");
  EXPECT_FALSE(got.global());
  ASSERT_TRUE(ListedNamedState(*stub_b, name, &listed));
  EXPECT_EQ(listed.digest(), made.digest());

  // Named states never expire, though the servers' sessions do.
  if (std::filesystem::exists(kRedisCli)) {
    auto session = CreateSession(*stub_a, "hello");
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<std::string> named = RedisCli(*redis_, {"--scan", "--pattern", "linserve:named*"});
    EXPECT_EQ(named.size(), 2u) << "the tenant's index and the state's blob";
    for (const std::string& key : named) {
      EXPECT_EQ(RedisCli(*redis_, {"TTL", key}), std::vector<std::string>{"-1"}) << key;
    }
    std::vector<std::string> sessions =
        RedisCli(*redis_, {"--scan", "--pattern", "linserve:session:*"});
    ASSERT_FALSE(sessions.empty());
    for (const std::string& key : sessions) {
      std::vector<std::string> ttl = RedisCli(*redis_, {"TTL", key});
      ASSERT_EQ(ttl.size(), 1u) << key;
      EXPECT_GT(std::stoll(ttl[0]), 0) << key;
    }
  }

  // Deleted on A: B, which holds it in its cache, no longer serves it.
  status = DeleteNamedState(*stub_a, name);
  ASSERT_TRUE(status.ok()) << status.error_message();
  GenerateOutcome gone = TurnFrom(*stub_b, name);
  EXPECT_EQ(gone.status.error_code(), grpc::StatusCode::NOT_FOUND) << gone.text;
  EXPECT_NE(gone.status.error_message().find("initial_state"), std::string::npos)
      << gone.status.error_message();
  status = GetNamedState(*stub_b, name, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << got.DebugString();
  EXPECT_FALSE(ListedNamedState(*stub_b, name, &listed));

  // Made again on A from another prompt: B serves the new one.
  v1::NamedState remade;
  status = MakeNamedState(*stub_a, name, "JULIET:\nO Romeo, Romeo, wherefore", &remade);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(remade.digest(), made.digest());
  status = GetNamedState(*stub_b, name, &got);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(got.digest(), remade.digest());
  EXPECT_EQ(got.position(), remade.position());
  ASSERT_TRUE(ListedNamedState(*stub_b, name, &listed));
  EXPECT_EQ(listed.digest(), remade.digest());
  GenerateOutcome new_on_a = TurnFrom(*stub_a, name);
  GenerateOutcome new_on_b = TurnFrom(*stub_b, name);
  ASSERT_TRUE(new_on_a.status.ok()) << new_on_a.status.error_message();
  ASSERT_TRUE(new_on_b.status.ok()) << new_on_b.status.error_message();
  EXPECT_EQ(new_on_b.text, new_on_a.text);
}

}  // namespace
}  // namespace linserve
