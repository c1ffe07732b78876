// End to end: a real server serving the tiny trained RWKV-7 fixture
// (tests/rwkv7_fixture.h) to a real gRPC client. Everything the server does
// for its own models must work unchanged for this architecture: streaming
// equal to the engine, sessions, fork, export and import, and a start that
// stops with a clear error on a broken model directory. Its own: state-tuning
// files (RWKV-PEFT .pth, ai00 .state) uploaded as named states.

#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/model/language_model.h"
#include "engine/generation/one_shot_generation.h"
#include "engine/formats/pth_writer.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7_config.h"
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

// State-tuning files uploaded as named states (UploadNamedState): RWKV-PEFT's
// .pth and ai00's .state, written here from the same asymmetric matrices.

// The fixture's state: 12 layers of one head of 64 (ModelInfo above).
constexpr int64_t kLayers = 12, kHeads = 1, kHeadSize = 64;

std::string TimeState(int64_t layer) { return absl::StrCat("blocks.", layer, ".att.time_state"); }

// RWKV-PEFT's torch.save of every layer's time_state, (H, N, N) [head][value][key].
std::string PeftFile(const std::vector<torch::Tensor>& states) {
  TensorMap tensors;
  for (size_t i = 0; i < states.size(); ++i) tensors[TimeState(i)] = states[i];
  return SerializePth(tensors);
}

// ai00's converter: the last two axes swapped, float16, as safetensors.
std::string Ai00File(const std::vector<torch::Tensor>& states) {
  TensorMap tensors;
  for (size_t i = 0; i < states.size(); ++i) {
    tensors[TimeState(i)] = states[i].transpose(1, 2).to(torch::kFloat16).contiguous();
  }
  return SerializeSafetensors(tensors, {{"format", "pt"}});
}

// Asymmetric (a transposed read gives another state), of multiples of 1/256
// in [-1, 1]: float16 and bfloat16 hold them exactly, so every file below
// holds the same numbers.
std::vector<torch::Tensor> TunedMatrices() {
  torch::manual_seed(17);
  std::vector<torch::Tensor> states;
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    torch::Tensor m =
        torch::randint(-256, 257, {kHeads, kHeadSize, kHeadSize}, torch::kFloat32) / 256.0;
    EXPECT_FALSE(torch::equal(m, m.transpose(1, 2)));
    states.push_back(m.contiguous());
  }
  return states;
}

// UploadNamedState in chunks of `chunk_bytes` (the name in the first).
grpc::Status Upload(v1::Linserve::Stub& stub, const std::string& name, const std::string& bytes,
                    v1::NamedState* made, size_t chunk_bytes = 4096) {
  grpc::ClientContext context;
  auto writer = stub.UploadNamedState(&context, made);
  for (size_t at = 0; at == 0 || at < bytes.size(); at += chunk_bytes) {
    v1::NamedStateChunk chunk;
    if (at == 0) chunk.set_name(name);
    chunk.set_data(bytes.substr(at, chunk_bytes));
    if (!writer->Write(chunk)) break;  // the server has answered
  }
  writer->WritesDone();
  return writer->Finish();
}

// The names ListNamedStates answers, in its order.
std::vector<std::string> NamedStateNames(v1::Linserve::Stub& stub) {
  grpc::ClientContext context;
  v1::ListNamedStatesResponse listing;
  grpc::Status status = stub.ListNamedStates(&context, v1::ListNamedStatesRequest(), &listing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> names;
  for (const v1::NamedState& state : listing.states()) names.push_back(state.name());
  return names;
}

// 16 greedy tokens after "g", from `initial_state` ("": a fresh state). The
// tiny model's text soon settles into " the the the" whatever the state, and
// a tuned state at position 0 fades as the prompt is fed: after the one byte
// "g" these matrices turn the first token from " " into "e" (the margins,
// in log-probability, about 0.08 and 0.02 either way).
std::string TextFrom(v1::Linserve::Stub& stub, const std::string& initial_state) {
  v1::GenerateRequest request = MakeRequest("g", "", 16, 1, 0.0f);
  request.set_initial_state(initial_state);
  GenerateOutcome outcome = RunGenerate(stub, request);
  EXPECT_TRUE(outcome.status.ok()) << initial_state << ": " << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 16);
  return outcome.text;
}

