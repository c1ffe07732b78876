// End to end: named states on a real server over gRPC. Read-only under 32
// concurrent sessions and turns, an uploaded session file starting where the session
// stood, the server's own states from --states_dir, the limits, hostile
// uploads that store nothing, and states that outlive a restart without
// becoming sessions. (Bit-identity with one prompt, for every kind:
// server_prefix_cache_test; tenants: server_auth_test; replicas:
// server_redis_test; state-tuning files: server_rwkv7_test; HTTP:
// server_http_named_states_test.)

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/store/state_file.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

constexpr int64_t kMaxStateBytes = 64 << 20;

std::unique_ptr<ServerProcess> Start(const std::string& model_dir, const std::string& store_dir,
                                     std::vector<std::string> flags = {}) {
  flags.push_back("--model=" + model_dir);
  flags.push_back("--store_dir=" + store_dir);
  flags.push_back("--warmup_steps=0");
  auto server = ServerProcess::Start(flags);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string TinyModel() {
  static const std::string* dir = new std::string(*WriteTinyModel(FreshDir("named-model"), 21));
  return *dir;
}

absl::StatusOr<v1::NamedState> Create(v1::Linserve::Stub& stub, const std::string& name,
                                      const std::string& prompt) {
  grpc::ClientContext context;
  v1::CreateNamedStateRequest request;
  request.set_name(name);
  request.set_prompt(prompt);
  v1::NamedState made;
  const grpc::Status status = stub.CreateNamedState(&context, request, &made);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return made;
}

// UploadNamedState in chunks of 64 KiB.
grpc::Status Upload(v1::Linserve::Stub& stub, const std::string& name, const std::string& bytes,
                    v1::NamedState* made) {
  grpc::ClientContext context;
  auto writer = stub.UploadNamedState(&context, made);
  constexpr size_t kChunk = 64 << 10;
  for (size_t offset = 0; offset == 0 || offset < bytes.size(); offset += kChunk) {
    v1::NamedStateChunk chunk;
    if (offset == 0) chunk.set_name(name);
    chunk.set_data(bytes.substr(offset, kChunk));
    if (!writer->Write(chunk)) break;  // refused early: Finish says why
  }
  writer->WritesDone();
  return writer->Finish();
}

std::vector<std::string> Names(v1::Linserve::Stub& stub) {
  grpc::ClientContext context;
  v1::ListNamedStatesResponse list;
  EXPECT_TRUE(stub.ListNamedStates(&context, v1::ListNamedStatesRequest(), &list).ok());
  std::vector<std::string> names;
  for (const v1::NamedState& state : list.states()) names.push_back(state.name());
  return names;
}

grpc::StatusCode GenerateCode(v1::Linserve::Stub& stub, const v1::GenerateRequest& request) {
  return RunGenerate(stub, request).status.error_code();
}

v1::GenerateRequest From(const std::string& state, const std::string& prompt, uint64_t seed,
                         float temperature = 0.0f) {
  v1::GenerateRequest request = MakeRequest(prompt, "", 16, seed, temperature);
  request.set_initial_state(state);
  return request;
}

// The state a session made from `state` holds, as its exported payload.
std::string PayloadOf(v1::Linserve::Stub& stub, const std::string& state) {
  grpc::ClientContext context;
  v1::CreateSessionRequest request;
  request.set_initial_state(state);
  v1::Session session;
  const grpc::Status status = stub.CreateSession(&context, request, &session);
  EXPECT_TRUE(status.ok()) << status.error_message();
  auto file = ExportSession(stub, session.id());
  EXPECT_TRUE(file.ok()) << file.status();
  auto record = DecodeStateFile(file.value_or(""), kMaxStateBytes);
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? record->payload : "";
}

// 32 sessions made from one named state at once, each with a prompt of its
// own and a turn, beside 32 stateless turns from it: the state is unchanged.
TEST(NamedStatesTest, ThirtyTwoConcurrentSessionsLeaveTheStateUnchanged) {
  auto server = Start(TinyModel(), FreshDir("named-read-only"));
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto made = Create(*stub, "shared", "A long system prompt that every turn starts from.\n");
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string before = PayloadOf(*stub, "shared");
  ASSERT_FALSE(before.empty());
  const std::string greedy = RunGenerate(*stub, From("shared", "Q: ", 1)).text;

  std::vector<std::thread> threads;
  std::vector<grpc::Status> sessions(32), turns(32), stateless(32);
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] {
      auto own = server->Stub();
      grpc::ClientContext context;
      v1::CreateSessionRequest create;
      create.set_initial_state("shared");
      create.set_prompt("user " + std::to_string(i) + ": ");
      v1::Session session;
      sessions[i] = own->CreateSession(&context, create, &session);
      if (sessions[i].ok()) {
        turns[i] = RunGenerate(*own, MakeRequest("hello", session.id(), 16, i + 1, 1.0f)).status;
      }
    });
    threads.emplace_back([&, i] {
      auto own = server->Stub();
      stateless[i] =
          RunGenerate(*own, From("shared", "turn " + std::to_string(i), i + 1, 1.0f)).status;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 32; ++i) {
    EXPECT_TRUE(sessions[i].ok()) << i << sessions[i].error_message();
    EXPECT_TRUE(turns[i].ok()) << i << turns[i].error_message();
    EXPECT_TRUE(stateless[i].ok()) << i << stateless[i].error_message();
  }

  EXPECT_EQ(PayloadOf(*stub, "shared"), before) << "a turn advanced the named state itself";
  EXPECT_EQ(RunGenerate(*stub, From("shared", "Q: ", 1)).text, greedy);
  grpc::ClientContext context;
  v1::GetNamedStateRequest get;
  get.set_name("shared");
  v1::NamedState again;
  ASSERT_TRUE(stub->GetNamedState(&context, get, &again).ok());
  EXPECT_EQ(again.digest(), made->digest());
  const std::string metrics = ScrapeMetrics(server->metrics_port()).value_or("");
  EXPECT_GE(MetricValue(metrics, "linserve_named_state_uses_total{name=\"\",scope=\"tenant\"}"),
            32 + 32 + 2 + 2);
  EXPECT_EQ(metrics.find("shared"), std::string::npos) << "a tenant's name reached /metrics";
}

