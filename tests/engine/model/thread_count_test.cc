// docs/DESIGN.md, "What is bit-identical", row "whole model step, any
// thread count": every model family's prefill, decode and decode batch give
// the same bits with the engine's pool at 1, 2, 3 and 4 threads (more
// threads than this machine's cores is allowed: the bits must not care).
// The shapes are wide enough that every product, recurrence and fused pass
// splits into several spans of the pool.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/engine_threads.h"
#include "engine/model/language_model.h"
#include "engine/model/state.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_random.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/text/tokenizer.h"
#include "engine/transformer/transformer_model.h"
#include "gtest/gtest.h"
#include "tests/engine/rwkv7/small_rwkv7_shape.h"
#include "tests/engine/test_models.h"

namespace linserve {
namespace {

std::vector<int64_t> Prompt(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back((i * 37 + salt * 11 + 5) % vocab);
  return tokens;
}

// A 70-token prefill's logits, then four decode steps of three sessions at
// different positions in one batch: every tensor the model gave.
std::vector<torch::Tensor> Run(LanguageModel& model) {
  const int64_t vocab = model.vocab_size();
  std::vector<torch::Tensor> out;
  std::vector<State> states;
  for (int64_t s = 0; s < 3; ++s) {
    states.push_back(model.NewState());
    absl::StatusOr<std::vector<float>> logits =
        model.Prefill(states.back(), Prompt(70 - 25 * s, vocab, s));
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return out;
    out.push_back(torch::tensor(*logits));
  }
  State batch = StackStates({&states[0], &states[1], &states[2]});
  for (int64_t step = 0; step < 4; ++step) {
    absl::StatusOr<torch::Tensor> logits =
        model.Step(batch, {(step * 7 + 1) % vocab, (step * 5 + 2) % vocab, (step * 3 + 3) % vocab});
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return out;
    out.push_back(logits->clone());
  }
  return out;
}

void ExpectTheSameBitsAtEveryThreadCount(LanguageModel& model) {
  const int before = EngineThreads();
  SetEngineThreads(1);
  const std::vector<torch::Tensor> one = Run(model);
  ASSERT_EQ(one.size(), 7u);
  for (int threads : {2, 3, 4}) {
    SetEngineThreads(threads);
    const std::vector<torch::Tensor> several = Run(model);
    ASSERT_EQ(several.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(torch::equal(one[i], several[i]))
          << threads << " threads, " << (i < 3 ? "prefill of session " : "decode step ")
          << (i < 3 ? i : i - 3);
    }
  }
  SetEngineThreads(before);
}

class ThreadCountTest : public ::testing::Test {
 protected:
  // As the server: LibTorch's own loops on one thread, the pool the only
  // parallelism.
  void SetUp() override { torch::set_num_threads(1); }
};

LoadOptions Options(torch::ScalarType dtype,
                    WeightQuantization quantization = WeightQuantization::kNone) {
  LoadOptions options;
  options.dtype = dtype;
  options.quantization = quantization;
  return options;
}

TEST_F(ThreadCountTest, Rwkv7) {
  const Rwkv7Config shape = SmallRwkv7Shape(256, 1024, 2048);
  for (const auto& [name, options] :
       std::vector<std::pair<std::string, LoadOptions>>{
           {"float32", Options(torch::kFloat32)},
           {"bfloat16", Options(torch::kBFloat16)},
           {"int8", Options(torch::kFloat32, WeightQuantization::kInt8)}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<Rwkv7Model>> model = Rwkv7Model::Create(shape, 3, options);
    ASSERT_TRUE(model.ok()) << model.status();
    ExpectTheSameBitsAtEveryThreadCount(**model);
  }
}

TEST_F(ThreadCountTest, Qwen35) {
  absl::StatusOr<Qwen35Config> config = Qwen35ShapeByName("tiny");
  ASSERT_TRUE(config.ok()) << config.status();
  config->hidden_size = 256;
  config->intermediate_size = 768;
  config->vocab_size = 2048;
  for (const auto& [name, options] :
       std::vector<std::pair<std::string, LoadOptions>>{
           {"float32", Options(torch::kFloat32)},
           {"bfloat16", Options(torch::kBFloat16)},
           {"int4", Options(torch::kFloat32, WeightQuantization::kInt4)}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<Qwen35Model>> model = Qwen35Model::FromTensors(
        *config, RandomQwen35Weights(*config, 7), Tokenizer::Bytes(config->vocab_size), options);
    ASSERT_TRUE(model.ok()) << model.status();
    ExpectTheSameBitsAtEveryThreadCount(**model);
  }
}

TEST_F(ThreadCountTest, TransformerKinds) {
  for (const char* kind : {"softmax", "linear_elu", "linear_softmax", "linear_cosine", "vq",
                           "compressed"}) {
    SCOPED_TRACE(kind);
    ModelConfig config = ConfigNamed(kind);
    config.d_model = 256;
    config.n_heads = 4;
    config.head_dim = 64;
    config.mlp_hidden = 1024;
    std::unique_ptr<TransformerModel> model = TransformerModel::Create(config, 3, torch::kCPU);
    ExpectTheSameBitsAtEveryThreadCount(*model);
  }
}

}  // namespace
}  // namespace linserve
