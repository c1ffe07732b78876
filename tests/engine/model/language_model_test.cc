// Model directories: save and load through real files, with clear errors for
// every way a weights file can be wrong.

#include <filesystem>
#include <fstream>

#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "engine/model/fingerprint.h"
#include "engine/transformer/transformer_model.h"
#include "engine/generation/one_shot_generation.h"
#include "engine/formats/safetensors.h"
#include "engine/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

class LanguageModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_model_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    model_ = TransformerModel::Create(ConfigNamed("vq"), 5, torch::kCPU);
    ASSERT_TRUE(model_->Save(dir_.string()).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WeightsPath() const { return (dir_ / "model.safetensors").string(); }

  // Rewrites the weights file after `edit` changes its tensors.
  void EditWeights(const std::function<void(TensorMap&)>& edit) {
    auto contents = ReadSafetensorsFile(WeightsPath());
    ASSERT_TRUE(contents.ok()) << contents.status();
    edit(contents->tensors);
    ASSERT_TRUE(WriteSafetensorsFile(WeightsPath(), contents->tensors).ok());
  }

  std::string LoadError() {
    auto loaded = TransformerModel::Load(dir_.string(), LoadOptions{});
    return loaded.ok() ? "" : std::string(loaded.status().message());
  }

  fs::path dir_;
  std::unique_ptr<TransformerModel> model_;
};

TEST_F(LanguageModelFilesTest, LoadGivesBitIdenticalWeightsAndOutputs) {
  auto loaded = TransformerModel::Load(dir_.string(), LoadOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto original = model_->module()->named_parameters();
  for (const auto& item : (*loaded)->module()->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), original[item.key()])) << item.key();
  }
  State a = model_->NewState(), b = (*loaded)->NewState();
  auto la = model_->Prefill(a, {1, 2, 3, 4, 5});
  auto lb = (*loaded)->Prefill(b, {1, 2, 3, 4, 5});
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(*la, *lb);
  EXPECT_EQ((*loaded)->config().attention.kind, AttentionKind::kVq);
}

TEST_F(LanguageModelFilesTest, MissingTensorIsNamed) {
  EditWeights([](TensorMap& t) { t.erase("blocks.1.mlp.fc.weight"); });
  EXPECT_NE(LoadError().find("missing tensor 'blocks.1.mlp.fc.weight'"), std::string::npos)
      << LoadError();
}

TEST_F(LanguageModelFilesTest, UnknownKeyIsNamed) {
  EditWeights([](TensorMap& t) { t["blocks.0.attn.extra"] = torch::zeros({2}); });
  EXPECT_NE(LoadError().find("unknown tensor 'blocks.0.attn.extra'"), std::string::npos)
      << LoadError();
}

TEST_F(LanguageModelFilesTest, WrongDtypeIsNamed) {
  EditWeights([](TensorMap& t) { t["norm.weight"] = t["norm.weight"].to(torch::kFloat16); });
  EXPECT_NE(LoadError().find("'norm.weight' has dtype F16, expected F32"), std::string::npos)
      << LoadError();
}

TEST_F(LanguageModelFilesTest, WrongShapeIsNamed) {
  EditWeights([](TensorMap& t) { t["embed.weight"] = torch::zeros({258, 31}); });
  EXPECT_NE(LoadError().find("'embed.weight' has shape [258, 31], expected [258, 32]"),
            std::string::npos)
      << LoadError();
}

TEST_F(LanguageModelFilesTest, TruncatedFileSaysSo) {
  const auto size = fs::file_size(WeightsPath());
  fs::resize_file(WeightsPath(), size - 100);
  EXPECT_NE(LoadError().find("truncated"), std::string::npos) << LoadError();
}

TEST_F(LanguageModelFilesTest, BadConfigKeyIsNamed) {
  std::ofstream(dir_ / "config.json") << R"({"d_model": 32, "n_layer": 2})";
  EXPECT_NE(LoadError().find("unknown key 'n_layer'"), std::string::npos) << LoadError();
}