TEST(NamedStatesTest, AnUploadedSessionFileStartsWhereTheSessionStood) {
  auto server = Start(TinyModel(), FreshDir("named-upload"));
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto session = CreateSession(*stub, "The session's own prompt, its last byte held back");
  ASSERT_TRUE(session.ok()) << session.status();
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();
  v1::NamedState made;
  const grpc::Status uploaded = Upload(*stub, "exported", *file, &made);
  ASSERT_TRUE(uploaded.ok()) << uploaded.error_message();
  EXPECT_EQ(made.source(), "state_file");
  EXPECT_EQ(made.position(), session->position());
  // Its pending token goes first, as the session's next turn feeds it.
  const GenerateOutcome from_state = RunGenerate(*stub, From("exported", " and then", 7, 0.9f));
  const GenerateOutcome from_session =
      RunGenerate(*stub, MakeRequest(" and then", session->id(), 16, 7, 0.9f));
  ASSERT_TRUE(from_state.status.ok()) << from_state.status.error_message();
  ASSERT_TRUE(from_session.status.ok()) << from_session.status.error_message();
  EXPECT_EQ(from_state.text, from_session.text);
  EXPECT_FALSE(from_state.text.empty());
}

TEST(NamedStatesTest, TheServersOwnStatesAreEveryonesAndReadOnly) {
  // A state file of the same model, exported from a first server.
  const std::string states = FreshDir("named-global-states");
  {
    auto first = Start(TinyModel(), FreshDir("named-global-first"));
    ASSERT_NE(first, nullptr);
    auto stub = first->Stub();
    auto session = CreateSession(*stub, "You are a pirate. Answer like one.\n");
    ASSERT_TRUE(session.ok()) << session.status();
    auto file = ExportSession(*stub, session->id());
    ASSERT_TRUE(file.ok()) << file.status();
    std::ofstream(states + "/pirate.state", std::ios::binary) << *file;
  }
  auto server = Start(TinyModel(), FreshDir("named-global"), {"--states_dir=" + states});
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  grpc::ClientContext info_context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info).ok());
  ASSERT_EQ(info.named_states_size(), 1);
  EXPECT_EQ(info.named_states(0).name(), "pirate");
  EXPECT_TRUE(info.named_states(0).global());
  EXPECT_EQ(info.named_states(0).source(), "state_file");
  EXPECT_EQ(info.limits().max_state_upload_bytes(), 16 << 20);
  EXPECT_EQ(Names(*stub), std::vector<std::string>{"pirate"});

  EXPECT_EQ(GenerateCode(*stub, From("pirate", "Hello", 1)), grpc::StatusCode::OK);
  EXPECT_EQ(GenerateCode(*stub, From("pirate", "Hello", 2)), grpc::StatusCode::OK);
  grpc::ClientContext delete_context;
  v1::DeleteNamedStateRequest remove;
  remove.set_name("pirate");
  v1::DeleteNamedStateResponse removed;
  EXPECT_EQ(stub->DeleteNamedState(&delete_context, remove, &removed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Create(*stub, "pirate", "shadow it").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(GenerateCode(*stub, From("pirate", "Still there", 3)), grpc::StatusCode::OK);

  const std::string metrics = ScrapeMetrics(server->metrics_port()).value_or("");
  EXPECT_EQ(MetricValue(metrics, "linserve_named_states{scope=\"global\"}"), 1);
  EXPECT_EQ(
      MetricValue(metrics, "linserve_named_state_uses_total{name=\"pirate\",scope=\"global\"}"), 3);

  // A file the server cannot read stops the start, naming it.
  std::ofstream(states + "/broken.state", std::ios::binary) << "LNSVSTAT not really";
  ProcessResult refused =
      RunProcess({LinserveBinary(), "--model=" + TinyModel(), "--listen=127.0.0.1:0",
                  "--http_listen=", "--metrics_port=-1", "--warmup_steps=0",
                  "--store_dir=" + FreshDir("named-global-broken"), "--states_dir=" + states});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("broken.state"), std::string::npos) << refused.err;
}

