// The three forms of every attention kind agree: reference (quadratic),
// chunked prefill and the batched recurrent step, on random weights.

#include <cmath>

#include <torch/types.h>
#include <torch/utils.h>

#include "engine/transformer/transformer_model.h"
#include "engine/model/state.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"

namespace linserve {
namespace {

class AttentionFormsTest : public ::testing::TestWithParam<NamedConfig> {
 protected:
  void SetUp() override {
    torch::manual_seed(1);
    model_ = TransformerModel::Create(GetParam().config, /*seed=*/7, torch::kCPU);
    // Training-style initialisation is tiny (std 0.02), which would make
    // attention nearly uniform and hide disagreements; use unit-scale
    // activations instead: weights N(0, 1/fan_in), embeddings and the vq
    // codebook and bias N(0, 1).
    torch::NoGradGuard no_grad;
    for (auto& item : model_->module()->named_parameters()) {
      torch::Tensor& p = item.value();
      if (item.key().find("norm") != std::string::npos) continue;
      const bool unit = p.dim() != 2 || item.key().find("embed") != std::string::npos;
      p.normal_(0, unit ? 1.0 : 1.0 / std::sqrt(static_cast<double>(p.size(1))));
    }
    torch::manual_seed(2);
  }

  torch::Tensor RandomTokens(int64_t batch, int64_t length) {
    return torch::randint(0, 258, {batch, length}, torch::kInt64);
  }

  // Recurrent form: one token at a time.
  torch::Tensor RecurrentLogits(const torch::Tensor& tokens) {
    State state = model_->module()->NewState(tokens.size(0));
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      steps.push_back(model_->module()->ForwardStep(tokens.select(1, t), state));
    }
    return torch::stack(steps, 1);
  }

  std::unique_ptr<TransformerModel> model_;
};

// max |a - b| <= 1e-4 * max(1, max |a|): the forms agree to fp32 precision.
void ExpectClose(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double scale = std::max(1.0, a.abs().max().item<double>());
  const double error = (a - b).abs().max().item<double>();
  EXPECT_LE(error, 1e-4 * scale) << what << ": max abs error " << error << " at scale " << scale;
}

TEST_P(AttentionFormsTest, ReferenceEqualsChunkedEqualsRecurrent) {
  torch::NoGradGuard no_grad;
  const int64_t chunk = GetParam().config.attention.chunk_size;
  for (int64_t length : {int64_t{1}, int64_t{7}, chunk, chunk + 1, 3 * chunk + 5}) {
    torch::Tensor tokens = RandomTokens(2, length);
    torch::Tensor reference = model_->module()->ForwardReference(tokens);
    State state = model_->module()->NewState(2);
    torch::Tensor chunked = model_->module()->ForwardChunked(tokens, state);
    torch::Tensor recurrent = RecurrentLogits(tokens);
    const std::string at = "length " + std::to_string(length);
    ExpectClose(reference, chunked, "chunked vs reference, " + at);
    ExpectClose(reference, recurrent, "recurrent vs reference, " + at);
  }
}

TEST_P(AttentionFormsTest, PrefillThenStepEqualsLongerPrefill) {
  torch::NoGradGuard no_grad;
  const int64_t n = 2 * GetParam().config.attention.chunk_size + 3;
  torch::Tensor tokens = RandomTokens(1, n + 1);
  State longer = model_->module()->NewState(1);
  torch::Tensor expected = model_->module()->ForwardChunked(tokens, longer).select(1, n);
  State state = model_->module()->NewState(1);
  model_->module()->ForwardChunked(tokens.narrow(1, 0, n), state);
  torch::Tensor stepped = model_->module()->ForwardStep(tokens.select(1, n), state);
  ExpectClose(expected, stepped, "prefill(n) + step vs prefill(n + 1)");
  // Prefill in two uneven pieces continues from the carried state too.
  State pieces = model_->module()->NewState(1);
  model_->module()->ForwardChunked(tokens.narrow(1, 0, 5), pieces);
  torch::Tensor rest = model_->module()->ForwardChunked(tokens.narrow(1, 5, n + 1 - 5), pieces);
  ExpectClose(expected, rest.select(1, n - 5), "prefill(5) + prefill(n - 4) vs prefill(n + 1)");
}

TEST_P(AttentionFormsTest, BatchedStepAtDifferentPositionsEqualsEachAlone) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> lengths = {0, 3, 11, 20};
  std::vector<State> alone;
  for (int64_t length : lengths) {
    State state = model_->module()->NewState(1);
    if (length > 0) model_->module()->ForwardChunked(RandomTokens(1, length), state);
    alone.push_back(std::move(state));
  }
  std::vector<const State*> pointers;
  for (const State& s : alone) pointers.push_back(&s);
  State batch = StackStates(pointers);
  for (int step = 0; step < 8; ++step) {
    torch::Tensor next = RandomTokens(1, static_cast<int64_t>(lengths.size())).squeeze(0);
    torch::Tensor batched = model_->module()->ForwardStep(next, batch);
    for (size_t b = 0; b < lengths.size(); ++b) {
      torch::Tensor single = model_->module()->ForwardStep(next.narrow(0, b, 1), alone[b]);
      ExpectClose(single[0], batched[b], "session " + std::to_string(b) + " step " +
                                             std::to_string(step));
    }
  }
  // Split gives back states that continue exactly like the ones stepped alone.
  std::vector<State> split = model_->SplitState(batch);
  torch::Tensor token = torch::tensor({65}, torch::kInt64);
  for (size_t b = 0; b < lengths.size(); ++b) {
    EXPECT_EQ(split[b].positions[0], alone[b].positions[0]);
    ExpectClose(model_->module()->ForwardStep(token, alone[b]),
                model_->module()->ForwardStep(token, split[b]), "split session " + std::to_string(b));
  }
}