TEST_F(LanguageModelFilesTest, FingerprintFollowsConfigAndWeights) {
  const std::string fingerprint = model_->Fingerprint();
  EXPECT_EQ(fingerprint.size(), 64u);
  EXPECT_EQ(fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos) << fingerprint;
  auto loaded = TransformerModel::Load(dir_.string(), LoadOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->Fingerprint(), fingerprint) << "a saved and loaded model is the same model";

  EditWeights([](TensorMap& t) { t["norm.weight"][3] += 1e-3; });
  auto edited = TransformerModel::Load(dir_.string(), LoadOptions{});
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_NE((*edited)->Fingerprint(), fingerprint) << "one weight changed";

  ModelConfig same_weights_other_config = model_->config();
  same_weights_other_config.attention.chunk_size *= 2;
  EXPECT_NE(ModelFingerprint(same_weights_other_config, model_->Weights()), fingerprint);
}

// Greedy decoding through Generate (chunked prefill, then recurrent steps)
// picks the argmax of the quadratic reference form at every position.
TEST(GenerateTest, GreedyFollowsTheReferenceForm) {
  for (const char* kind : {"linear_elu", "vq", "compressed", "softmax"}) {
    auto model = TransformerModel::Create(ConfigNamed(kind), 11, torch::kCPU);
    const std::vector<int64_t> prompt = Tokenizer(model->config()).Encode("To be, or", /*starts_text=*/true);
    SamplingParams params;
    params.temperature = 0.0f;
    params.max_new_tokens = 12;
    params.ignore_eos = true;
    State state = model->NewState();
    auto result = Generate(*model, state, prompt, params);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->finish, FinishReason::kLength);
    ASSERT_EQ(result->tokens.size(), 12u);
    // The state stands before the last sampled token.
    EXPECT_EQ(state.positions[0], static_cast<int64_t>(prompt.size()) + 11);

    std::vector<int64_t> sequence = prompt;
    sequence.insert(sequence.end(), result->tokens.begin(), result->tokens.end());
    torch::NoGradGuard no_grad;
    torch::Tensor logits = model->module()->ForwardReference(
        torch::tensor(sequence, torch::kInt64).unsqueeze(0))[0];  // (T, V)
    torch::Tensor expected = logits.narrow(0, prompt.size() - 1, 12).argmax(-1);
    EXPECT_EQ(std::vector<int64_t>(expected.data_ptr<int64_t>(),
                                   expected.data_ptr<int64_t>() + expected.numel()),
              result->tokens)
        << kind;
  }
}

TEST(GenerateTest, SameSeedSameTextAndStopsEndTheTurn) {
  auto model = TransformerModel::Create(ConfigNamed("linear_cosine"), 12, torch::kCPU);
  const std::vector<int64_t> prompt = Tokenizer(model->config()).Encode("Hello", /*starts_text=*/true);
  SamplingParams params;
  params.seed = 99;
  params.top_k = 20;
  params.max_new_tokens = 40;
  params.ignore_eos = true;
  State a = model->NewState(), b = model->NewState();
  auto first = Generate(*model, a, prompt, params);
  auto second = Generate(*model, b, prompt, params);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->tokens, second->tokens);
  EXPECT_EQ(first->text, second->text);

  // Stop at the bytes of the 5th and 6th sampled tokens: the turn ends there.
  const std::string generated = Tokenizer(model->config()).Decode(first->tokens);
  params.stop = {generated.substr(4, 2)};
  State c = model->NewState();
  auto stopped = Generate(*model, c, prompt, params);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish, FinishReason::kStop);
  EXPECT_LE(stopped->tokens.size(), 6u);
}

TEST(ParseDeviceTest, KnowsCpuAndRejectsNonsense) {
  EXPECT_TRUE(ParseDevice("cpu").ok());
  EXPECT_FALSE(ParseDevice("tpu").ok());
  if (!torch::cuda::is_available()) EXPECT_FALSE(ParseDevice("cuda").ok());
}

TEST(StepValidationTest, RejectsOutOfRangeTokensAndLeavesStateAlone) {
  auto model = TransformerModel::Create(ConfigNamed("linear_elu"), 1, torch::kCPU);
  State state = model->NewState();
  auto bad = model->Prefill(state, {1, 300});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("tokens[1] = 300"), std::string::npos);
  EXPECT_EQ(state.positions[0], 0);
  EXPECT_FALSE(model->Step(state, {1, 2}).ok());  // two tokens for one session
}

class PrefillBatchTest : public ::testing::TestWithParam<NamedConfig> {};