TEST_F(Rwkv7ServerTest, APeftFileAndAnAi00FileOfTheSameMatricesAreOneState) {
  auto stub = server_->Stub();
  const std::vector<torch::Tensor> tuned = TunedMatrices();
  v1::NamedState peft, ai00, bf16;
  grpc::Status status = Upload(*stub, "tuned-peft", PeftFile(tuned), &peft);
  ASSERT_TRUE(status.ok()) << status.error_message();
  status = Upload(*stub, "tuned-ai00", Ai00File(tuned), &ai00);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(peft.source(), "rwkv_peft");
  EXPECT_EQ(ai00.source(), "ai00");
  EXPECT_EQ(peft.position(), 0);
  EXPECT_EQ(ai00.position(), 0);
  EXPECT_FALSE(peft.digest().empty());
  EXPECT_EQ(peft.digest(), ai00.digest()) << "the two layouts read to different states";

  // bfloat16 holds the same numbers: the same state again.
  std::vector<torch::Tensor> tuned_bf16;
  for (const torch::Tensor& m : tuned) tuned_bf16.push_back(m.to(torch::kBFloat16));
  status = Upload(*stub, "tuned-peft-bf16", PeftFile(tuned_bf16), &bf16);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(bf16.source(), "rwkv_peft");
  EXPECT_EQ(bf16.digest(), peft.digest());

  const std::string from_peft = TextFrom(*stub, "tuned-peft");
  EXPECT_EQ(TextFrom(*stub, "tuned-ai00"), from_peft);
  EXPECT_EQ(TextFrom(*stub, "tuned-peft-bf16"), from_peft);
  EXPECT_NE(TextFrom(*stub, ""), from_peft) << "the tuned state changes nothing";
}

// A session made from a state-tuned state stands at position 0, as a fresh
// one does; its first turn must still never resume from a fresh state's
// cached prefix (the session keeps its origin's digest for that).
TEST_F(Rwkv7ServerTest, ASessionFromATunedStateNeverResumesFromAFreshPrefix) {
  auto stub = server_->Stub();
  v1::NamedState tuned;
  const grpc::Status uploaded = Upload(*stub, "tuned-origin", PeftFile(TunedMatrices()), &tuned);
  ASSERT_TRUE(uploaded.ok()) << uploaded.error_message();
  // 100 bytes, a token each: three whole chunks of 32 and 4 more.
  const std::string prompt =
      "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
      "age of fool";
  ASSERT_GE(prompt.size(), 96u);
  auto run = [&](v1::GenerateRequest request) {
    request.set_logprobs(true);
    request.set_top_logprobs(2);
    GenerateOutcome outcome = RunGenerate(*stub, request);
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    return outcome;
  };
  auto output = [](const GenerateOutcome& outcome) {
    std::string out;
    for (v1::GenerateResponse message : outcome.messages) {
      message.clear_finished();
      out += message.SerializeAsString();
    }
    return out;
  };
  // Twice from a fresh state: the cache keeps that prefix's state.
  for (int i = 0; i < 2; ++i) run(MakeRequest(prompt, "", 4, 1, 0.0f));
  v1::GenerateRequest stateless = MakeRequest(prompt, "", 8, 1, 0.0f);
  stateless.set_initial_state("tuned-origin");
  const GenerateOutcome from_state = run(stateless);
  EXPECT_EQ(from_state.finished.usage().cached_tokens(), 0);

  grpc::ClientContext context;
  v1::CreateSessionRequest create;
  create.set_initial_state("tuned-origin");
  v1::Session session;
  ASSERT_TRUE(stub->CreateSession(&context, create, &session).ok());
  EXPECT_EQ(session.position(), 0);
  const GenerateOutcome in_session = run(MakeRequest(prompt, session.id(), 8, 1, 0.0f));
  EXPECT_EQ(in_session.finished.usage().cached_tokens(), 0)
      << "the session's first turn resumed from a fresh state's prefix";
  EXPECT_EQ(output(in_session), output(from_state));
}

