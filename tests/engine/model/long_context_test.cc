// The constant-state kinds past 2^25 tokens: their sums over positions still
// take in every new token as fully as at the start (float32 sums stop taking
// in increments below half their ulp, which for sums of O(1) terms is from
// about 2^24 tokens on), outputs stay finite, and the step form keeps agreeing
// with the chunked form.
//
// Stepping 2^25 tokens would take minutes, so a state gets there by a fast
// path that adds what the kernel itself adds: after a prefix of random tokens
// one token is repeated until a step changes nothing but the sums, and each of
// them by the same amount as the step before (the test checks both); another
// n repeats would then add n times that amount, which the fast path adds at
// once, rounded once instead of n times. The repeated token's keys and slot
// logits sit high, so that later random tokens stay below its running maxima
// and add the same increments at any position.
//
// Those are kernel-level tests: token shift only changes what a kernel's q, k
// and v are, and carries one bounded vector. The model-level test covers it,
// and rope, with a cruder fast path.

#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <string>

#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/transformer_model.h"
#include "engine/model/state.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"

namespace linserve {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kPrefix = 12;
constexpr int64_t kLongPosition = (int64_t{1} << 25) + 7;
constexpr double kLift = 8.0;  // the repeated token's keys and slot logits, about

torch::Tensor ToDouble(const torch::Tensor& t) { return t.to(torch::kFloat64); }

bool AllFinite(const torch::Tensor& t) {
  return !t.is_floating_point() || torch::isfinite(t).all().item<bool>();
}

// max |a - b| <= tolerance * max(floor, max |b|).
void ExpectNear(const torch::Tensor& a, const torch::Tensor& b, double tolerance, double floor,
                const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const torch::Tensor da = ToDouble(a), db = ToDouble(b);
  const double scale = std::max(floor, db.abs().max().item<double>());
  const double error = (da - db).abs().max().item<double>();
  EXPECT_LE(error, tolerance * scale)
      << what << ": max abs error " << error << " at scale " << scale;
}

LayerState CloneLayer(const LayerState& state) {
  LayerState out;
  for (const torch::Tensor& t : state) out.push_back(t.clone());
  return out;
}

AttentionInputs Slice(const AttentionInputs& in, int64_t t) {
  return {in.q.narrow(2, t, 1), in.k.narrow(2, t, 1), in.v.narrow(2, t, 1),
          in.slot_logits.narrow(2, t, 1)};
}

// One state the fast path built, and the same run before the jump.
struct FastForwarded {
  LayerState near;  // after the repeats, at position `near_position`
  int64_t near_position = 0;
  LayerState far;            // the same sums advanced to kLongPosition
  std::vector<bool> is_sum;  // per state tensor: it grows with the position
};

class LongContextKernelTest : public ::testing::TestWithParam<NamedConfig> {
 protected:
  void SetUp() override {
    const ModelConfig& config = GetParam().config;
    torch::manual_seed(3);
    codebook_ = torch::randn({config.n_heads, config.attention.codebook_size, config.head_dim});
    window_bias_ = torch::randn({config.n_heads, config.attention.window});
    kernel_ = MakeAttentionKernel(config, {codebook_, window_bias_});
  }

  // Unit-scale random inputs for `length` positions; keys and slot logits
  // raised by `lift`.
  AttentionInputs RandomInputs(int64_t length, double lift = 0.0) const {
    const ModelConfig& config = GetParam().config;
    const int64_t h = config.n_heads, d = config.head_dim;
    AttentionInputs in;
    in.q = torch::randn({kBatch, h, length, d});
    in.k = torch::randn({kBatch, h, length, d}) * (lift > 0 ? 0.5 : 1.0) + lift;
    in.v = torch::randn({kBatch, h, length, d});
    in.slot_logits =
        torch::randn({kBatch, h, length, config.attention.slots}) * (lift > 0 ? 0.5 : 1.0) + lift;
    return in;
  }

