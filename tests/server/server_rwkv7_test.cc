// End to end: a real server serving the tiny trained RWKV-7 fixture
// (tests/rwkv7_fixture.h) to a real gRPC client. Everything the server does
// for its own models must work unchanged for this architecture: streaming
// equal to the engine, sessions, fork, export and import, and a start that
// stops with a clear error on a broken model directory.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/model/language_model.h"
#include "engine/generation/one_shot_generation.h"
#include "engine/formats/safetensors.h"
#include "tests/rwkv7_fixture.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr int kTurnTokens = 24;

// Like the engine's RWKV-7 tests, these skip (saying why) where the shared
// fixtures are not beside the checkout.
bool HaveFixtures() { return fs::exists(Rwkv7FixturePath("tiny-rwkv7-fp32.pth")); }
#define SKIP_WITHOUT_FIXTURES() \
  if (!HaveFixtures()) GTEST_SKIP() << "no " << Rwkv7FixturePath("tiny-rwkv7-fp32.pth")

std::unique_ptr<ServerProcess> StartServer(const std::string& model_dir, const std::string& store) {
  auto server = ServerProcess::Start(
      {"--model=" + model_dir, "--store_dir=" + store, "--dtype=float32"});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Greedy, so that the text is a function of the state alone.
std::string Turn(v1::Linserve::Stub& stub, const std::string& session, const std::string& prompt,
                 v1::Finished* finished = nullptr) {
  GenerateOutcome outcome = RunGenerate(stub, MakeRequest(prompt, session, kTurnTokens, 1, 0.0f));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), kTurnTokens);
  if (finished != nullptr) *finished = outcome.finished;
  return outcome.text;
}

class Rwkv7ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFixtures()) return;
    model_dir_ = new std::string(WriteTinyRwkv7Dir(FreshDir("rwkv7-model")));
    server_ = StartServer(*model_dir_, FreshDir("rwkv7-store")).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_dir_;
  }
  void SetUp() override {
    SKIP_WITHOUT_FIXTURES();
    ASSERT_NE(server_, nullptr);
  }

  static std::string* model_dir_;
  static ServerProcess* server_;
};

std::string* Rwkv7ServerTest::model_dir_ = nullptr;
ServerProcess* Rwkv7ServerTest::server_ = nullptr;

TEST_F(Rwkv7ServerTest, ModelInfoReportsTheInferredArchitecture) {
  auto stub = server_->Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "rwkv7");
  EXPECT_EQ(info.tokenizer(), "byte");
  EXPECT_EQ(info.compute_dtype(), "float32");
  EXPECT_EQ(info.vocab_size(), 256);
  // 12 layers × (2 shift vectors of 64 + one 64 × 64 matrix) floats.
  EXPECT_EQ(info.state_bytes_per_session(), 12 * (2 * 64 + 64 * 64) * 4);
  EXPECT_EQ(info.limits().max_prompt_tokens(), info.limits().max_prompt_bytes());
  EXPECT_EQ(info.limits().max_context_tokens(), 0);
  EXPECT_NE(info.config_json().find("\"n_layers\":12"), std::string::npos) << info.config_json();
}

TEST_F(Rwkv7ServerTest, StreamedTextEqualsTheEngines) {
  auto stub = server_->Stub();
  const std::string prompt = "The quick brown fox";
  GenerateOutcome outcome = RunGenerate(*stub, MakeRequest(prompt, "", 120, 4321, 0.8f));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().prompt_tokens(), static_cast<int>(prompt.size()));

  LoadOptions options;
  options.dtype = torch::kFloat32;
  auto model = LanguageModel::Load(*model_dir_, options);
  ASSERT_TRUE(model.ok()) << model.status();
  State state = (*model)->NewState();
  SamplingParams params;
  params.temperature = 0.8f;
  params.seed = 4321;
  params.max_new_tokens = 120;
  auto expected = Generate(**model, state, (*model)->tokenizer().Encode(prompt, true), params);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(outcome.text, expected->text);
}

