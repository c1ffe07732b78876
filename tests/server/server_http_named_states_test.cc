// Named states over the HTTP API end to end (/v1/states, "initial_state" on
// completions): a real `linserve` process, a real HTTP client (cpp-httplib),
// raw sockets where a request must stop at its head, and gRPC where a state
// file comes from an exported session.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
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

// PUT and DELETE, which HttpTestClient does not make, on a cpp-httplib
// client of the same kind.
HttpReply Put(httplib::Client& client, const std::string& path, const std::string& body,
              const std::string& content_type = kOctets, const httplib::Headers& headers = {}) {
  return FromResult(client.Put(path.c_str(), headers, body, content_type.c_str()));
}

HttpReply Delete(httplib::Client& client, const std::string& path,
                 const httplib::Headers& headers = {}) {
  return FromResult(client.Delete(path.c_str(), headers));
}

// The names a listing answers, in its order.
std::vector<std::string> Names(const HttpReply& list) {
  std::vector<std::string> names;
  for (const Json& state : list.json["data"]) names.push_back(state["id"].get<std::string>());
  return names;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Json Completion(const std::string& prompt, int max_tokens = 32) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0.8}, {"seed", 7}};
}

Json WithState(Json request, const std::string& name) {
  request["initial_state"] = name;
  return request;
}

// A prompt of whole prefill chunks (the model's block), so that a state made
// from it ends on a chunk boundary, as the same text inside a longer prompt
// does: both prefill the same chunks, bit for bit.
std::string ChunkAlignedPrompt(int64_t block) {
  const std::string speech =
      "KING RICHARD II:\nNo matter where; of comfort no man speak:\nLet's talk of graves, "
      "of worms, and epitaphs;\n";
  std::string prompt;
  while (prompt.size() < 64 || prompt.size() % block != 0) {
    prompt += speech[prompt.size() % speech.size()];
  }
  return prompt;
}

// The shipped default model (a byte tokenizer, no BOS), plain HTTP, one
// browser origin allowed for the preflight test.
class HttpNamedStatesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("named-states-store"),
                                        "--http_cors_origins=https://app.example",
                                        "--max_sessions=8"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static HttpTestClient Client() { return HttpTestClient(server_->http_port()); }
  static httplib::Client Raw() {
    httplib::Client client("http://127.0.0.1:" + std::to_string(server_->http_port()));
    client.set_read_timeout(120, 0);
    return client;
  }

  static int64_t BlockTokens() {
    grpc::ClientContext context;
    v1::ModelInfo info;
    EXPECT_TRUE(server_->Stub()->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
    return info.prefix_cache_block_tokens() > 0 ? info.prefix_cache_block_tokens() : 64;
  }

  static ServerProcess* server_;
};
ServerProcess* HttpNamedStatesTest::server_ = nullptr;

TEST_F(HttpNamedStatesTest, AStateMadeFromAPromptIsListedReadAndDeleted) {
  HttpTestClient http = Client();
  const std::string prompt = ChunkAlignedPrompt(BlockTokens());
  const HttpReply made =
      http.Post("/v1/states", Json{{"name", "richard.v1"}, {"prompt", prompt}});
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.json["id"], "richard.v1");
  EXPECT_EQ(made.json["object"], "state");
  EXPECT_EQ(made.json["global"], false);
  EXPECT_EQ(made.json["source"], "prompt");
  EXPECT_EQ(made.json["position"], prompt.size());
  EXPECT_EQ(made.json["digest"].get<std::string>().size(), 64u);
  EXPECT_GT(made.json["state_bytes"].get<int64_t>(), 0);
  EXPECT_GT(made.json["created"].get<int64_t>(), 1600000000);
  EXPECT_EQ(made.json["usage"]["prompt_tokens"], prompt.size());
  EXPECT_TRUE(made.json["usage"].contains("cached_tokens"));
  EXPECT_TRUE(made.json["prefill_ms"].is_number());

  const HttpReply list = http.Get("/v1/states");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json["object"], "list");
  EXPECT_TRUE(Contains(Names(list), "richard.v1")) << list.body;

  const HttpReply got = http.Get("/v1/states/richard.v1");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json["digest"], made.json["digest"]);
  EXPECT_EQ(got.json["state_bytes"], made.json["state_bytes"]);
  EXPECT_FALSE(got.json.contains("usage"));

  // Read-only once made: the name is taken.
  const HttpReply again = http.Post("/v1/states", Json{{"name", "richard.v1"}, {"prompt", "x"}});
  EXPECT_EQ(again.status, 409) << again.body;

  httplib::Client raw = Raw();
  const HttpReply deleted = Delete(raw, "/v1/states/richard.v1");
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json, (Json{{"id", "richard.v1"}, {"object", "state"}, {"deleted", true}}));
  EXPECT_EQ(http.Get("/v1/states/richard.v1").status, 404);
  EXPECT_FALSE(Contains(Names(http.Get("/v1/states")), "richard.v1"));
  EXPECT_EQ(Delete(raw, "/v1/states/richard.v1").status, 404);
}