TEST_F(Rwkv7ServerTest, HostileStateTuningUploadsAreRefusedAndNothingIsStored) {
  auto stub = server_->Stub();
  const std::vector<torch::Tensor> tuned = TunedMatrices();
  const std::vector<std::string> before = NamedStateNames(*stub);
  grpc::ClientContext info_context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info).ok());

  // Each refused with INVALID_ARGUMENT (or DATA_LOSS for a damaged file)
  // and a message holding `says`; nothing is stored under its name.
  auto refused = [&](const std::string& what, const std::string& bytes, const std::string& says,
                     size_t chunk_bytes = 4096) {
    SCOPED_TRACE(what);
    v1::NamedState made;
    grpc::Status status = Upload(*stub, "hostile", bytes, &made, chunk_bytes);
    EXPECT_FALSE(status.ok()) << made.DebugString();
    EXPECT_TRUE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                status.error_code() == grpc::StatusCode::DATA_LOSS)
        << status.error_code() << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
    EXPECT_EQ(NamedStateNames(*stub), before);
    grpc::ClientContext context;
    v1::GetNamedStateRequest get;
    get.set_name("hostile");
    v1::NamedState got;
    EXPECT_EQ(stub->GetNamedState(&context, get, &got).error_code(),
              grpc::StatusCode::NOT_FOUND);
  };

  std::vector<torch::Tensor> states = tuned;
  states[3] = torch::zeros({kHeads, kHeadSize, kHeadSize - 1});
  refused("wrong N", PeftFile(states), "tensor 'blocks.3.att.time_state' has shape (1, 64, 63)");
  states = tuned;
  states[7] = torch::zeros({kHeads + 1, kHeadSize, kHeadSize});
  refused("wrong H", PeftFile(states), "tensor 'blocks.7.att.time_state' has shape (2, 64, 64)");
  refused("wrong H in ai00's layout", Ai00File(states), "'blocks.7.att.time_state'");

  states = tuned;
  states.pop_back();
  refused("a missing layer", PeftFile(states), "no tensor 'blocks.11.att.time_state'");

  states = tuned;
  states[5] = states[5].clone();
  states[5][0][1][2] = std::numeric_limits<float>::quiet_NaN();
  refused("a NaN", PeftFile(states), "'blocks.5.att.time_state' holds a NaN");
  refused("a NaN in ai00's layout", Ai00File(states), "'blocks.5.att.time_state' holds a NaN");

  const std::string whole = PeftFile(tuned);
  refused("a truncated .pth", whole.substr(0, whole.size() / 2), "truncated");
  const std::string whole_ai00 = Ai00File(tuned);
  refused("a truncated .state", whole_ai00.substr(0, whole_ai00.size() / 2), "truncated");
  refused("garbage", "just some garbage bytes, neither zip nor safetensors",
          "neither a .pth (zip) nor a safetensors file");

  // Past max_state_upload_bytes, in chunks as large as allowed: refused
  // when the count passes the limit (the rest is never read).
  const int64_t limit = info.limits().max_state_upload_bytes();
  const int64_t chunk = info.limits().max_state_chunk_bytes();
  ASSERT_GT(limit, 0);
  ASSERT_GT(chunk, 0);
  refused("an upload past the limit", std::string(limit + 2 * chunk, 'x'),
          absl::StrCat("exceeds max_state_upload_bytes = ", limit), chunk);

  // The same server still takes a good file.
  v1::NamedState made;
  grpc::Status status = Upload(*stub, "after-hostile", whole, &made);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(made.source(), "rwkv_peft");
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


