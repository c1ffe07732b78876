// End to end: sessions on a real server with the shipped default model (a
// trained model writes ASCII, so a turn's text is exactly its tokens' bytes
// and can be sent back as a prompt).

#include <signal.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::unique_ptr<ServerProcess> StartServer(const std::string& store_dir) {
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(), "--store_dir=" + store_dir});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string Turn(v1::Linserve::Stub& stub, const std::string& session, const std::string& prompt,
                 uint64_t seed, v1::Finished* finished = nullptr) {
  GenerateOutcome outcome = RunGenerate(stub, MakeRequest(prompt, session, 40, seed));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 40);
  if (finished) *finished = outcome.finished;
  return outcome.text;
}

// ForkSession of `id`; the fork.
v1::Session Fork(v1::Linserve::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::ForkSessionRequest request;
  request.set_session_id(id);
  v1::Session fork;
  const grpc::Status status = stub.ForkSession(&context, request, &fork);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return fork;
}

TEST(SessionsTest, ThreeTurnsEqualOneLongPrompt) {
  auto server = StartServer(FreshDir("turns-store"));
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::string p1 = "ROMEO:\n", p2 = "\n\nJULIET:\n", p3 = "\n\nROMEO:\n";
  v1::Finished finished;
  const std::string t1 = Turn(*stub, session->id(), p1, 11);
  const std::string t2 = Turn(*stub, session->id(), p2, 12);
  const std::string t3 = Turn(*stub, session->id(), p3, 13, &finished);
  // Every token but the last of each turn is in the state; the last is fed
  // first next turn (the default model takes no BOS).
  const int64_t consumed = p1.size() + 40 + p2.size() + 40 + p3.size() + 40 - 1;
  EXPECT_EQ(finished.position(), consumed);

  const std::string whole = p1 + t1 + p2 + t2 + p3;
  ASSERT_EQ(whole.size(), p1.size() + p2.size() + p3.size() + 80) << "non-ASCII output";
  EXPECT_EQ(Turn(*stub, "", whole, 13), t3);
}

TEST(SessionsTest, ForkGivesTwoIndependentContinuations) {
  auto server = StartServer(FreshDir("fork-store"));
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto source = CreateSession(*stub, "KING HENRY:\nMy lords, ");
  ASSERT_TRUE(source.ok()) << source.status();
  // Every prompt byte but the last, which the first turn feeds (the model
  // takes no BOS).
  EXPECT_EQ(source->position(), 22 - 1);

  const v1::Session fork = Fork(*stub, source->id());
  ASSERT_FALSE(fork.id().empty());
  EXPECT_NE(fork.id(), source->id());
  EXPECT_EQ(fork.position(), source->position());

  // The source advances; the fork still holds the state it was given, so the
  // same seed gives it the same continuation.
  const std::string from_source = Turn(*stub, source->id(), "", 7);
  const std::string from_fork = Turn(*stub, fork.id(), "", 7);
  EXPECT_EQ(from_fork, from_source);
  // And they go separate ways from there.
  EXPECT_NE(Turn(*stub, source->id(), " and", 8), Turn(*stub, fork.id(), " but", 8));
}

// 0 is a seed like any other: a session's turn seeded with it starts a
// stream that the session's unseeded turns continue, as any seed's would.
TEST(SessionsTest, ATurnSeededWithZeroStartsTheStreamTheNextTurnsContinue) {
  auto server = StartServer(FreshDir("seed-zero-store"));
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto source = CreateSession(*stub, "ROMEO:\n");
  ASSERT_TRUE(source.ok()) << source.status();
  v1::GenerateRequest seeded = MakeRequest("", source->id(), 40, 0);
  seeded.mutable_sampling()->set_seed(0);
  GenerateOutcome first = RunGenerate(*stub, seeded);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.finished.seed(), 0u);

  const v1::Session fork = Fork(*stub, source->id());
  ASSERT_FALSE(fork.id().empty());
  v1::Finished from_source, from_fork;
  EXPECT_EQ(Turn(*stub, source->id(), "\n", 0, &from_source),
            Turn(*stub, fork.id(), "\n", 0, &from_fork));
  EXPECT_EQ(from_source.seed(), 0u);
  EXPECT_EQ(from_fork.seed(), 0u);
}