TEST_F(HttpNamedStatesTest, ACompletionFromAStateIsTheCompletionOfItsPromptAndTheRest) {
  HttpTestClient http = Client();
  const std::string prefix = ChunkAlignedPrompt(BlockTokens());
  const std::string rest = "\nROMEO:";
  ASSERT_EQ(http.Post("/v1/states", Json{{"name", "prefix"}, {"prompt", prefix}}).status, 200);

  const HttpReply whole = http.Post("/v1/completions", Completion(prefix + rest));
  ASSERT_EQ(whole.status, 200) << whole.body;
  ASSERT_FALSE(CompletionText(whole).empty());
  const HttpReply from_state = http.Post("/v1/completions", WithState(Completion(rest), "prefix"));
  ASSERT_EQ(from_state.status, 200) << from_state.body;
  EXPECT_EQ(CompletionText(from_state), CompletionText(whole));
  EXPECT_EQ(from_state.json["usage"]["prompt_tokens"], rest.size());

  // Streamed, and as a new session's start: the same text, and the session
  // goes on from there.
  Json streamed = WithState(Completion(rest), "prefix");
  streamed["stream"] = true;
  const HttpReply stream = http.Stream("/v1/completions", streamed);
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(CompletionText(stream), CompletionText(whole));
  Json session = WithState(Completion(rest), "prefix");
  session["session"] = "new";
  const HttpReply opened = http.Post("/v1/completions", session);
  ASSERT_EQ(opened.status, 200) << opened.body;
  EXPECT_EQ(CompletionText(opened), CompletionText(whole));
  const std::string id = Header(opened, "x-session-id");
  ASSERT_EQ(id.size(), 32u);
  EXPECT_GT(GetSession(*server_->Stub(), id).position(),
            static_cast<int64_t>(prefix.size() + rest.size()));
  Json next = Completion("\n", 4);
  next["session_id"] = id;
  EXPECT_EQ(http.Post("/v1/completions", next).status, 200);

  // A chat completion takes it too.
  const HttpReply chat = http.Post(
      "/v1/chat/completions",
      Json{{"messages", {{{"role", "user"}, {"content", "Speak."}}}},
           {"max_tokens", 8},
           {"initial_state", "prefix"}});
  EXPECT_EQ(chat.status, 200) << chat.body;
}

TEST_F(HttpNamedStatesTest, InitialStateIsRefusedWithASessionAndForAnUnknownName) {
  HttpTestClient http = Client();
  ASSERT_EQ(http.Post("/v1/states", Json{{"name", "short"}, {"prompt", "ROMEO:"}}).status, 200);
  const std::string session_id(32, 'a');
  Json with_id = WithState(Completion("x"), "short");
  with_id["session_id"] = session_id;
  const HttpReply both = http.Post("/v1/completions", with_id);
  EXPECT_EQ(both.status, 400) << both.body;
  EXPECT_EQ(both.json["error"]["param"], "initial_state") << both.body;
  const HttpReply by_header = http.Post("/v1/completions", WithState(Completion("x"), "short"),
                                        {{"x-session-id", session_id}});
  EXPECT_EQ(by_header.status, 400) << by_header.body;

  const HttpReply unknown = http.Post("/v1/completions", WithState(Completion("x"), "nowhere"));
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  Json new_session = WithState(Completion("x"), "nowhere");
  new_session["session"] = "new";
  const HttpReply unknown_session = http.Post("/v1/completions", new_session);
  EXPECT_EQ(unknown_session.status, 404) << unknown_session.body;
  EXPECT_EQ(Header(unknown_session, "x-session-id"), "");

  for (const char* bad : {"a/b", "..", "sp ace", "\u00e9"}) {
    Json named = WithState(Completion("x"), bad);
    const HttpReply refused = http.Post("/v1/completions", named);
    EXPECT_EQ(refused.status, 400) << bad << ": " << refused.body;
    EXPECT_EQ(refused.json["error"]["param"], "initial_state") << refused.body;
    named["session"] = "new";
    EXPECT_EQ(http.Post("/v1/completions", named).status, 400) << bad;
  }
  const HttpReply bad_path = http.Get("/v1/states/..");
  EXPECT_EQ(bad_path.status, 400) << bad_path.body;
  EXPECT_EQ(bad_path.json["error"]["param"], "name");
  const HttpReply bad_body = http.Post("/v1/states", Json{{"name", "a b"}, {"prompt", "x"}});
  EXPECT_EQ(bad_body.status, 400) << bad_body.body;
  EXPECT_EQ(bad_body.json["error"]["param"], "name");
  const HttpReply empty = http.Post("/v1/states", Json{{"name", "empty"}, {"prompt", ""}});
  EXPECT_EQ(empty.status, 400) << empty.body;
  EXPECT_EQ(empty.json["error"]["param"], "prompt");
  EXPECT_EQ(http.Post("/v1/states", Json{{"name", 5}, {"prompt", "x"}}).status, 400);
  EXPECT_EQ(http.Get("/v1/states/unknown").status, 404);
}