TEST_P(AttentionFormsTest, StaysFiniteForInputsScaledBy100) {
  torch::NoGradGuard no_grad;
  const ModelConfig& config = GetParam().config;
  const AttentionKernel& kernel = model_->kernel();
  torch::Tensor codebook = torch::randn({config.n_heads, config.attention.codebook_size,
                                         config.head_dim}) * 100;
  torch::Tensor bias = torch::randn({config.n_heads, config.attention.window}) * 100;
  auto scaled_kernel = MakeAttentionKernel(config, {codebook, bias});
  const int64_t t = 3 * config.attention.chunk_size + 5;
  AttentionInputs in;
  in.q = torch::randn({2, config.n_heads, t, config.head_dim}) * 100;
  in.k = torch::randn({2, config.n_heads, t, config.head_dim}) * 100;
  in.v = torch::randn({2, config.n_heads, t, config.head_dim}) * 100;
  in.slot_logits = torch::randn({2, config.n_heads, t, config.attention.slots}) * 100;
  auto options = torch::TensorOptions().dtype(torch::kFloat32);
  for (const AttentionKernel* k : {&kernel, static_cast<const AttentionKernel*>(scaled_kernel.get())}) {
    EXPECT_TRUE(torch::isfinite(k->Reference(in)).all().item<bool>()) << "reference";
    LayerState chunk_state = k->InitialState(2, options);
    EXPECT_TRUE(torch::isfinite(k->Chunked(in, 0, chunk_state)).all().item<bool>()) << "chunked";
    LayerState step_state = k->InitialState(2, options);
    for (int64_t i = 0; i < t; ++i) {
      AttentionInputs one;
      one.q = in.q.narrow(2, i, 1);
      one.k = in.k.narrow(2, i, 1);
      one.v = in.v.narrow(2, i, 1);
      one.slot_logits = in.slot_logits.narrow(2, i, 1);
      torch::Tensor positions = torch::full({2}, i, torch::kInt64);
      ASSERT_TRUE(torch::isfinite(k->Step(one, positions, step_state)).all().item<bool>())
          << "step " << i;
    }
    for (const torch::Tensor& s : step_state) {
      if (s.is_floating_point()) EXPECT_TRUE(torch::isfinite(s).all().item<bool>()) << "state";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, AttentionFormsTest, ::testing::ValuesIn(AllKindConfigs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace linserve