TEST(SessionsTest, ExportThenImportIntoAFreshServerContinuesIdentically) {
  auto first = StartServer(FreshDir("export-store-a"));
  ASSERT_NE(first, nullptr);
  auto stub = first->Stub();
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok());
  Turn(*stub, session->id(), "First Citizen:\n", 21);
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();
  // No seed: the turn continues the session's own random stream, which the
  // state file carries.
  const std::string expected = Turn(*stub, session->id(), "\n\nSecond Citizen:\n", 0);

  auto second = StartServer(FreshDir("export-store-b"));
  ASSERT_NE(second, nullptr);
  auto other = second->Stub();
  v1::Session imported;
  grpc::Status status = ImportSession(*other, *file, &imported, 4096);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(imported.id(), session->id());
  EXPECT_EQ(Turn(*other, imported.id(), "\n\nSecond Citizen:\n", 0), expected);
}

TEST(SessionsTest, KillDashNineAfterAFinishedTurnThenRestartContinuesAsIfNeverStopped) {
  const std::string store = FreshDir("kill-store");
  std::string twin_id, survivor_id, expected;
  {
    auto server = StartServer(store);
    ASSERT_NE(server, nullptr);
    auto stub = server->Stub();
    auto twin = CreateSession(*stub), survivor = CreateSession(*stub);
    ASSERT_TRUE(twin.ok() && survivor.ok());
    twin_id = twin->id();
    survivor_id = survivor->id();
    EXPECT_EQ(Turn(*stub, twin_id, "MENENIUS:\n", 31), Turn(*stub, survivor_id, "MENENIUS:\n", 31));
    // What never stopping gives: the twin's next turn.
    expected = Turn(*stub, twin_id, "\n\nCORIOLANUS:\n", 0);
    server->Signal(SIGKILL);
    EXPECT_EQ(server->Wait(), 128 + SIGKILL);
  }
  auto restarted = StartServer(store);
  ASSERT_NE(restarted, nullptr);
  auto stub = restarted->Stub();
  grpc::ClientContext context;
  v1::GetSessionRequest get;
  get.set_session_id(survivor_id);
  v1::Session found;
  ASSERT_TRUE(stub->GetSession(&context, get, &found).ok());
  EXPECT_EQ(found.position(), 10 + 39);
  EXPECT_EQ(Turn(*stub, survivor_id, "\n\nCORIOLANUS:\n", 0), expected);
}

TEST(SessionsTest, ListPagesOldestFirstAndDeleteRemovesTheFile) {
  const std::string store = FreshDir("list-store");
  auto server = StartServer(store);
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  std::vector<std::string> created;
  for (int i = 0; i < 5; ++i) {
    auto s = CreateSession(*stub);
    ASSERT_TRUE(s.ok());
    created.push_back(s->id());
    absl::SleepFor(absl::Milliseconds(2));  // distinct creation times
  }
  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    grpc::ClientContext context;
    v1::ListSessionsRequest request;
    request.set_page_size(2);
    request.set_page_token(token);
    v1::ListSessionsResponse response;
    ASSERT_TRUE(stub->ListSessions(&context, request, &response).ok());
    for (const auto& s : response.sessions()) listed.push_back(s.id());
    token = response.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(listed, created);

  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store), {}), 5);
  grpc::ClientContext context;
  v1::DeleteSessionRequest request;
  request.set_session_id(created[0]);
  v1::DeleteSessionResponse response;
  ASSERT_TRUE(stub->DeleteSession(&context, request, &response).ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store), {}), 4);
  grpc::ClientContext again;
  v1::GetSessionRequest get;
  get.set_session_id(created[0]);
  v1::Session gone;
  EXPECT_EQ(stub->GetSession(&again, get, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace linserve
