// End to end: TLS, mTLS and bearer tokens on a real server; tenants see
// only their own sessions.

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A throwaway CA, a server certificate for localhost/127.0.0.1 and a client
// certificate, made with the openssl command line.
class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(FreshDir("auth-pki"));
    const std::string d = *dir_;
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script =
        "set -e; cd " + d + "; exec 2>openssl.log;"
        "openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca;"
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext;"
        "openssl req" + key + " -keyout server.key -out server.csr -subj /CN=localhost;"
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile san.ext;"
        "openssl req" + key + " -keyout client.key -out client.csr -subj /CN=client;"
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out client.pem -days 2;"
        "printf '# token tenant\\nalice-token-0123456789 alice\\nbob-token-0123456789ab bob\\n' "
        "> tokens.txt";
    ASSERT_EQ(std::system(("bash -c \"" + script + "\"").c_str()), 0) << Read(d + "/openssl.log");
    auto server = ServerProcess::Start(
        {"--model=" + *WriteTinyModel(FreshDir("auth-model"), 9),
         "--store_dir=" + FreshDir("auth-store"), "--tls_cert_file=" + d + "/server.pem",
         "--tls_key_file=" + d + "/server.key", "--auth_tokens_file=" + d + "/tokens.txt",
         "--metrics_on_http"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }

  static std::shared_ptr<grpc::Channel> Channel(const ServerProcess& server, bool client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(*dir_ + "/ca.pem");
    if (client_cert) {
      ssl.pem_cert_chain = Read(*dir_ + "/client.pem");
      ssl.pem_private_key = Read(*dir_ + "/client.key");
    }
    return grpc::CreateChannel(server.address(), grpc::SslCredentials(ssl));
  }

  // GetSession with a token ("" = none) on its own connection.
  static grpc::StatusCode Get(const std::string& token, const std::string& id,
                              std::shared_ptr<grpc::Channel> channel = nullptr) {
    if (!channel) channel = Channel(*server_, false);
    auto stub = v1::Linserve::NewStub(channel);
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::GetSessionRequest request;
    request.set_session_id(id);
    v1::Session session;
    return stub->GetSession(&context, request, &session).error_code();
  }

  static std::string* dir_;
  static ServerProcess* server_;
};

std::string* AuthTest::dir_ = nullptr;
ServerProcess* AuthTest::server_ = nullptr;

const char kAlice[] = "alice-token-0123456789";
const char kBob[] = "bob-token-0123456789ab";

std::string CreateAs(const std::string& token, std::shared_ptr<grpc::Channel> channel) {
  auto stub = v1::Linserve::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + token);
  v1::CreateSessionRequest request;
  request.set_prompt("secret context");
  v1::Session session;
  EXPECT_TRUE(stub->CreateSession(&context, request, &session).ok());
  return session.id();
}