TEST_F(Rwkv7ServerTest, ThreeTurnsEqualOnePrompt) {
  auto stub = server_->Stub();
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::string p1 = "Once upon a time", p2 = "\n\nThen ", p3 = "\n\nAt last ";
  v1::Finished finished;
  const std::string t1 = Turn(*stub, session->id(), p1);
  const std::string t2 = Turn(*stub, session->id(), p2);
  const std::string t3 = Turn(*stub, session->id(), p3, &finished);
  // The last token of each turn is fed first the next turn (no BOS).
  EXPECT_EQ(finished.position(), static_cast<int64_t>(p1.size() + p2.size() + p3.size()) +
                                     3 * kTurnTokens - 1);
  const std::string whole = p1 + t1 + p2 + t2 + p3;
  ASSERT_EQ(whole.size(), p1.size() + p2.size() + p3.size() + 2 * kTurnTokens)
      << "a turn's text is not one byte a token: " << whole;
  EXPECT_EQ(Turn(*stub, "", whole), t3);
}

// An RWKV-7 directory without chat_template.json gets RWKV's World/G1 chat
// format: a chat is the completion of its rendered text, ended at the blank
// line that ends an assistant turn.
TEST_F(Rwkv7ServerTest, ChatOverHttpUsesTheRwkvFormat) {
  HttpTestClient http(server_->http_port());
  const nlohmann::json messages = {{{"role", "system"}, {"content", "Be brief."}},
                                   {{"role", "user"}, {"content", "Hi"}}};
  const std::string rendered = "System: Be brief.\n\nUser: Hi\n\nAssistant:";
  HttpReply tokens = http.Post("/tokenize", nlohmann::json{{"messages", messages}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  const std::vector<int> bytes(rendered.begin(), rendered.end());  // the byte tokenizer, no BOS
  EXPECT_EQ(tokens.json["tokens"], nlohmann::json(bytes));
  const nlohmann::json chat_request = {{"messages", messages}, {"max_tokens", 40}, {"seed", 5}};
  HttpReply chat = http.Post("/v1/chat/completions", chat_request);
  HttpReply completion = http.Post(
      "/v1/completions",
      nlohmann::json{{"prompt", rendered}, {"max_tokens", 40}, {"seed", 5}, {"stop", "\n\n"}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(chat.json["choices"][0]["message"]["content"], completion.json["choices"][0]["text"]);
  EXPECT_EQ(chat.json["choices"][0]["finish_reason"],
            completion.json["choices"][0]["finish_reason"]);
  EXPECT_TRUE(server_->WaitForLog("\"source\":\"rwkv_world\"", absl::Seconds(1)));
}

TEST_F(Rwkv7ServerTest, ForkContinuesAsTheSource) {
  auto stub = server_->Stub();
  auto source = CreateSession(*stub, "In the beginning ");
  ASSERT_TRUE(source.ok()) << source.status();
  grpc::ClientContext context;
  v1::ForkSessionRequest request;
  request.set_session_id(source->id());
  v1::Session fork;
  ASSERT_TRUE(stub->ForkSession(&context, request, &fork).ok());
  EXPECT_EQ(fork.position(), source->position());
  EXPECT_EQ(Turn(*stub, fork.id(), "was"), Turn(*stub, source->id(), "was"));
}

TEST_F(Rwkv7ServerTest, ExportThenImportIntoAFreshServerContinuesIdentically) {
  auto stub = server_->Stub();
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok());
  Turn(*stub, session->id(), "It was a dark and stormy night");
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string expected = Turn(*stub, session->id(), "; ");

  // A fresh server of the same weights, from the bfloat16 file and computing
  // in float32: the fingerprint names the weights, not how they are stored.
  auto second = StartServer(WriteTinyRwkv7Dir(FreshDir("rwkv7-model-bf16"), "tiny-rwkv7-bf16.pth"),
                            FreshDir("rwkv7-store-b"));
  ASSERT_NE(second, nullptr);
  auto other = second->Stub();
  v1::Session imported;
  grpc::Status status = ImportSession(*other, *file, &imported, 4096);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(imported.position(), session->position() + 30 + kTurnTokens - 1);
  EXPECT_EQ(Turn(*other, imported.id(), "; "), expected);
}

TEST_F(Rwkv7ServerTest, AnInt8ServersSessionMovesToAFloat32Server) {
  // The same weights served in 8 bits: GetModelInfo says so, and its
  // sessions carry the float weights' fingerprint, so the float32 server
  // takes them.
  auto int8 = ServerProcess::Start(
      {"--model=" + *model_dir_, "--store_dir=" + FreshDir("rwkv7-store-int8"), "--dtype=int8"});
  ASSERT_TRUE(int8.ok()) << int8.status();
  auto stub = (*int8)->Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.weight_format(), "int8");
  grpc::ClientContext float_context;
  v1::ModelInfo float_info;
  ASSERT_TRUE(
      server_->Stub()->GetModelInfo(&float_context, v1::GetModelInfoRequest(), &float_info).ok());
  EXPECT_EQ(float_info.weight_format(), "float32");
  EXPECT_EQ(info.fingerprint(), float_info.fingerprint());

  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok());
  Turn(*stub, session->id(), "It was a dark and stormy night");
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();
  v1::Session imported;
  grpc::Status status = ImportSession(*server_->Stub(), *file, &imported, 4096);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(imported.position(), 30 + kTurnTokens - 1);
  Turn(*server_->Stub(), imported.id(), "; ");
}

// The server's exit and its log when started on `model_dir`.
ProcessResult StartOn(const std::string& model_dir) {
  return RunProcess({LinserveBinary(), "--model=" + model_dir, "--listen=127.0.0.1:0",
                     "--http_listen=127.0.0.1:0",
                     "--metrics_port=0", "--store_dir=" + FreshDir("broken-store")});
}

// A model directory whose model.safetensors is the fixture's, edited.
std::string EditedWeightsDir(const std::string& name, void (*edit)(TensorMap&)) {
  const std::string dir = FreshDir(name);
  auto weights = ReadSafetensorsFile(Rwkv7FixturePath("tiny-rwkv7-fp32.safetensors"));
  EXPECT_TRUE(weights.ok()) << weights.status();
  edit(weights->tensors);
  EXPECT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", weights->tensors).ok());
  std::ofstream(dir + "/config.json") << R"({"architecture": "rwkv7", "tokenizer": {"type": "byte"}})";
  return dir;
}

TEST(Rwkv7BrokenModelTest, AMissingTensorStopsTheStartNamingIt) {
  SKIP_WITHOUT_FIXTURES();
  const std::string dir = EditedWeightsDir(
      "rwkv7-missing", [](TensorMap& t) { t.erase("blocks.3.att.key.weight"); });
  ProcessResult result = StartOn(dir);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("blocks.3.att.key.weight"), std::string::npos) << result.err;
}

TEST(Rwkv7BrokenModelTest, AWrongShapeStopsTheStartNamingTheTensor) {
  SKIP_WITHOUT_FIXTURES();
  const std::string dir = EditedWeightsDir("rwkv7-shape", [](TensorMap& t) {
    t["blocks.5.ffn.key.weight"] = t["blocks.5.ffn.key.weight"].narrow(0, 0, 100).contiguous();
  });
  ProcessResult result = StartOn(dir);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("blocks.5.ffn.key.weight"), std::string::npos) << result.err;
}

TEST(Rwkv7BrokenModelTest, ATruncatedPthStopsTheStartNamingAByteOffset) {
  SKIP_WITHOUT_FIXTURES();
  const std::string dir = FreshDir("rwkv7-truncated");
  std::ifstream in(Rwkv7FixturePath("tiny-rwkv7-fp32.pth"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000000u);
  std::ofstream(dir + "/tiny.pth", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  ProcessResult result = StartOn(dir);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("tiny.pth"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("byte"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace linserve
