// Qwen3.5's fast forms against each other: a prompt cut anywhere gives the
// bits of one call, decode gives prefill's bits, a session gives the same
// bits alone or in a batch, and a saved state continues as the live one.

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "engine/model/language_model.h"
#include "engine/qwen35/qwen35_cpu.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_random.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

std::vector<int64_t> Prompt(int64_t n, int64_t vocab, int64_t salt = 0) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back((i * 37 + salt * 11 + 5) % vocab);
  return tokens;
}

bool SameBits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && torch::equal(a, b);
}

std::unique_ptr<Qwen35Model> TinyModel(torch::ScalarType dtype,
                                       WeightQuantization quantization = WeightQuantization::kNone,
                                       torch::ScalarType kv_dtype = torch::kFloat32) {
  absl::StatusOr<Qwen35Config> config = Qwen35ShapeByName("tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  LoadOptions options;
  options.dtype = dtype;
  options.quantization = quantization;
  options.kv_dtype = kv_dtype;
  absl::StatusOr<std::unique_ptr<Qwen35Model>> model = Qwen35Model::FromTensors(
      *config, RandomQwen35Weights(*config, 7), Tokenizer::Bytes(config->vocab_size), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

class Qwen35FormsTest : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(Qwen35FormsTest, APromptCutAnywhereGivesTheBitsOfOneCall) {
  std::unique_ptr<Qwen35Model> model = TinyModel(GetParam());
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> prompt = Prompt(70, model->vocab_size());
  State whole = model->NewState();
  absl::StatusOr<std::vector<float>> expected = model->Prefill(whole, prompt);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
           {1}, {3}, {17, 40}, {64}, {1, 2, 3, 4, 5, 69}}) {
    State pieces = model->NewState();
    int64_t from = 0;
    std::vector<int64_t> ends = cuts;
    ends.push_back(static_cast<int64_t>(prompt.size()));
    absl::StatusOr<std::vector<float>> logits;
    for (int64_t end : ends) {
      logits = model->Prefill(pieces, absl::MakeConstSpan(prompt).subspan(from, end - from));
      ASSERT_TRUE(logits.ok()) << logits.status();
      from = end;
    }
    EXPECT_EQ(*logits, *expected) << "cut at " << cuts[0];
    EXPECT_EQ(model->SerializeState(pieces), model->SerializeState(whole)) << "cut at " << cuts[0];
  }
}

TEST_P(Qwen35FormsTest, DecodeGivesThePrefillsBits) {
  std::unique_ptr<Qwen35Model> model = TinyModel(GetParam());
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> prompt = Prompt(40, model->vocab_size());
  State prefilled = model->NewState();
  absl::StatusOr<std::vector<float>> expected = model->Prefill(prefilled, prompt);
  ASSERT_TRUE(expected.ok());
  State stepped = model->NewState();
  ASSERT_TRUE(model->Prefill(stepped, absl::MakeConstSpan(prompt).first(1)).ok());
  absl::StatusOr<torch::Tensor> logits;
  for (size_t i = 1; i < prompt.size(); ++i) {
    logits = model->Step(stepped, {prompt[i]});
    ASSERT_TRUE(logits.ok()) << logits.status();
  }
  const std::vector<float> last(logits->data_ptr<float>(),
                                logits->data_ptr<float>() + logits->numel());
  EXPECT_EQ(last, *expected);
  EXPECT_EQ(model->SerializeState(stepped), model->SerializeState(prefilled));
}

TEST_P(Qwen35FormsTest, ASessionGivesTheSameBitsAloneOrInABatch) {
  std::unique_ptr<Qwen35Model> model = TinyModel(GetParam());
  ASSERT_NE(model, nullptr);
  // Three sessions at different positions (3, 29 and 300 tokens).
  std::vector<State> alone;
  std::vector<int64_t> lengths = {3, 29, 300};
  for (size_t s = 0; s < lengths.size(); ++s) {
    alone.push_back(model->NewState());
    ASSERT_TRUE(model->Prefill(alone.back(), Prompt(lengths[s], model->vocab_size(), s)).ok());
  }
  std::vector<const State*> members;
  for (const State& s : alone) members.push_back(&s);
  State batch = StackStates(members);
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> tokens = {11 + step, 22 + step, 33 + step};
    absl::StatusOr<torch::Tensor> together = model->Step(batch, tokens);
    ASSERT_TRUE(together.ok()) << together.status();
    for (size_t s = 0; s < alone.size(); ++s) {
      absl::StatusOr<torch::Tensor> one = model->Step(alone[s], {tokens[s]});
      ASSERT_TRUE(one.ok());
      EXPECT_TRUE(SameBits(together->select(0, s), one->select(0, 0)))
          << "session " << s << " step " << step;
    }
  }
  std::vector<State> split = model->SplitState(batch);
  for (size_t s = 0; s < alone.size(); ++s) {
    EXPECT_EQ(model->SerializeState(split[s]), model->SerializeState(alone[s])) << "session " << s;
  }
}