TEST_P(PrefillBatchTest, EqualsEachSessionPrefilledAlone) {
  auto model = TransformerModel::Create(GetParam().config, 3, torch::kCPU);
  // Two sessions at the same position 5, then 11 tokens each at once.
  const std::vector<int64_t> head = {256, 1, 2, 3, 4};
  const std::vector<std::vector<int64_t>> rows = {{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                                  {99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89}};
  std::vector<State> alone;
  std::vector<std::vector<float>> expected;
  for (const auto& row : rows) {
    State s = model->NewState();
    ASSERT_TRUE(model->Prefill(s, head).ok());
    expected.push_back(*model->Prefill(s, row));
    alone.push_back(std::move(s));
  }
  State first = model->NewState(), second = model->NewState();
  ASSERT_TRUE(model->Prefill(first, head).ok());
  ASSERT_TRUE(model->Prefill(second, head).ok());
  State batch = StackStates({&first, &second});
  std::vector<int64_t> tokens = rows[0];
  tokens.insert(tokens.end(), rows[1].begin(), rows[1].end());
  auto logits = model->PrefillBatch(batch, tokens);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->size(0), 2);
  std::vector<State> split = model->SplitState(batch);
  // docs/DESIGN.md, "What is bit-identical", row "prefill of several
  // sessions": the same bits as alone for the constant-state kinds; the
  // softmax baseline's cache is outside the table, so within a tolerance.
  const bool bits = HasConstantState(GetParam().config.attention.kind);
  auto same = [&](const torch::Tensor& a, const torch::Tensor& b) {
    return bits ? torch::equal(a, b) : torch::allclose(a, b, 1e-4, 1e-5);
  };
  for (int i = 0; i < 2; ++i) {
    torch::Tensor want = torch::tensor(expected[i]);
    EXPECT_TRUE(same((*logits)[i], want)) << "row " << i;
    EXPECT_EQ(split[i].positions[0], 16);
    // The next step from either state gives the same logits.
    auto a = model->Step(split[i], {7});
    auto b = model->Step(alone[i], {7});
    EXPECT_TRUE(same(*a, *b)) << "row " << i;
  }
}

class DecodeBatchTest : public ::testing::TestWithParam<NamedConfig> {};

// docs/DESIGN.md, "What is bit-identical", row "decode batch": a session's
// logits have the same bits stepped alone as beside other sessions at other
// positions, for every constant-state kind.
TEST_P(DecodeBatchTest, EachSessionHasTheSameBitsAloneAndInABatch) {
  if (!HasConstantState(GetParam().config.attention.kind)) {
    GTEST_SKIP() << "the softmax baseline's growing cache is outside the table";
  }
  auto model = TransformerModel::Create(GetParam().config, 3, torch::kCPU);
  const std::vector<std::vector<int64_t>> prompts = {
      {256, 1, 2, 3, 4, 5, 6, 7, 8}, {256, 9}, {256, 40, 41, 42, 43}};
  std::vector<State> states;
  std::vector<torch::Tensor> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    states.push_back(model->NewState());
    ASSERT_TRUE(model->Prefill(states.back(), prompts[i]).ok());
    State copy = CloneState(states.back());
    auto logits = model->Step(copy, {static_cast<int64_t>(70 + i)});
    ASSERT_TRUE(logits.ok()) << logits.status();
    alone.push_back(logits->reshape({-1}));
  }
  State batch = StackStates({&states[0], &states[1], &states[2]});
  auto logits = model->Step(batch, {70, 71, 72});
  ASSERT_TRUE(logits.ok()) << logits.status();
  for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal((*logits)[i], alone[i])) << "row " << i;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DecodeBatchTest, ::testing::ValuesIn(AllKindConfigs()),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(AllKinds, PrefillBatchTest, ::testing::ValuesIn(AllKindConfigs()),
                         [](const auto& info) { return info.param.name; });

TEST(PrefillBatchValidationTest, RowsMustBeEqualAndPositionsShared) {
  auto model = TransformerModel::Create(ConfigNamed("linear_elu"), 1, torch::kCPU);
  State a = model->NewState(), b = model->NewState();
  ASSERT_TRUE(model->Prefill(a, {256, 1}).ok());
  State batch = StackStates({&a, &b});
  EXPECT_FALSE(model->PrefillBatch(batch, {1, 2, 3, 4}).ok());  // positions 2 and 0
  State fresh = StackStates({&b, &b});
  EXPECT_FALSE(model->PrefillBatch(fresh, {1, 2, 3}).ok());  // 3 tokens for 2 rows
  EXPECT_TRUE(model->PrefillBatch(fresh, {1, 2, 3, 4}).ok());
}

}  // namespace
}  // namespace linserve