TEST_F(HttpNamedStatesTest, AnExportedSessionUploadedIsAStateToStartFrom) {
  auto stub = server_->Stub();
  const std::string prefix = ChunkAlignedPrompt(BlockTokens());
  absl::StatusOr<v1::Session> session = CreateSession(*stub, prefix);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::string> file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();

  httplib::Client raw = Raw();
  const HttpReply uploaded = Put(raw, "/v1/states/exported", *file);
  ASSERT_EQ(uploaded.status, 200) << uploaded.body;
  EXPECT_EQ(uploaded.json["id"], "exported");
  EXPECT_EQ(uploaded.json["source"], "state_file");
  EXPECT_EQ(uploaded.json["position"], session->position());
  EXPECT_FALSE(uploaded.json.contains("usage"));

  // The state goes on as the session it was exported from does.
  HttpTestClient http = Client();
  const std::string rest = "\nROMEO:";
  const HttpReply from_state =
      http.Post("/v1/completions", WithState(Completion(rest), "exported"));
  ASSERT_EQ(from_state.status, 200) << from_state.body;
  Json continued = Completion(rest);
  continued["session_id"] = session->id();
  const HttpReply from_session = http.Post("/v1/completions", continued);
  ASSERT_EQ(from_session.status, 200) << from_session.body;
  EXPECT_EQ(CompletionText(from_state), CompletionText(from_session));

  // Read-only: a second upload under the name is refused, the first kept.
  const HttpReply twice = Put(raw, "/v1/states/exported", *file);
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_EQ(Client().Get("/v1/states/exported").json["digest"], uploaded.json["digest"]);
}

TEST_F(HttpNamedStatesTest, ThePreflightAllowsPutAndDelete) {
  httplib::Client raw = Raw();
  const auto answer = raw.Options("/v1/states/x", {{"Origin", "https://app.example"},
                                                  {"Access-Control-Request-Method", "PUT"}});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 204);
  const std::string methods = answer->get_header_value("Access-Control-Allow-Methods");
  EXPECT_NE(methods.find("PUT"), std::string::npos) << methods;
  EXPECT_NE(methods.find("DELETE"), std::string::npos) << methods;
}

// A small --max_state_upload_bytes: PUT's own body limit, judged from the
// head, and what a refused upload leaves (nothing).
class HttpStateUploadLimitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("named-states-limit-store"),
                                        "--max_state_upload_bytes=4096"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  // The answer to a head alone: the server must answer without the body.
  static std::string AnswerToHead(const std::string& head) {
    RawConnection connection(server_->http_port(), /*read_timeout_seconds=*/10);
    EXPECT_TRUE(connection.connected());
    connection.Send(head);
    return connection.ReadResponse();
  }

  static ServerProcess* server_;
};
ServerProcess* HttpStateUploadLimitTest::server_ = nullptr;

TEST_F(HttpStateUploadLimitTest, AnUploadPastTheLimitIsRefusedBeforeItsBodyIsSent) {
  const std::string answer = AnswerToHead(
      "PUT /v1/states/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: 10000000\r\n\r\n");
  EXPECT_EQ(StatusOf(answer), 413) << answer;
  EXPECT_NE(answer.find("--max_state_upload_bytes = 4096"), std::string::npos) << answer;
  // Past this limit but within --max_http_body_bytes: the upload's limit
  // is its own.
  const std::string just_over = AnswerToHead(
      "PUT /v1/states/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: 4097\r\n\r\n");
  EXPECT_EQ(StatusOf(just_over), 413) << just_over;
  // ... and no other path's: a completion's body of the same size passes.
  HttpTestClient http(server_->http_port());
  Json completion = Completion(std::string(5000, 'a'), 1);
  EXPECT_EQ(http.Post("/v1/completions", completion).status, 200);
}