TEST_F(AuthTest, MissingOrUnknownTokenIsUnauthenticated) {
  const std::string id = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(Get("", id), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Get("not-a-valid-token-at-all", id), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Get(kAlice, id), grpc::StatusCode::NOT_FOUND);
  // A plaintext client cannot talk to the TLS port at all.
  auto plain = v1::Linserve::NewStub(server_->channel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ModelInfo info;
  EXPECT_EQ(plain->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(AuthTest, AnotherTenantsSessionLooksExactlyLikeAnUnknownOne) {
  const std::string id = CreateAs(kAlice, Channel(*server_, false));
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Get(kAlice, id), grpc::StatusCode::OK);
  EXPECT_EQ(Get(kBob, id), grpc::StatusCode::NOT_FOUND);

  auto bob = v1::Linserve::NewStub(Channel(*server_, false));
  auto with_bob = [](grpc::ClientContext& c) { c.AddMetadata("authorization", std::string("Bearer ") + kBob); };
  {
    grpc::ClientContext c;
    with_bob(c);
    auto reader = bob->Generate(&c, MakeRequest("go on", id, 5, 1));
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    with_bob(c);
    v1::ForkSessionRequest r;
    r.set_session_id(id);
    v1::Session s;
    EXPECT_EQ(bob->ForkSession(&c, r, &s).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    with_bob(c);
    v1::ExportSessionRequest r;
    r.set_session_id(id);
    auto reader = bob->ExportSession(&c, r);
    v1::StateChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    with_bob(c);
    v1::DeleteSessionRequest r;
    r.set_session_id(id);
    v1::DeleteSessionResponse s;
    EXPECT_EQ(bob->DeleteSession(&c, r, &s).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    with_bob(c);
    v1::ListSessionsResponse s;
    ASSERT_TRUE(bob->ListSessions(&c, v1::ListSessionsRequest(), &s).ok());
    for (const auto& session : s.sessions()) EXPECT_NE(session.id(), id);
  }
  // Still Alice's, untouched.
  EXPECT_EQ(Get(kAlice, id), grpc::StatusCode::OK);
}

TEST_F(AuthTest, ATenantNeverResumesFromAnotherTenantsPrefix) {
  // 100 bytes: the tiny model's chunk is 16, so 6 whole chunks before the
  // byte CreateSession holds back.
  const std::string prompt(100, 'p');
  // CreateSession as the tenant of `token`: the tokens of its prompt
  // resumed from the prefix-state cache.
  auto CachedTokensOfCreate = [](const std::string& token, const std::string& prompt) {
    auto stub = v1::Linserve::NewStub(Channel(*server_, false));
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::CreateSessionRequest request;
    request.set_prompt(prompt);
    v1::Session session;
    const grpc::Status status = stub->CreateSession(&context, request, &session);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return session.cached_tokens();
  };
  EXPECT_EQ(CachedTokensOfCreate(kAlice, prompt), 0);
  EXPECT_EQ(CachedTokensOfCreate(kAlice, prompt), 0);  // second sighting: kept
  EXPECT_EQ(CachedTokensOfCreate(kBob, prompt), 0) << "bob resumed from alice's prefix";
  EXPECT_EQ(CachedTokensOfCreate(kBob, prompt), 0);
  EXPECT_EQ(CachedTokensOfCreate(kAlice, prompt), 96) << "alice's own prefix is cached";
  EXPECT_EQ(CachedTokensOfCreate(kBob, prompt), 96) << "and bob's, apart from it";
}

// Named states are per tenant: another tenant's name is NOT_FOUND everywhere
// (get, delete, a Generate's or CreateSession's initial_state) and absent
// from its list, and the same name may be each tenant's own.
TEST_F(AuthTest, AnotherTenantsNamedStateIsNotFoundEverywhere) {
  // One connection serves one tenant: each has its own.
  auto alice = v1::Linserve::NewStub(Channel(*server_, false));
  auto bob = v1::Linserve::NewStub(Channel(*server_, false));
  auto stub_of = [&](const char* token) { return token == kAlice ? alice.get() : bob.get(); };
  auto as = [](grpc::ClientContext& c, const char* token) {
    c.AddMetadata("authorization", std::string("Bearer ") + token);
  };
  auto create = [&](const char* token, const std::string& prompt) {
    grpc::ClientContext c;
    as(c, token);
    v1::CreateNamedStateRequest request;
    request.set_name("persona");
    request.set_prompt(prompt);
    v1::NamedState made;
    const grpc::Status status = stub_of(token)->CreateNamedState(&c, request, &made);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return made;
  };
  const v1::NamedState alices = create(kAlice, "alice's long system prompt");
  {
    grpc::ClientContext c;
    as(c, kBob);
    v1::GetNamedStateRequest request;
    request.set_name("persona");
    v1::NamedState got;
    EXPECT_EQ(bob->GetNamedState(&c, request, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    as(c, kBob);
    v1::DeleteNamedStateRequest request;
    request.set_name("persona");
    v1::DeleteNamedStateResponse deleted;
    EXPECT_EQ(bob->DeleteNamedState(&c, request, &deleted).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    as(c, kBob);
    v1::GenerateRequest request = MakeRequest("hello", "", 4, 1);
    request.set_initial_state("persona");
    auto reader = bob->Generate(&c, request);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    as(c, kBob);
    v1::CreateSessionRequest request;
    request.set_initial_state("persona");
    v1::Session session;
    EXPECT_EQ(bob->CreateSession(&c, request, &session).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext c;
    as(c, kBob);
    v1::ListNamedStatesResponse list;
    ASSERT_TRUE(bob->ListNamedStates(&c, v1::ListNamedStatesRequest(), &list).ok());
    EXPECT_EQ(list.states_size(), 0);
  }
  // Bob's own "persona" is another state; Alice's is untouched.
  const v1::NamedState bobs = create(kBob, "bob's other prompt, longer than alice's");
  EXPECT_NE(bobs.digest(), alices.digest());
  grpc::ClientContext c;
  as(c, kAlice);
  v1::GetNamedStateRequest request;
  request.set_name("persona");
  v1::NamedState again;
  ASSERT_TRUE(alice->GetNamedState(&c, request, &again).ok());
  EXPECT_EQ(again.digest(), alices.digest());
}

TEST_F(AuthTest, OneConnectionServesOneTenant) {
  auto channel = Channel(*server_, false);
  const std::string id = CreateAs(kAlice, channel);
  EXPECT_EQ(Get(kAlice, id, channel), grpc::StatusCode::OK);
  EXPECT_EQ(Get(kBob, id, channel), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Get(kAlice, id, channel), grpc::StatusCode::OK);
}

TEST_F(AuthTest, EachTenantHasItsOwnSessionQuota) {
  const std::string d = *dir_;
  auto server = ServerProcess::Start(
      {"--model=" + *WriteTinyModel(FreshDir("quota-model"), 9),
       "--store_dir=" + FreshDir("quota-store"), "--tls_cert_file=" + d + "/server.pem",
       "--tls_key_file=" + d + "/server.key", "--auth_tokens_file=" + d + "/tokens.txt",
       "--warmup_steps=0", "--max_sessions_per_tenant=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto create = [&](const char* token) {
    auto stub = v1::Linserve::NewStub(Channel(**server, false));
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::Session session;
    grpc::Status status = stub->CreateSession(&context, v1::CreateSessionRequest(), &session);
    return std::make_pair(status, session.id());
  };
  const std::string alice_first = create(kAlice).second;
  ASSERT_FALSE(alice_first.empty());
  ASSERT_TRUE(create(kAlice).first.ok());
  const grpc::Status over = create(kAlice).first;
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("max_sessions_per_tenant = 2"), std::string::npos)
      << over.error_message();
  // Bob's quota is his own.
  EXPECT_TRUE(create(kBob).first.ok());
  EXPECT_TRUE(create(kBob).first.ok());
  EXPECT_EQ(create(kBob).first.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Deleting one of Alice's gives her a place back.
  {
    auto stub = v1::Linserve::NewStub(Channel(**server, false));
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kAlice);
    v1::DeleteSessionRequest request;
    request.set_session_id(alice_first);
    v1::DeleteSessionResponse response;
    ASSERT_TRUE(stub->DeleteSession(&context, request, &response).ok());
  }
  EXPECT_TRUE(create(kAlice).first.ok());
  auto metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "linserve_rejections_total{reason=\"tenant_quota\"}"), 2);
}

TEST_F(AuthTest, HealthNeedsNoToken) {
  auto health = grpc::health::v1::Health::NewStub(Channel(*server_, false));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// The HTTP port: the same certificate, the same tokens and tenants.
TEST_F(AuthTest, TheHttpApiTakesTheSameTokensOverTls) {
  HttpTestClient http(server_->http_port(), *dir_ + "/ca.pem");
  EXPECT_EQ(http.Get("/health").status, 200);  // probes need no token
  const nlohmann::json request = {{"prompt", "hi"}, {"max_tokens", 3}, {"session", "new"}};
  HttpReply missing = http.Post("/v1/completions", request);
  EXPECT_EQ(missing.status, 401) << missing.body;
  EXPECT_EQ(missing.json["error"]["type"], "authentication_error");
  auto bearer = [](const std::string& token) {
    return httplib::Headers{{"Authorization", "Bearer " + token}};
  };
  EXPECT_EQ(http.Post("/v1/completions", request, bearer("wrong-token-0123456789")).status, 401);
  HttpReply alice = http.Post("/v1/completions", request, bearer(kAlice));
  ASSERT_EQ(alice.status, 200) << alice.body;
  const std::string id = alice.json["session_id"];
  // Bob cannot see it, over HTTP or gRPC; Alice continues it.
  const nlohmann::json next = {{"prompt", " there"}, {"max_tokens", 3}, {"session_id", id}};
  HttpReply bob = http.Post("/v1/completions", next, bearer(kBob));
  EXPECT_EQ(bob.status, 404) << bob.body;
  EXPECT_EQ(Get(kBob, id), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Get(kAlice, id), grpc::StatusCode::OK);
  EXPECT_EQ(http.Post("/v1/completions", next, bearer(kAlice)).status, 200);
  // Plain HTTP to the TLS port gets no answer.
  EXPECT_EQ(HttpTestClient(server_->http_port()).Get("/health").status, 0);
}

TEST_F(AuthTest, AnotherTenantsSessionIsNotFoundOnEverySessionRoute) {
  HttpTestClient http(server_->http_port(), *dir_ + "/ca.pem");
  const httplib::Headers alice = {{"Authorization", std::string("Bearer ") + kAlice}};
  const httplib::Headers bob = {{"Authorization", std::string("Bearer ") + kBob}};
  EXPECT_EQ(http.Post("/v1/sessions", nlohmann::json::object()).status, 401);
  HttpReply created = http.Post("/v1/sessions", nlohmann::json{{"prompt", "secret"}}, alice);
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json["id"];
  EXPECT_EQ(http.Get("/v1/sessions/" + id, alice).status, 200);
  EXPECT_EQ(http.Get("/v1/sessions/" + id, bob).status, 404);
  EXPECT_EQ(http.Get("/v1/sessions/" + id + "/state", bob).status, 404);
  EXPECT_EQ(http.Post("/v1/sessions/" + id + "/fork", std::string(), bob).status, 404);
  HttpReply listed = http.Get("/v1/sessions?page_size=100", bob);
  ASSERT_EQ(listed.status, 200) << listed.body;
  for (const nlohmann::json& s : listed.json["data"]) EXPECT_NE(s["id"], id);
  EXPECT_EQ(http.Get("/v1/sessions/" + id + "/state", alice).status, 200);
  EXPECT_EQ(Get(kBob, id), grpc::StatusCode::NOT_FOUND);  // as its gRPC twin
}

TEST_F(AuthTest, MetricsOnTheApiPortTakeTheApiTokens) {
  HttpTestClient http(server_->http_port(), *dir_ + "/ca.pem");
  HttpReply missing = http.Get("/metrics");
  EXPECT_EQ(missing.status, 401) << missing.body;
  EXPECT_EQ(http.Get("/metrics", {{"Authorization", "Bearer wrong-token-0123456789"}}).status, 401);
  HttpReply alice = http.Get("/metrics", {{"Authorization", std::string("Bearer ") + kAlice}});
  ASSERT_EQ(alice.status, 200) << alice.body;
  EXPECT_NE(alice.body.find("linserve_requests_total"), std::string::npos) << alice.body;
}

TEST_F(AuthTest, MutualTlsRequiresACertificateFromTheClientCa) {
  const std::string d = *dir_;
  auto server = ServerProcess::Start(
      {"--model=" + *WriteTinyModel(FreshDir("mtls-model"), 9),
       "--store_dir=" + FreshDir("mtls-store"), "--tls_cert_file=" + d + "/server.pem",
       "--tls_key_file=" + d + "/server.key", "--tls_client_ca_file=" + d + "/ca.pem"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto call = [&](bool cert) {
    auto stub = v1::Linserve::NewStub(Channel(**server, cert));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::ModelInfo info;
    return stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).error_code();
  };
  EXPECT_EQ(call(true), grpc::StatusCode::OK);
  EXPECT_EQ(call(false), grpc::StatusCode::UNAVAILABLE);
  // The HTTP port asks for the same client certificates.
  HttpTestClient with_cert((*server)->http_port(), d + "/ca.pem", d + "/client.pem",
                           d + "/client.key");
  EXPECT_EQ(with_cert.Get("/v1/models").status, 200);
  // Without one, TLS 1.3 lets the client finish its handshake; the server
  // refuses it then, and the request gets no answer.
  HttpTestClient without_cert((*server)->http_port(), d + "/ca.pem");
  without_cert.SetReadTimeout(5);
  EXPECT_EQ(without_cert.Get("/v1/models").status, 0);
}

TEST_F(AuthTest, TokensWithoutTlsAndBadTokenFilesAreRefusedAtStart) {
  const std::string dir = FreshDir("auth-flags");
  std::ofstream(dir + "/short.txt") << "short alice\n";
  std::ofstream(dir + "/ok.txt") << "a-long-enough-token-123 alice\n";
  const std::string model = "--model=" + *WriteTinyModel(FreshDir("auth-flags-model"), 9);
  const std::vector<std::string> base = {LinserveBinary(), model, "--listen=127.0.0.1:0",
                                         "--http_listen=127.0.0.1:0",
                                         "--metrics_port=-1", "--warmup_steps=0"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunProcess(args);
  };
  ProcessResult no_tls = run({"--auth_tokens_file=" + dir + "/ok.txt"});
  EXPECT_EQ(no_tls.exit_code, 1);
  EXPECT_NE(no_tls.err.find("need --tls_cert_file"), std::string::npos) << no_tls.err;
  ProcessResult short_token = run({"--tls_cert_file=" + *dir_ + "/server.pem",
                                   "--tls_key_file=" + *dir_ + "/server.key",
                                   "--auth_tokens_file=" + dir + "/short.txt"});
  EXPECT_EQ(short_token.exit_code, 1);
  EXPECT_NE(short_token.err.find("short.txt:1: a token is at least 16 bytes"), std::string::npos)
      << short_token.err;
}

TEST_F(AuthTest, TheClientSpeaksTlsWithABearerToken) {
  const std::vector<std::string> common = {ClientBinary(), "--server=" + server_->address(),
                                           "--tls", "--ca_cert=" + *dir_ + "/ca.pem"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunProcess(args);
  };
  ProcessResult ok = run({std::string("--token=") + kAlice, "generate", "--max_new_tokens=5", "hi"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  ProcessResult refused = run({"generate", "--max_new_tokens=5", "hi"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("UNAUTHENTICATED"), std::string::npos) << refused.err;
  EXPECT_EQ(run({"health"}).exit_code, 0);
}

}  // namespace
}  // namespace linserve