TEST_P(Qwen35FormsTest, ASavedStateContinuesAsTheLiveOne) {
  std::unique_ptr<Qwen35Model> model = TinyModel(GetParam());
  ASSERT_NE(model, nullptr);
  State live = model->NewState();
  ASSERT_TRUE(model->Prefill(live, Prompt(50, model->vocab_size())).ok());
  absl::StatusOr<State> restored = model->DeserializeState(model->SerializeState(live));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->positions, std::vector<int64_t>{50});
  // The file holds the recurrent part and the KV for the 50 positions, not
  // the cache's whole blocks, plus its header (at most 64 KiB).
  const int64_t file_bytes = static_cast<int64_t>(model->SerializeState(live).size());
  EXPECT_GE(file_bytes, model->StateBytes(50));
  EXPECT_LT(file_bytes, model->StateBytes(50) + 65536);
  absl::StatusOr<torch::Tensor> a = model->Step(live, {9});
  absl::StatusOr<torch::Tensor> b = model->Step(*restored, {9});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(SameBits(*a, *b));
}

TEST_P(Qwen35FormsTest, TheStateGrowsOnlyByTheKvCache) {
  std::unique_ptr<Qwen35Model> model = TinyModel(GetParam());
  ASSERT_NE(model, nullptr);
  const Qwen35Config& c = model->config();
  EXPECT_TRUE(model->StateGrowsWithPosition());
  const int64_t per_token = c.full_attention_layers() * 2 * c.num_key_value_heads * c.head_dim * 4;
  EXPECT_EQ(model->StateBytes(100) - model->StateBytes(0), 100 * per_token);
  const int64_t gdn_layers = c.num_hidden_layers - c.full_attention_layers();
  const int64_t constant =
      gdn_layers * 4 *
      ((c.linear_conv_kernel_dim - 1) * c.conv_dim() +
       c.linear_num_value_heads * c.linear_value_head_dim * c.linear_key_head_dim);
  EXPECT_EQ(model->StateBytes(0), constant);
}

// A bfloat16 KV cache: half the bytes per token, the same constant part,
// logits close to the float32 cache's, and the same cut-anywhere bits.
TEST(Qwen35KvDtypeTest, ABfloat16CacheHalvesTheGrowthAndStaysClose) {
  std::unique_ptr<Qwen35Model> exact = TinyModel(torch::kFloat32);
  std::unique_ptr<Qwen35Model> half =
      TinyModel(torch::kFloat32, WeightQuantization::kNone, torch::kBFloat16);
  ASSERT_NE(exact, nullptr);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->StateBytes(0), exact->StateBytes(0));
  EXPECT_EQ(2 * (half->StateBytes(100) - half->StateBytes(0)),
            exact->StateBytes(100) - exact->StateBytes(0));
  const std::vector<int64_t> prompt = Prompt(80, exact->vocab_size());
  State a = exact->NewState(), b = half->NewState(), c = half->NewState();
  absl::StatusOr<std::vector<float>> la = exact->Prefill(a, prompt);
  absl::StatusOr<std::vector<float>> lb = half->Prefill(b, prompt);
  ASSERT_TRUE(la.ok() && lb.ok());
  const torch::Tensor ta = torch::tensor(*la), tb = torch::tensor(*lb);
  EXPECT_LT(((ta - tb).abs().max() / ta.abs().max()).item<double>(), 0.05);
  ASSERT_TRUE(half->Prefill(c, absl::MakeConstSpan(prompt).first(33)).ok());
  absl::StatusOr<std::vector<float>> lc = half->Prefill(c, absl::MakeConstSpan(prompt).subspan(33));
  ASSERT_TRUE(lc.ok());
  EXPECT_EQ(*lc, *lb);
  // A state of one KV dtype does not load into a model of the other.
  EXPECT_FALSE(exact->DeserializeState(half->SerializeState(b)).ok());
}

