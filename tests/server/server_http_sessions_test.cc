// Sessions over the HTTP API end to end (/v1/sessions): a real `linserve`
// process, a real HTTP client (cpp-httplib), and the gRPC twin of each
// route on the same server, whose answers each route must equal.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/raw_http.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

constexpr char kOctets[] = "application/octet-stream";
constexpr int kMaxStateBytes = 1 << 20;  // the default model's state file is 538 KB

class HttpSessionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("http-sessions-store"),
                                        absl::StrCat("--max_state_bytes=", kMaxStateBytes)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static HttpTestClient Client() { return HttpTestClient(server_->http_port()); }
  static httplib::Client Raw() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(120, 0);
    return client;
  }
  static HttpReply Delete(const std::string& path) { return FromResult(Raw().Delete(path.c_str())); }
  static HttpReply Import(const std::string& body, const std::string& type = kOctets) {
    return FromResult(Raw().Post("/v1/sessions/import", body, type.c_str()));
  }

  static ServerProcess* server_;
};
ServerProcess* HttpSessionsTest::server_ = nullptr;

// The session JSON's fields against the gRPC Session's.
void ExpectSameSession(const Json& http, const v1::Session& grpc) {
  EXPECT_EQ(http["object"], "session");
  EXPECT_EQ(http["id"], grpc.id());
  EXPECT_EQ(http["position"], grpc.position());
  EXPECT_EQ(http["state_bytes"], grpc.state_bytes());
  EXPECT_EQ(http["recurrent_state_bytes"], grpc.recurrent_state_bytes());
  EXPECT_EQ(http["kv_state_bytes"], grpc.kv_state_bytes());
  EXPECT_GT(grpc.recurrent_state_bytes(), 0);
  EXPECT_EQ(http["created_unix_ms"], grpc.created_unix_ms());
  EXPECT_EQ(http["busy"], grpc.busy());
}

Json Continue(const std::string& id, const std::string& prompt) {
  return {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0.8}, {"seed", 11},
          {"session_id", id}};
}