TEST(NamedStatesTest, NamesLimitsAndConflictsAreClearErrors) {
  auto server = Start(TinyModel(), FreshDir("named-limits"),
                      {"--max_named_states_per_tenant=2"});
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  ASSERT_TRUE(Create(*stub, "one", "first").ok());
  EXPECT_EQ(Create(*stub, "one", "again").status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(Create(*stub, "two", "second").ok());
  const absl::Status third = Create(*stub, "three", "third").status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("max_named_states_per_tenant = 2"), std::string::npos) << third;
  for (const std::string& bad :
       std::vector<std::string>{"", "../up", "a/b", std::string(65, 'n'), ".."}) {
    EXPECT_EQ(Create(*stub, bad, "x").status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(Create(*stub, "empty", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateCode(*stub, From("nobody", "x", 1)), grpc::StatusCode::NOT_FOUND);
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok());
  v1::GenerateRequest both = From("one", "x", 1);
  both.set_session_id(session->id());
  EXPECT_EQ(GenerateCode(*stub, both), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext delete_context;
  v1::DeleteNamedStateRequest remove;
  remove.set_name("two");
  v1::DeleteNamedStateResponse removed;
  ASSERT_TRUE(stub->DeleteNamedState(&delete_context, remove, &removed).ok());
  EXPECT_TRUE(Create(*stub, "three", "third").ok()) << "a deleted state frees its place";
  EXPECT_EQ(GenerateCode(*stub, From("two", "x", 1)), grpc::StatusCode::NOT_FOUND);

  auto bytes_server = Start(TinyModel(), FreshDir("named-bytes"),
                            {"--max_named_state_bytes_per_tenant=1000"});
  ASSERT_NE(bytes_server, nullptr);
  const absl::Status big = Create(*bytes_server->Stub(), "big", "any").status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("max_named_state_bytes_per_tenant = 1000"), std::string::npos)
      << big;
}

TEST(NamedStatesTest, HostileUploadsAreRefusedAndStoreNothing) {
  const std::string store = FreshDir("named-hostile");
  auto server = Start(TinyModel(), store);
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  auto session = CreateSession(*stub, "a session to export");
  ASSERT_TRUE(session.ok());
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok());
  auto other_model = Start(*WriteTinyModel(FreshDir("named-other-model"), 22),
                           FreshDir("named-other-store"));
  ASSERT_NE(other_model, nullptr);
  auto foreign_session = CreateSession(*other_model->Stub(), "another model's");
  ASSERT_TRUE(foreign_session.ok());
  auto foreign = ExportSession(*other_model->Stub(), foreign_session->id());
  ASSERT_TRUE(foreign.ok());
  std::string flipped = *file;
  flipped[flipped.size() / 2] ^= 1;

  struct Case {
    std::string what;
    std::string bytes;
    grpc::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"garbage", std::string(4096, 'z'), grpc::StatusCode::INVALID_ARGUMENT, "state-tuning"},
      {"truncated", file->substr(0, file->size() / 2), grpc::StatusCode::DATA_LOSS,
       "linserve state file"},
      {"flipped bit", flipped, grpc::StatusCode::DATA_LOSS, "checksum"},
      {"another model", *foreign, grpc::StatusCode::FAILED_PRECONDITION, "model"},
      {"a zip for this model", std::string("PK\x03\x04", 4) + std::string(100, '\0'),
       grpc::StatusCode::INVALID_ARGUMENT, "RWKV-7"},
  };
  for (const Case& c : cases) {
    v1::NamedState made;
    const grpc::Status status = Upload(*stub, "hostile", c.bytes, &made);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.says), std::string::npos)
        << c.what << ": " << status.error_message();
  }
  EXPECT_TRUE(Names(*stub).empty());
  EXPECT_FALSE(std::filesystem::exists(store + "/named")) << "a refused upload left a file";

  // Over the upload limit: refused while the chunks arrive.
  auto small = Start(TinyModel(), FreshDir("named-small"), {"--max_state_upload_bytes=4096"});
  ASSERT_NE(small, nullptr);
  v1::NamedState made;
  const grpc::Status over = Upload(*small->Stub(), "big", *file, &made);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(over.error_message().find("max_state_upload_bytes = 4096"), std::string::npos)
      << over.error_message();
  EXPECT_TRUE(Names(*small->Stub()).empty());
  // The whole file is fine where it fits.
  ASSERT_TRUE(Upload(*stub, "fine", *file, &made).ok());
  EXPECT_EQ(Names(*stub), std::vector<std::string>{"fine"});
}