  torch::Tensor Step(const AttentionInputs& one, int64_t position, LayerState& state) const {
    return kernel_->Step(one, torch::full({kBatch}, position, torch::kInt64), state);
  }

  FastForwarded FastForward() const {
    LayerState state = kernel_->InitialState(kBatch, torch::TensorOptions());
    AttentionInputs prefix = RandomInputs(kPrefix);
    int64_t position = 0;
    for (; position < kPrefix; ++position) Step(Slice(prefix, position), position, state);
    AttentionInputs repeated = RandomInputs(1, kLift);
    // Enough repeats for vq's window to hold only the repeated token and to
    // pass it into the sums twice.
    const int64_t repeats = GetParam().config.attention.window + 4;
    std::vector<LayerState> last;  // the states after the last three repeats
    for (int64_t i = 0; i < repeats; ++i, ++position) {
      Step(repeated, position, state);
      if (i >= repeats - 3) last.push_back(CloneLayer(state));
    }
    FastForwarded out;
    out.near = state;
    out.near_position = position;
    for (size_t i = 0; i < state.size(); ++i) {
      const torch::Tensor before = ToDouble(last[0][i]), middle = ToDouble(last[1][i]),
                          after = ToDouble(last[2][i]);
      const torch::Tensor change = after - middle;
      const bool grows = change.abs().max().item<double>() > 0;
      out.is_sum.push_back(grows);
      if (!grows) {
        EXPECT_TRUE(torch::equal(before, middle)) << "tensor " << i << " is not steady";
        out.far.push_back(last[2][i].clone());
        continue;
      }
      ExpectNear(middle - before, change, 1e-5, 0.0,
                 "tensor " + std::to_string(i) + " grows unevenly");
      out.far.push_back(
          (after + change * static_cast<double>(kLongPosition - position)).to(last[2][i].dtype()));
    }
    return out;
  }

  // vq: every position older than the window is counted exactly once.
  void ExpectCountsExact(const LayerState& state, int64_t position, const std::string& what) const {
    if (GetParam().config.attention.kind != AttentionKind::kVq) return;
    const int64_t older = position - GetParam().config.attention.window;
    const torch::Tensor per_head = ToDouble(state[1]).sum(-1);  // (B, H)
    EXPECT_TRUE(torch::equal(per_head, torch::full_like(per_head, static_cast<double>(older))))
        << what << ": counts sum to " << per_head << ", expected " << older;
  }

