// Models served with 8- and 4-bit weights (LoadOptions::quantization): the
// RWKV-7 fixture's greedy text against float32's, a row's bits the same
// alone as in a batch and in a prefill as in steps of the same pieces, one
// fingerprint whatever the format, the default transformer quantized, and
// the refusals (CUDA, a group the kernels do not take).

#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "gtest/gtest.h"
#include "tests/engine/rwkv7/small_rwkv7_shape.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

std::string FixturePath() {
  return std::string(LINSERVE_SHARED_DATA_DIR) + "/rwkv7/tiny-rwkv7-fp32.pth";
}

LoadOptions Quantized(WeightQuantization kind, int64_t group = 0) {
  LoadOptions options;
  options.quantization = kind;
  options.quantization_group = group;
  return options;
}

LoadOptions Float32() {
  LoadOptions options;
  options.dtype = torch::kFloat32;
  return options;
}

// A vocabulary of 300, not a multiple of 16: a padded last panel.
Rwkv7Config TinyShape() { return SmallRwkv7Shape(128, 256, 300); }

// Greedy continuation of `prompt` for `count` tokens.
std::vector<int64_t> Greedy(LanguageModel& model, const std::vector<int64_t>& prompt,
                            int count) {
  State state = model.NewState();
  std::vector<float> logits = model.Prefill(state, prompt).value();
  std::vector<int64_t> out;
  for (int i = 0; i < count; ++i) {
    const int64_t next = std::max_element(logits.begin(), logits.end()) - logits.begin();
    out.push_back(next);
    torch::Tensor step = model.Step(state, {next}).value();
    logits.assign(step.data_ptr<float>(), step.data_ptr<float>() + step.numel());
  }
  return out;
}

TEST(QuantizedModelTest, TheFixturesGreedyTextInInt8IsFloat32s) {
  if (!fs::exists(FixturePath())) GTEST_SKIP() << "no " << FixturePath();
  auto reference = Rwkv7Model::Load(FixturePath(), Float32());
  auto int8 = Rwkv7Model::Load(FixturePath(), Quantized(WeightQuantization::kInt8));
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_TRUE(int8.ok()) << int8.status();
  EXPECT_EQ((*int8)->weight_quantization(), WeightQuantization::kInt8);
  EXPECT_EQ((*int8)->WeightFormatName(), "int8");
  EXPECT_EQ((*int8)->ConfigJson()["weight_format"], "int8");
  // The fingerprint is the float weights': sessions move between servers
  // whatever format each serves.
  EXPECT_EQ((*int8)->Fingerprint(), (*reference)->Fingerprint());
  const std::vector<int64_t> prompt = {84, 104, 101, 32};  // "The "
  EXPECT_EQ(Greedy(**int8, prompt, 32), Greedy(**reference, prompt, 32));
}

class QuantizedRwkv7Test : public ::testing::TestWithParam<WeightQuantization> {};

TEST_P(QuantizedRwkv7Test, ARowsBitsAreTheSameAloneInABatchAndInPrefillPieces) {
  auto model = Rwkv7Model::Create(TinyShape(), 3, Quantized(GetParam(), 32));
  ASSERT_TRUE(model.ok()) << model.status();
  LanguageModel& m = **model;
  const std::vector<int64_t> a = {5, 17, 299, 42, 8, 1, 77, 123};
  const std::vector<int64_t> b = {250, 3, 3, 9, 64, 200, 11, 4};

  // Alone.
  State alone = m.NewState();
  torch::Tensor alone_logits;
  for (int64_t t : a) alone_logits = m.Step(alone, {t}).value();
  // Beside another session, step by step.
  State batch = m.NewState(2);
  torch::Tensor batch_logits;
  for (size_t i = 0; i < a.size(); ++i) batch_logits = m.Step(batch, {a[i], b[i]}).value();
  EXPECT_TRUE(torch::equal(alone_logits[0], batch_logits[0]));

  // A prefill in one call against the same tokens in two calls split at the
  // chunk size (prefix cache's pieces): the same bits.
  const int64_t chunk = m.prefill_chunk_size();
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 2 * chunk + 5; ++i) prompt.push_back((i * 37 + 11) % 300);
  State whole = m.NewState(), pieces = m.NewState();
  std::vector<float> whole_logits = m.Prefill(whole, prompt).value();
  ASSERT_TRUE(m.Prefill(pieces, std::vector<int64_t>(prompt.begin(), prompt.begin() + chunk)).ok());
  std::vector<float> piece_logits =
      m.Prefill(pieces, std::vector<int64_t>(prompt.begin() + chunk, prompt.end())).value();
  EXPECT_EQ(whole_logits, piece_logits);
}