TEST_F(HttpSessionsTest, EveryRouteAnswersAsItsGrpcTwin) {
  auto stub = server_->Stub();
  HttpTestClient http = Client();

  // POST /v1/sessions with a prompt: prefilled, as CreateSession.
  HttpReply created = http.Post("/v1/sessions", Json{{"prompt", "ROMEO:\nBut soft,"}});
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json["id"];
  absl::StatusOr<v1::Session> grpc_created = CreateSession(*stub, "ROMEO:\nBut soft,");
  ASSERT_TRUE(grpc_created.ok()) << grpc_created.status();
  EXPECT_EQ(created.json["position"], grpc_created->position());
  EXPECT_EQ(created.json["state_bytes"], grpc_created->state_bytes());

  // GET /v1/sessions/{id} equals GetSession.
  HttpReply got = http.Get("/v1/sessions/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  ExpectSameSession(got.json, GetSession(*stub, id));

  // An empty body is an empty session.
  HttpReply empty = http.Post("/v1/sessions", std::string());
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(empty.json["position"], 0);

  // GET /v1/sessions pages as ListSessions, and holds every one of them.
  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    HttpReply page = http.Get(absl::StrCat("/v1/sessions?page_size=2&page_token=", token));
    ASSERT_EQ(page.status, 200) << page.body;
    EXPECT_EQ(page.json["object"], "list");
    EXPECT_LE(page.json["data"].size(), 2u);
    for (const Json& s : page.json["data"]) listed.push_back(s["id"]);
    token = page.json["next_page_token"];
    EXPECT_EQ(page.json["has_more"], !token.empty());
    ++pages;
  } while (!token.empty() && pages < 100);
  EXPECT_GE(pages, 2);
  for (const std::string& want : {id, grpc_created->id(), empty.json["id"].get<std::string>()}) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), want), listed.end()) << want;
  }
  EXPECT_EQ(static_cast<int>(listed.size()), SessionCount(*stub));

  // POST /v1/sessions/{id}/fork: a new session at the same position, as ForkSession.
  HttpReply fork = http.Post("/v1/sessions/" + id + "/fork", std::string());
  ASSERT_EQ(fork.status, 200) << fork.body;
  const std::string fork_id = fork.json["id"];
  EXPECT_NE(fork_id, id);
  EXPECT_EQ(fork.json["position"], created.json["position"]);
  ExpectSameSession(fork.json, GetSession(*stub, fork_id));

  // GET /v1/sessions/{id}/state: the bytes ExportSession streams.
  HttpReply exported = http.Get("/v1/sessions/" + id + "/state");
  ASSERT_EQ(exported.status, 200);
  EXPECT_EQ(Header(exported, "Content-Type"), kOctets);
  absl::StatusOr<std::string> grpc_exported = ExportSession(*stub, id);
  ASSERT_TRUE(grpc_exported.ok()) << grpc_exported.status();
  EXPECT_EQ(exported.body, *grpc_exported);

  // POST /v1/sessions/import: a new session that continues exactly as the
  // original, the fork and a gRPC import of the same file do.
  HttpReply imported = Import(exported.body);
  ASSERT_EQ(imported.status, 200) << imported.body;
  const std::string imported_id = imported.json["id"];
  EXPECT_EQ(imported.json["position"], created.json["position"]);
  v1::Session grpc_imported;
  ASSERT_TRUE(ImportSession(*stub, exported.body, &grpc_imported).ok());
  const std::string original = CompletionText(http.Post("/v1/completions", Continue(id, " what")));
  ASSERT_FALSE(original.empty());
  for (const std::string& other : {fork_id, imported_id, grpc_imported.id()}) {
    EXPECT_EQ(CompletionText(http.Post("/v1/completions", Continue(other, " what"))), original)
        << other;
  }

  // DELETE /v1/sessions/{id}, then it is gone on both transports.
  HttpReply deleted = Delete("/v1/sessions/" + fork_id);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json["deleted"], true);
  EXPECT_EQ(http.Get("/v1/sessions/" + fork_id).status, 404);
  grpc::ClientContext context;
  v1::GetSessionRequest request;
  request.set_session_id(fork_id);
  v1::Session gone;
  EXPECT_EQ(stub->GetSession(&context, request, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HttpSessionsTest, BadIdsAreRefusedByNameAndUnknownOnes404) {
  HttpTestClient http = Client();
  for (const std::string& path :
       {std::string("/v1/sessions/not-an-id"), std::string("/v1/sessions/not-an-id/state")}) {
    HttpReply bad = http.Get(path);
    EXPECT_EQ(bad.status, 400) << path << ": " << bad.body;
    EXPECT_EQ(bad.json["error"]["param"], "session_id") << bad.body;
  }
  const std::string unknown = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(http.Get("/v1/sessions/" + unknown).status, 404);
  EXPECT_EQ(http.Post("/v1/sessions/" + unknown + "/fork", std::string()).status, 404);
  EXPECT_EQ(http.Get("/v1/sessions/" + unknown + "/state").status, 404);
  EXPECT_EQ(Delete("/v1/sessions/" + unknown).status, 404);
  // Routes that do not exist, and fields of the wrong type.
  EXPECT_EQ(http.Get("/v1/sessions/" + unknown + "/other").status, 404);
  EXPECT_EQ(Delete("/v1/sessions").status, 404);
  HttpReply typed = http.Post("/v1/sessions", Json{{"prompt", 7}});
  EXPECT_EQ(typed.status, 400);
  EXPECT_EQ(typed.json["error"]["param"], "prompt");
  HttpReply page = http.Get("/v1/sessions?page_size=-3");
  EXPECT_EQ(page.status, 400);
  EXPECT_EQ(page.json["error"]["param"], "page_size");
  HttpReply state = http.Post("/v1/sessions", Json{{"initial_state", "no such/name"}});
  EXPECT_EQ(state.status, 400);
  EXPECT_EQ(state.json["error"]["param"], "initial_state");
}

TEST_F(HttpSessionsTest, ACorruptOrOversizedImportStoresNothing) {
  auto stub = server_->Stub();
  HttpTestClient http = Client();
  HttpReply created = http.Post("/v1/sessions", Json{{"prompt", "JULIET:"}});
  ASSERT_EQ(created.status, 200) << created.body;
  HttpReply exported = http.Get(absl::StrCat("/v1/sessions/", created.json["id"].get<std::string>(),
                                             "/state"));
  ASSERT_EQ(exported.status, 200);
  const int before = SessionCount(*stub);

  std::string flipped = exported.body;
  flipped[flipped.size() / 2] ^= 0x40;
  HttpReply corrupt = Import(flipped);
  EXPECT_EQ(corrupt.status, 400) << corrupt.body;
  EXPECT_EQ(corrupt.json["error"]["param"], "body");
  HttpReply truncated = Import(exported.body.substr(0, exported.body.size() / 3));
  EXPECT_EQ(truncated.status, 400) << truncated.body;
  HttpReply empty = Import("");
  EXPECT_EQ(empty.status, 400) << empty.body;
  // Over --max_state_bytes: 413 from the head, before the body is read.
  HttpReply big = Import(std::string(kMaxStateBytes + 1, 'x'));
  EXPECT_EQ(big.status, 413) << big.body;
  EXPECT_NE(big.body.find("--max_state_bytes"), std::string::npos) << big.body;
  // Another media type: 415 from the head.
  EXPECT_EQ(Import(exported.body, "application/json").status, 415);
  EXPECT_EQ(SessionCount(*stub), before);
}

// A chat turn cut by max_tokens leaves its session without the turn's end,
// which the next chat turn feeds first. A fork holds the same state, so its
// next chat turn must feed it too: the fork then answers as the source does.
TEST_F(HttpSessionsTest, AForkOfAChatCutShortFeedsTheTurnEndAsItsSourceWould) {
  HttpTestClient http = Client();
  const Json first = {{"messages", Json::array({{{"role", "user"}, {"content", "ROMEO:\nSpeak."}}})},
                      {"max_tokens", 5}, {"temperature", 0.8}, {"seed", 3}, {"session", "new"}};
  HttpReply cut = http.Post("/v1/chat/completions", first);
  ASSERT_EQ(cut.status, 200) << cut.body;
  ASSERT_EQ(cut.json["choices"][0]["finish_reason"], "length") << cut.body;
  const std::string source = cut.json["session_id"];
  HttpReply fork = http.Post("/v1/sessions/" + source + "/fork", std::string());
  ASSERT_EQ(fork.status, 200) << fork.body;
  auto next = [&](const std::string& id) {
    const Json turn = {{"messages", Json::array({{{"role", "user"}, {"content", "JULIET:\nWho?"}}})},
                       {"max_tokens", 32}, {"temperature", 0.8}, {"seed", 4}, {"session_id", id}};
    HttpReply reply = http.Post("/v1/chat/completions", turn);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return std::make_pair(CompletionText(reply), reply.json["session_position"].get<int64_t>());
  };
  const auto from_fork = next(fork.json["id"]);
  const auto from_source = next(source);
  EXPECT_EQ(from_fork, from_source);
}

// The attack's form: a head that announces more than --max_state_bytes, or
// an import with no framing, is answered before a byte of its body is sent,
// so nothing of it is ever buffered.
TEST_F(HttpSessionsTest, AnOversizedImportIsRefusedFromItsHeadAlone) {
  auto answer_to_head = [](const std::string& head) {
    RawConnection connection(server_->http_port(), /*read_timeout_seconds=*/10);
    EXPECT_TRUE(connection.connected());
    connection.Send(head);
    return connection.ReadResponse();
  };
  const std::string big = answer_to_head(absl::StrCat(
      "POST /v1/sessions/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: ", kMaxStateBytes + 1, "\r\n\r\n"));
  EXPECT_EQ(StatusOf(big), 413) << big;
  EXPECT_NE(big.find("--max_state_bytes"), std::string::npos) << big;
  const std::string chunked = answer_to_head(
      "POST /v1/sessions/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(StatusOf(chunked), 415) << chunked;
}

TEST_F(HttpSessionsTest, DeletingASessionBusyWithATurnIs409) {
  HttpTestClient http = Client();
  HttpReply created = http.Post("/v1/sessions", Json{{"prompt", "HAMLET:"}});
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json["id"];
  Json turn = Continue(id, " To be");
  turn["max_tokens"] = 2000;
  turn["ignore_eos"] = true;
  turn["stream"] = true;
  std::atomic<int> delete_status{0};
  std::string delete_body;
  // At the turn's first event the session is busy: the delete is refused,
  // then the stream is closed (which cancels the turn).
  http.Stream("/v1/completions", turn, {}, [&](const Json&) {
    HttpReply refused = Delete("/v1/sessions/" + id);
    delete_status = refused.status;
    delete_body = refused.body;
    return false;
  });
  EXPECT_EQ(delete_status.load(), 409) << delete_body;
}

}  // namespace
}  // namespace linserve