// A model directory holding a Hugging Face tokenizer.json (the qwen35-style
// fixture, Qwen3.5's added-token layout) served end to end: /v1/models and
// GetModelInfo report the tokenizer and its special ranges, /tokenize knows
// the added tokens, and a turn forced onto a token by logit_bias shows a
// special token's text only with skip_special_tokens false, and a
// non-special added token (<think>) always.
TEST(HuggingFaceTokenizerServerTest, SpecialTokensShowOnlyWhenAskedAndThinkAlways) {
  const fs::path tokenizer_json = fs::path(Rwkv7FixturePath("x")).parent_path().parent_path() /
                                  "tokenizers" / "qwen35-style" / "tokenizer.json";
  if (!fs::exists(tokenizer_json)) GTEST_SKIP() << "no " << tokenizer_json;
  Rwkv7Config shape;
  shape.n_layers = 1;
  shape.d_model = 64;
  shape.n_heads = 1;
  shape.head_size = 64;
  shape.w_lora = shape.a_lora = shape.v_lora = shape.g_lora = 8;
  shape.ffn_size = 128;
  shape.vocab_size = 3328;
  const fs::path dir = FreshDir("hf-tokenizer-model");
  ASSERT_TRUE(WriteSafetensorsFile((dir / "model.safetensors").string(),
                                   RandomRwkv7Weights(shape, 3)).ok());
  std::ofstream(dir / "config.json") << R"({"architecture": "rwkv7"})";
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  fs::copy_file(tokenizer_json, dir / "tokenizer.json");
  std::unique_ptr<ServerProcess> server = StartServer(dir.string(), FreshDir("hf-tokenizer-store"));
  ASSERT_NE(server, nullptr);
  HttpTestClient http(server->http_port());

  HttpReply models = http.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const nlohmann::json& model = models.json["data"][0];
  EXPECT_EQ(model["tokenizer"], "huggingface");
  auto stub = server->Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  ASSERT_EQ(static_cast<size_t>(info.special_token_ranges_size()),
            model["special_token_ranges"].size());
  for (int i = 0; i < info.special_token_ranges_size(); ++i) {
    EXPECT_EQ(model["special_token_ranges"][i]["begin"], info.special_token_ranges(i).begin());
    EXPECT_EQ(model["special_token_ranges"][i]["end"], info.special_token_ranges(i).end());
  }

  auto id_of = [&](const std::string& text) -> int64_t {
    HttpReply tokens = http.Post("/tokenize", nlohmann::json{{"prompt", text}});
    EXPECT_EQ(tokens.status, 200) << tokens.body;
    EXPECT_EQ(tokens.json["tokens"].size(), 1u) << text << ": " << tokens.body;
    return tokens.json["tokens"].empty() ? -1 : tokens.json["tokens"][0].get<int64_t>();
  };
  const int64_t im_start = id_of("<|im_start|>");
  const int64_t think = id_of("<think>");
  auto in_ranges = [&](int64_t id) {
    for (const auto& range : info.special_token_ranges()) {
      if (id >= range.begin() && id < range.end()) return true;
    }
    return false;
  };
  EXPECT_TRUE(in_ranges(im_start)) << im_start;  // special: carries no text by default
  EXPECT_FALSE(in_ranges(think)) << think;       // an ordinary piece of text

  auto forced = [&](int64_t id, std::optional<bool> skip_special) {
    nlohmann::json request = {{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true},
                              {"temperature", 0.0},
                              {"logit_bias", {{std::to_string(id), 100}}}};
    if (skip_special.has_value()) request["skip_special_tokens"] = *skip_special;
    HttpReply reply = http.Post("/v1/completions", request);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return CompletionText(reply);
  };
  EXPECT_EQ(forced(im_start, std::nullopt), "");
  EXPECT_EQ(forced(im_start, true), "");
  EXPECT_EQ(forced(im_start, false), "<|im_start|><|im_start|><|im_start|>");
  EXPECT_EQ(forced(think, std::nullopt), "<think><think><think>");
  EXPECT_EQ(forced(think, false), "<think><think><think>");
  server.reset();

  // The pre-tokenizer regex's bound is the server's flag: past it, a prompt
  // is refused by name (429, RESOURCE_EXHAUSTED) and the server serves on.
  auto bounded = ServerProcess::Start({"--model=" + dir.string(),
                                       "--store_dir=" + FreshDir("hf-tokenizer-store-2"),
                                       "--dtype=float32", "--tokenizer_regex_match_limit=1"});
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  HttpTestClient limited((*bounded)->http_port());
  HttpReply refused = limited.Post("/v1/completions", nlohmann::json{{"prompt", "Hello, world"},
                                                                     {"max_tokens", 2}});
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("--tokenizer_regex_match_limit"), std::string::npos) << refused.body;
  EXPECT_EQ(limited.Get("/health").status, 200);
}

}  // namespace
}  // namespace linserve