TEST_P(QuantizedRwkv7Test, StaysCloseToFloat32AndKeepsItsFingerprint) {
  auto reference = Rwkv7Model::Create(TinyShape(), 3, Float32());
  auto model = Rwkv7Model::Create(TinyShape(), 3, Quantized(GetParam()));
  ASSERT_TRUE(reference.ok() && model.ok());
  EXPECT_EQ((*model)->Fingerprint(), (*reference)->Fingerprint());
  State s1 = (*reference)->NewState(), s2 = (*model)->NewState();
  const std::vector<int64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  const torch::Tensor expected = torch::tensor((*reference)->Prefill(s1, prompt).value());
  const torch::Tensor got = torch::tensor((*model)->Prefill(s2, prompt).value());
  const double relative = ((got - expected).norm() / expected.norm()).item<double>();
  // Random weights at a tiny width: int8's rounding is about 1% of a weight
  // group's range, int4's about 10%.
  EXPECT_LT(relative, GetParam() == WeightQuantization::kInt8 ? 0.03 : 0.3);
  EXPECT_GT(relative, 0.0);  // it did quantize
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedRwkv7Test,
                         ::testing::Values(WeightQuantization::kInt8, WeightQuantization::kInt4),
                         [](const auto& info) {
                           return std::string(WeightQuantizationName(info.param));
                         });

TEST(QuantizedModelTest, TheDefaultTransformerServesInInt8AndInt4) {
  const std::string dir = std::string(LINSERVE_SOURCE_DIR) + "/models/default";
  auto reference = LanguageModel::Load(dir, LoadOptions{});
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<int64_t> prompt = {84, 104, 101, 32, 107, 105, 110, 103};  // "The king"
  State s = (*reference)->NewState();
  const torch::Tensor expected = torch::tensor((*reference)->Prefill(s, prompt).value());
  for (WeightQuantization kind : {WeightQuantization::kInt8, WeightQuantization::kInt4}) {
    auto model = LanguageModel::Load(dir, Quantized(kind));
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->WeightFormatName(), WeightQuantizationName(kind));
    EXPECT_EQ((*model)->Fingerprint(), (*reference)->Fingerprint());
    State state = (*model)->NewState();
    const torch::Tensor got = torch::tensor((*model)->Prefill(state, prompt).value());
    const double relative = ((got - expected).norm() / expected.norm()).item<double>();
    EXPECT_GT(relative, 0.0) << WeightQuantizationName(kind);
    EXPECT_LT(relative, kind == WeightQuantization::kInt8 ? 0.02 : 0.2)
        << WeightQuantizationName(kind);
    // Chunked prefill and steps agree as closely as in float32.
    State stepped = (*model)->NewState();
    torch::Tensor last;
    for (int64_t t : prompt) last = (*model)->Step(stepped, {t}).value()[0];
    EXPECT_LT((last - got).abs().max().item<double>(), 1e-3);
  }
}

TEST(QuantizedModelTest, TheDtypeFlagTakesInt8AndInt4OnTheCpuOnly) {
  LoadOptions cpu;
  ASSERT_TRUE(ApplyDtypeFlag("int4", cpu).ok());
  EXPECT_EQ(cpu.quantization, WeightQuantization::kInt4);
  EXPECT_FALSE(cpu.dtype.has_value());
  LoadOptions bf16;
  ASSERT_TRUE(ApplyDtypeFlag("bfloat16", bf16).ok());
  EXPECT_EQ(bf16.dtype, torch::kBFloat16);
  EXPECT_EQ(bf16.quantization, WeightQuantization::kNone);

  LoadOptions cuda;
  cuda.device = torch::Device(torch::kCUDA, 0);
  const absl::Status refused = ApplyDtypeFlag("int8", cuda);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("int8 weights are for the CPU"), std::string::npos) << refused;

  LoadOptions unknown;
  const absl::Status bad = ApplyDtypeFlag("int3", unknown);
  EXPECT_NE(bad.message().find("int8 or int4"), std::string::npos) << bad;

  auto odd_group = Rwkv7Model::Create(TinyShape(), 3, Quantized(WeightQuantization::kInt8, 48));
  ASSERT_FALSE(odd_group.ok());
  EXPECT_NE(odd_group.status().message().find("group 48 is not 32 or 64"), std::string::npos)
      << odd_group.status();
}

}  // namespace
}  // namespace linserve