// The attention layer at the real models' head size (256, which the tiny
// shape's 32 does not reach): a prompt's tokens read the cache in blocks,
// several queries and keys at a time, yet each token gets the bits of a
// decode step alone, whose single query reads it one row at a time. With
// one query head per key head that step is the plain one-query loop.
TEST(Qwen35AttentionKernelTest, ABlockOfQueriesGivesTheBitsOfOneQueryAtATime) {
  torch::manual_seed(3);
  for (const int64_t group : {1, 4}) {
    for (const torch::ScalarType cache : {torch::kFloat32, torch::kBFloat16}) {
      SCOPED_TRACE(testing::Message() << "group " << group << ", cache " << cache);
      GatedAttentionDims d;
      d.kv_heads = 2;
      d.heads = 2 * group;
      d.head_dim = 256;
      d.rotary_dim = 64;
      const std::vector<int64_t> positions = {0, 7};
      const int64_t B = 2, T = 37, capacity = 7 + T, D = d.head_dim;
      const torch::Tensor qg = torch::randn({B * T, d.heads * 2 * D});
      const torch::Tensor k = torch::randn({B * T, d.kv_heads * D});
      const torch::Tensor v = torch::randn({B * T, d.kv_heads * D});
      const torch::Tensor q_norm = 0.1 * torch::randn({D}), k_norm = 0.1 * torch::randn({D});
      const torch::Tensor history = torch::randn({B, d.kv_heads, capacity, D}).to(cache);
      torch::Tensor keys = history.clone(), values = history.flip(2).clone();
      const torch::Tensor whole =
          GatedAttentionCpu(qg, k, v, q_norm, k_norm, keys, values, positions, T, d);
      torch::Tensor step_keys = history.clone(), step_values = history.flip(2).clone();
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int64_t> rows, at;
        for (int64_t b = 0; b < B; ++b) {
          rows.push_back(b * T + t);
          at.push_back(positions[b] + t);
        }
        const torch::Tensor index = torch::tensor(rows);
        const torch::Tensor one =
            GatedAttentionCpu(qg.index_select(0, index), k.index_select(0, index),
                              v.index_select(0, index), q_norm, k_norm, step_keys, step_values,
                              at, 1, d);
        ASSERT_TRUE(SameBits(one, whole.index_select(0, index))) << "token " << t;
      }
      EXPECT_TRUE(SameBits(step_keys, keys));
    }
  }
}

// The MLP's SiLU gate against float64: the AVX-512 family computes SiLU 16
// at a time from exp(-|x|) with a polynomial, the portable one with
// std::exp. Inputs over the whole useful range, both signs, past where the
// exponential under- and overflows, zeros and a tail shorter than 16 lanes.
TEST(Qwen35SiluKernelTest, TheGateIsWithinFourUlpOfFloat64) {
  torch::manual_seed(4);
  std::vector<float> special = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.5f, -0.5f,
                                20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f, 100.0f, -100.0f,
                                1e30f, -1e30f};
  const torch::Tensor gate =
      torch::cat({torch::tensor(special), torch::linspace(-110, 110, 4001),
                  4 * torch::randn({1000})})
          .contiguous();  // 5,019 values: the last 11 in a masked tail
  const torch::Tensor up = torch::randn(gate.sizes()).contiguous();
  const torch::Tensor got = SiluGateCpu(gate, up).to(torch::kFloat64);
  const torch::Tensor g = gate.to(torch::kFloat64), u = up.to(torch::kFloat64);
  const torch::Tensor expected = g * torch::sigmoid(g) * u;
  // Four float32 ulps of the result, and 1e-30 where the value is smaller
  // still (x e^x for x under -64): there std::exp's own overflow returns 0
  // for 1e-37 (x = -88.8, the portable family), and beside any other term of
  // a sum the value rounds away.
  const torch::Tensor allowed =
      torch::clamp_min(expected.abs() * (4.0 * std::ldexp(1.0, -23)), 1e-30);
  const torch::Tensor excess = (got - expected).abs() - allowed;
  const int64_t worst = excess.argmax().item<int64_t>();
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << "gate " << gate[worst].item<float>() << ": got " << got[worst].item<double>()
      << ", float64 " << expected[worst].item<double>();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Qwen35FormsTest,
                         ::testing::Values(torch::kFloat32, torch::kBFloat16),
                         [](const auto& info) {
                           return std::string(ComputeDtypeName(info.param));
                         });

}  // namespace
}  // namespace linserve