  torch::Tensor codebook_;
  torch::Tensor window_bias_;
  std::unique_ptr<AttentionKernel> kernel_;
};

struct Continuation {
  torch::Tensor outputs;  // (B, H, T, dv)
  LayerState state;
};

TEST_P(LongContextKernelTest, NewTokensCountAsMuchAfter2To25Tokens) {
  torch::NoGradGuard no_grad;
  const FastForwarded ff = FastForward();
  ExpectCountsExact(ff.far, kLongPosition, "after the fast path");
  const int64_t t = 3 * GetParam().config.attention.chunk_size + 5;
  const AttentionInputs next = RandomInputs(t);

  auto run_steps = [&](const LayerState& from, int64_t start) {
    Continuation run{torch::Tensor(), CloneLayer(from)};
    std::vector<torch::Tensor> outputs;
    for (int64_t i = 0; i < t; ++i) outputs.push_back(Step(Slice(next, i), start + i, run.state));
    run.outputs = torch::cat(outputs, 2);
    return run;
  };
  auto run_chunked = [&](const LayerState& from, int64_t start) {
    Continuation run{torch::Tensor(), CloneLayer(from)};
    run.outputs = kernel_->Chunked(next, start, run.state);
    return run;
  };
  const Continuation near_steps = run_steps(ff.near, ff.near_position);
  const Continuation far_steps = run_steps(ff.far, kLongPosition);
  const Continuation far_chunked = run_chunked(ff.far, kLongPosition);
  for (const Continuation* run : {&near_steps, &far_steps, &far_chunked}) {
    EXPECT_TRUE(AllFinite(run->outputs)) << "outputs";
    for (const torch::Tensor& s : run->state) EXPECT_TRUE(AllFinite(s)) << "state";
  }
  ExpectNear(far_steps.outputs, far_chunked.outputs, 1e-4, 1.0, "step vs chunked outputs");
  ExpectCountsExact(far_steps.state, kLongPosition + t, "stepped");
  ExpectCountsExact(far_chunked.state, kLongPosition + t, "chunked");

  // What the new tokens added to each sum: the same 2^25 tokens in as a few
  // tokens in, in either form.
  for (size_t i = 0; i < ff.far.size(); ++i) {
    if (!ff.is_sum[i]) continue;
    const std::string name = kernel_->StateSpec()[i].name;
    const torch::Tensor near_added = ToDouble(near_steps.state[i]) - ToDouble(ff.near[i]);
    ASSERT_GT(near_added.abs().max().item<double>(), 0) << name;
    ExpectNear(ToDouble(far_steps.state[i]) - ToDouble(ff.far[i]), near_added, 1e-4, 0.0,
               name + " added by steps at 2^25 vs near the start");
    ExpectNear(ToDouble(far_chunked.state[i]) - ToDouble(ff.far[i]), near_added, 1e-4, 0.0,
               name + " added by chunks at 2^25 vs steps near the start");
  }
}

TEST_P(LongContextKernelTest, StepEqualsChunkedAfter2To25TokensWhenMaximaMove) {
  torch::NoGradGuard no_grad;
  const FastForwarded ff = FastForward();
  const int64_t chunk = GetParam().config.attention.chunk_size;
  const int64_t t = 3 * chunk + 5;
  AttentionInputs next = RandomInputs(t);
  // The last chunk's keys and slot logits pass the running maxima, so the
  // sums of 2^25 tokens are scaled down within both forms.
  next.k.narrow(2, 2 * chunk, t - 2 * chunk).add_(2 * kLift);
  next.slot_logits.narrow(2, 2 * chunk, t - 2 * chunk).add_(2 * kLift);

  LayerState stepped = CloneLayer(ff.far);
  std::vector<torch::Tensor> outputs;
  for (int64_t i = 0; i < t; ++i)
    outputs.push_back(Step(Slice(next, i), kLongPosition + i, stepped));
  const torch::Tensor step_outputs = torch::cat(outputs, 2);
  LayerState chunked = CloneLayer(ff.far);
  const torch::Tensor chunk_outputs = kernel_->Chunked(next, kLongPosition, chunked);

  EXPECT_TRUE(AllFinite(step_outputs));
  EXPECT_TRUE(AllFinite(chunk_outputs));
  ExpectNear(step_outputs, chunk_outputs, 1e-4, 1.0, "step vs chunked outputs");
  for (size_t i = 0; i < ff.far.size(); ++i) {
    const std::string name = kernel_->StateSpec()[i].name;
    EXPECT_TRUE(AllFinite(stepped[i])) << name;
    ExpectNear(ToDouble(stepped[i]) - ToDouble(ff.far[i]),
               ToDouble(chunked[i]) - ToDouble(ff.far[i]), 1e-4, 1e-30,
               name + " change, step vs chunked");
  }
}

// The whole model, with and without token shift: a prefilled state whose sums
// over positions are multiplied by 2^20, which at the kernels makes them the
// sums of the prefix with every token repeated 2^20 times in place (vq: every
// token older than the window; the window keeps its place when the prefix is a
// multiple of it; rope: only their size, repeats would turn), at a position
// past 2^25. The step and the chunked form continue it alike, and the new
// tokens change every sum by the same amount in both (with float32 sums the linear kinds fail this:
// a step's terms are lost where a chunk's larger ones partly are not).
class LongContextModelTest : public ::testing::TestWithParam<NamedConfig> {};

bool IsSumOverPositions(const std::string& name) {
  for (const char* sum : {"S", "z", "sum_k", "sum_v", "sum_w", "U", "N"}) {
    if (name == sum) return true;
  }
  return false;
}

TEST_P(LongContextModelTest, StepEqualsChunkedAfter2To25Tokens) {
  torch::NoGradGuard no_grad;
  const ModelConfig& config = GetParam().config;
  torch::manual_seed(5);
  auto model = TransformerModel::Create(config, /*seed=*/11, torch::kCPU);
  const int64_t window = config.attention.window;
  const int64_t prefix = 13 * window;
  constexpr int64_t kRepeat = int64_t{1} << 20;
  State state = model->module()->NewState(kBatch);
  model->module()->ForwardChunked(torch::randint(0, 256, {kBatch, prefix}), state);
  const bool vq = config.attention.kind == AttentionKind::kVq;
  const int64_t position = vq ? kRepeat * (prefix - window) + window : kRepeat * prefix;
  ASSERT_GE(position, int64_t{1} << 25);
  for (int64_t& p : state.positions) p = position;
  const std::vector<StateTensorSpec> spec = model->kernel().StateSpec();
  for (LayerState& layer : state.layers) {
    for (size_t i = 0; i < layer.size(); ++i) {
      if (IsSumOverPositions(spec[i].name)) layer[i].mul_(static_cast<double>(kRepeat));
    }
  }

  const int64_t t = 3 * config.attention.chunk_size + 5;
  const torch::Tensor tokens = torch::randint(0, 256, {kBatch, t});
  State stepped = CloneState(state);
  std::vector<torch::Tensor> logits;
  for (int64_t i = 0; i < t; ++i) {
    logits.push_back(model->module()->ForwardStep(tokens.select(1, i), stepped));
  }
  const torch::Tensor step_logits = torch::stack(logits, 1);
  State chunked = CloneState(state);
  const torch::Tensor chunk_logits = model->module()->ForwardChunked(tokens, chunked);
  EXPECT_TRUE(AllFinite(step_logits));
  EXPECT_TRUE(AllFinite(chunk_logits));
  ExpectNear(step_logits, chunk_logits, 1e-4, 1.0, "step vs chunked logits");
  EXPECT_EQ(stepped.positions, chunked.positions);
  for (size_t l = 0; l < state.layers.size(); ++l) {
    for (size_t i = 0; i < state.layers[l].size(); ++i) {
      const torch::Tensor& before = state.layers[l][i];
      const std::string what = "layer " + std::to_string(l) + " " + spec[i].name;
      EXPECT_TRUE(AllFinite(stepped.layers[l][i])) << what;
      if (!IsSumOverPositions(spec[i].name)) continue;
      const torch::Tensor step_added = ToDouble(stepped.layers[l][i]) - ToDouble(before);
      const torch::Tensor chunk_added = ToDouble(chunked.layers[l][i]) - ToDouble(before);
      EXPECT_GT(chunk_added.abs().max().item<double>(), 0) << what;
      ExpectNear(step_added, chunk_added, 1e-3, 0.0, what + " change, step vs chunked");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ConstantStateKinds, LongContextModelTest, ::testing::ValuesIn([] {
                           std::vector<NamedConfig> out;
                           for (const NamedConfig& c : AllKindConfigs()) {
                             if (c.config.attention.kind != AttentionKind::kSoftmax)
                               out.push_back(c);
                           }
                           return out;
                         }()),
                         [](const auto& info) { return info.param.name; });

// Every constant-state kind without rope (rope turns a repeated token's
// increments with the position, so the fast path does not apply; rope kinds
// share the sums' arithmetic).
std::vector<NamedConfig> ConstantStateKernelConfigs() {
  std::vector<NamedConfig> out;
  for (const NamedConfig& c : AllKindConfigs()) {
    const AttentionConfig& a = c.config.attention;
    if (a.kind == AttentionKind::kSoftmax || a.rope || a.token_shift) continue;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(ConstantStateKinds, LongContextKernelTest,
                         ::testing::ValuesIn(ConstantStateKernelConfigs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace linserve