TEST(NamedStatesTest, StatesOutliveARestartAndNeverBecomeSessions) {
  const std::string store = FreshDir("named-restart");
  std::string text, digest;
  {
    auto server = Start(TinyModel(), store);
    ASSERT_NE(server, nullptr);
    auto stub = server->Stub();
    auto made = Create(*stub, "kept", "A prompt digested once for all time.\n");
    ASSERT_TRUE(made.ok()) << made.status();
    digest = made->digest();
    text = RunGenerate(*stub, From("kept", "Go", 1)).text;
    ASSERT_FALSE(text.empty());
  }
  auto server = Start(TinyModel(), store);
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  EXPECT_EQ(SessionCount(*stub), 0) << "the start-up scan read a named state as a session";
  EXPECT_EQ(Names(*stub), std::vector<std::string>{"kept"});
  EXPECT_EQ(RunGenerate(*stub, From("kept", "Go", 1)).text, text);
  grpc::ClientContext context;
  v1::GetNamedStateRequest get;
  get.set_name("kept");
  v1::NamedState again;
  ASSERT_TRUE(stub->GetNamedState(&context, get, &again).ok());
  EXPECT_EQ(again.digest(), digest);
  EXPECT_EQ(again.source(), "prompt");
}

}  // namespace
}  // namespace linserve