TEST_F(HttpStateUploadLimitTest, AnUploadOfAnotherContentTypeIs415) {
  const std::string answer = AnswerToHead(
      "PUT /v1/states/json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\n\r\n");
  EXPECT_EQ(StatusOf(answer), 415) << answer;
  EXPECT_NE(answer.find("application/octet-stream"), std::string::npos) << answer;
  const std::string none = AnswerToHead(
      "PUT /v1/states/none HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(StatusOf(none), 415) << none;
}

TEST_F(HttpStateUploadLimitTest, GarbageIsRefusedAndNothingIsKept) {
  httplib::Client raw("http://127.0.0.1:" + std::to_string(server_->http_port()));
  std::string garbage;
  for (int i = 0; i < 1000; ++i) garbage += static_cast<char>((i * 7919) & 0xff);
  const HttpReply refused = Put(raw, "/v1/states/garbage", garbage);
  EXPECT_EQ(refused.status, 400) << refused.body;
  const HttpReply empty = Put(raw, "/v1/states/empty", "");
  EXPECT_EQ(empty.status, 400) << empty.body;
  // A damaged state file is the request's fault: 400, not a server error.
  const HttpReply cut = Put(raw, "/v1/states/cut", std::string("LNSVSTAT") + std::string(100, 'x'));
  EXPECT_EQ(cut.status, 400) << cut.body;
  EXPECT_NE(cut.body.find("linserve state file"), std::string::npos) << cut.body;
  HttpTestClient http(server_->http_port());
  const HttpReply list = http.Get("/v1/states");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json, (Json{{"object", "list"}, {"data", Json::array()}}));
  EXPECT_EQ(http.Get("/v1/states/garbage").status, 404);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Two tenants (tokens need TLS): each sees only its own states.
TEST(HttpNamedStatesTenantTest, AnotherTenantsStateIsNotFound) {
  const std::string d = FreshDir("named-states-pki");
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd " + d + "; exec 2>openssl.log;"
      "openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca;"
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext;"
      "openssl req" + key + " -keyout server.key -out server.csr -subj /CN=localhost;"
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
      "-out server.pem -days 2 -extfile san.ext;"
      "printf 'alice-token-0123456789 alice\\nbob-token-0123456789ab bob\\n' > tokens.txt";
  ASSERT_EQ(std::system(("bash -c \"" + script + "\"").c_str()), 0) << Read(d + "/openssl.log");
  auto server = ServerProcess::Start(
      {"--model=" + *WriteTinyModel(FreshDir("named-states-tenant-model"), 9),
       "--store_dir=" + FreshDir("named-states-tenant-store"),
       "--tls_cert_file=" + d + "/server.pem", "--tls_key_file=" + d + "/server.key",
       "--auth_tokens_file=" + d + "/tokens.txt"});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  HttpTestClient http(port, d + "/ca.pem");
  httplib::Client raw("https://localhost:" + std::to_string(port));
  raw.set_ca_cert_path((d + "/ca.pem").c_str());
  raw.enable_server_certificate_verification(true);
  const httplib::Headers alice = {{"Authorization", "Bearer alice-token-0123456789"}};
  const httplib::Headers bob = {{"Authorization", "Bearer bob-token-0123456789ab"}};

  EXPECT_EQ(http.Get("/v1/states").status, 401);
  ASSERT_EQ(http.Post("/v1/states", Json{{"name", "mine"}, {"prompt", "ROMEO:"}}, alice).status,
            200);
  EXPECT_EQ(Names(http.Get("/v1/states", alice)), std::vector<std::string>{"mine"});
  EXPECT_EQ(Names(http.Get("/v1/states", bob)), std::vector<std::string>{});
  EXPECT_EQ(http.Get("/v1/states/mine", bob).status, 404);
  EXPECT_EQ(http.Post("/v1/completions", WithState(Completion("x", 4), "mine"), bob).status, 404);
  Json new_session = WithState(Completion("x", 4), "mine");
  new_session["session"] = "new";
  EXPECT_EQ(http.Post("/v1/completions", new_session, bob).status, 404);
  EXPECT_EQ(Delete(raw, "/v1/states/mine", bob).status, 404);
  // An upload without a token is refused from its head.
  EXPECT_EQ(Put(raw, "/v1/states/anon", std::string(100, 'x')).status, 401);

  // Bob's own state of the same name is his; Alice's is still hers.
  ASSERT_EQ(http.Post("/v1/states", Json{{"name", "mine"}, {"prompt", "JULIET:"}}, bob).status,
            200);
  EXPECT_NE(http.Get("/v1/states/mine", bob).json["digest"],
            http.Get("/v1/states/mine", alice).json["digest"]);
  EXPECT_EQ(http.Post("/v1/completions", WithState(Completion("x", 4), "mine"), alice).status, 200);
  EXPECT_EQ(Delete(raw, "/v1/states/mine", alice).status, 200);
  EXPECT_EQ(http.Get("/v1/states/mine", alice).status, 404);
  EXPECT_EQ(http.Get("/v1/states/mine", bob).status, 200);
}

}  // namespace
}  // namespace linserve
