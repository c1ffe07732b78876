// State: fixed size for the linear kinds, stack/split, device moves, and a
// bit-exact byte round trip with clear errors for bad bytes.

#include "engine/model/state.h"

#include <torch/cuda.h>
#include <torch/types.h>

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/transformer/transformer_model.h"
#include "engine/formats/safetensors.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"

namespace linserve {
namespace {

// CheckSerializedState (the checks alone, in place) gives DeserializeState's
// verdict: the position when it restores, the same error when it does not.
// Also from a copy one byte off the bytes' alignment, where the check copies
// the tensors it cannot read in place.
void ExpectTheSameVerdict(const LanguageModel& model, const std::string& bytes) {
  const absl::StatusOr<State> restored = model.DeserializeState(bytes);
  std::string shifted(bytes.size() + 1, '\0');
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  for (std::string_view view : {std::string_view(bytes), std::string_view(shifted).substr(1)}) {
    const absl::StatusOr<int64_t> checked = model.CheckSerializedState(view);
    ASSERT_EQ(checked.status(), restored.status());
    if (restored.ok()) EXPECT_EQ(*checked, restored->positions[0]);
  }
}

class StateTest : public ::testing::TestWithParam<NamedConfig> {
 protected:
  void SetUp() override { model_ = TransformerModel::Create(GetParam().config, 3, torch::kCPU); }

  State Prefilled(int64_t length) {
    State state = model_->NewState();
    std::vector<int64_t> tokens(length);
    for (int64_t i = 0; i < length; ++i) tokens[i] = (i * 31 + 7) % 256;
    EXPECT_TRUE(model_->Prefill(state, tokens).ok());
    return state;
  }

  static int64_t HeldBytes(const State& state) {
    int64_t bytes = 0;
    for (const LayerState& layer : state.layers) {
      for (const torch::Tensor& t : layer) bytes += t.numel() * t.element_size();
    }
    return bytes;
  }

  static bool BitEqual(const State& a, const State& b) {
    if (a.positions != b.positions || a.layers.size() != b.layers.size()) return false;
    for (size_t l = 0; l < a.layers.size(); ++l) {
      for (size_t i = 0; i < a.layers[l].size(); ++i) {
        torch::Tensor x = a.layers[l][i].cpu().contiguous(), y = b.layers[l][i].cpu().contiguous();
        if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() ||
            std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) != 0) {
          return false;
        }
      }
    }
    return true;
  }

  std::unique_ptr<TransformerModel> model_;
};

TEST_P(StateTest, SizeIsTheSameAfter10And10000Tokens) {
  if (!HasConstantState(GetParam().config.attention.kind)) {
    EXPECT_LT(model_->StateBytes(10), model_->StateBytes(10000)) << "the KV cache grows";
    return;
  }
  State short_state = Prefilled(10);
  State long_state = Prefilled(10000);
  EXPECT_EQ(HeldBytes(short_state), HeldBytes(long_state));
  EXPECT_EQ(HeldBytes(long_state), model_->StateBytes(10000));
  EXPECT_EQ(model_->StateBytes(10), model_->StateBytes(10000));
}

TEST_P(StateTest, SerializesBitExactly) {
  State state = Prefilled(21);
  std::string bytes = model_->SerializeState(state);
  auto restored = model_->DeserializeState(bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(BitEqual(state, *restored));
  EXPECT_EQ(model_->SerializeState(*restored), bytes);
  ExpectTheSameVerdict(*model_, bytes);
  // The restored state continues exactly like the original.
  auto a = model_->Step(state, {66});
  auto b = model_->Step(*restored, {66});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(torch::equal(*a, *b));
}

// States saved while the sums over positions were float32 (same layout, same
// format) load with those sums widened exactly, and continue from them.
TEST_P(StateTest, Float32SumsOfOlderStatesLoadWidened) {
  const State state = Prefilled(21);
  auto contents = ParseSafetensors(model_->SerializeState(state));
  ASSERT_TRUE(contents.ok()) << contents.status();
  int narrowed = 0;
  for (auto& [name, tensor] : contents->tensors) {
    if (tensor.scalar_type() != torch::kFloat64) continue;
    tensor = tensor.to(torch::kFloat32);
    ++narrowed;
  }
  if (GetParam().config.attention.kind != AttentionKind::kSoftmax) EXPECT_GT(narrowed, 0);
  const std::string narrowed_bytes = SerializeSafetensors(contents->tensors, contents->metadata);
  auto restored = model_->DeserializeState(narrowed_bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectTheSameVerdict(*model_, narrowed_bytes);
  State expected = CloneState(state);
  for (LayerState& layer : expected.layers) {
    for (torch::Tensor& t : layer) {
      if (t.scalar_type() == torch::kFloat64) t = t.to(torch::kFloat32).to(torch::kFloat64);
    }
  }
  EXPECT_TRUE(BitEqual(expected, *restored));
  EXPECT_TRUE(model_->Step(*restored, {66}).ok());
}

TEST_P(StateTest, NaNOrInfInAnyTensorIsDataLossNamingIt) {
  // A fresh state (running maxima at their floor, empty caches) is finite.
  ASSERT_TRUE(model_->DeserializeState(model_->SerializeState(model_->NewState())).ok());
  const State state = Prefilled(13);
  const float bad[] = {std::nanf(""), INFINITY, -INFINITY};
  for (size_t layer = 0; layer < state.layers.size(); ++layer) {
    for (size_t i = 0; i < state.layers[layer].size(); ++i) {
      const torch::Tensor& t = state.layers[layer][i];
      if (!t.is_floating_point() || t.numel() == 0) continue;
      // The first, a middle and the last value: the scan's vector body and
      // its tail alike.
      for (const int64_t at : {int64_t{0}, t.numel() / 2, t.numel() - 1}) {
        for (float value : bad) {
          State poisoned = CloneState(state);
          poisoned.layers[layer][i].view({-1})[at] = value;
          const std::string bytes = model_->SerializeState(poisoned);
          auto restored = model_->DeserializeState(bytes);
          ExpectTheSameVerdict(*model_, bytes);
          ASSERT_EQ(restored.status().code(), absl::StatusCode::kDataLoss)
              << "layer " << layer << " tensor " << i << " value " << value << " at " << at;
          EXPECT_NE(restored.status().message().find("layers." + std::to_string(layer) + "."),
                    std::string::npos)
              << restored.status();
          EXPECT_NE(restored.status().message().find("NaN or Inf"), std::string::npos);
        }
      }
    }
  }
}

TEST_P(StateTest, StackThenSplitGivesBackEachState) {
  State a = Prefilled(3), b = Prefilled(17), c = model_->NewState();
  State batch = StackStates({&a, &b, &c});
  EXPECT_EQ(batch.positions, (std::vector<int64_t>{3, 17, 0}));
  std::vector<State> split = model_->SplitState(batch);
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(model_->SerializeState(split[0]), model_->SerializeState(a));
  EXPECT_EQ(model_->SerializeState(split[1]), model_->SerializeState(b));
  EXPECT_EQ(model_->SerializeState(split[2]), model_->SerializeState(c));
}

// Decode steps give the softmax baseline's cache spare capacity, and a batch
// pads every cache to the longest; a split session keeps neither: its
// tensors hold exactly the bytes StateBytes reports for its position.
TEST_P(StateTest, SplitTrimsGrowingCachesToThePosition) {
  State a = Prefilled(3), b = Prefilled(17);
  State batch = StackStates({&a, &b});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(model_->Step(batch, {1, 2}).ok());
  for (const State& piece : model_->SplitState(batch)) {
    int64_t bytes = 0;
    for (const LayerState& layer : piece.layers) {
      for (const torch::Tensor& t : layer) bytes += t.numel() * t.element_size();
    }
    EXPECT_EQ(bytes, model_->StateBytes(piece.positions[0])) << "at " << piece.positions[0];
  }
}

TEST_P(StateTest, CloneIsIndependent) {
  State original = Prefilled(9);
  const std::string before = model_->SerializeState(original);
  State fork = CloneState(original);
  ASSERT_TRUE(model_->Step(fork, {1}).ok());
  EXPECT_EQ(model_->SerializeState(original), before);
}

// What a session keeps for its conversation: the fixed part alone (what
// StateBytes counts at position 0: a constant state whole, none of a KV
// cache), and, resumed against the same session after more tokens (its
// cache grown past the kept position, with spare capacity), the state at
// the kept position, to the bit.
TEST_P(StateTest, AKeptFixedPartResumesAgainstTheLiveCache) {
  const State at = model_->SplitState(Prefilled(11))[0];
  const State kept = KeepFixedPart(at, model_->state_layout());
  int64_t kept_bytes = 0;
  for (const LayerState& layer : kept.layers) {
    for (const torch::Tensor& t : layer) {
      if (t.defined()) kept_bytes += t.numel() * t.element_size();
    }
  }
  EXPECT_EQ(kept_bytes, model_->StateBytes(0));
  State live = CloneState(at);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(model_->Step(live, {5}).ok());
  ASSERT_NE(model_->SerializeState(model_->SplitState(live)[0]), model_->SerializeState(at));
  const State resumed = ResumeFromKept(kept, live, model_->state_layout());
  EXPECT_EQ(resumed.positions, at.positions);
  EXPECT_EQ(model_->SerializeState(resumed), model_->SerializeState(at));
}

TEST_P(StateTest, MovesBetweenDevices) {
  State state = Prefilled(12);
  State host = MoveState(state, torch::kCPU);
  EXPECT_TRUE(BitEqual(state, host));
  if (torch::cuda::is_available()) {
    State device = MoveState(state, torch::Device(torch::kCUDA, 0));
    EXPECT_TRUE(device.layers[0][0].is_cuda());
    EXPECT_TRUE(BitEqual(state, MoveState(device, torch::kCPU)));
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, StateTest, ::testing::ValuesIn(AllKindConfigs()),
                         [](const auto& info) { return info.param.name; });

TEST(StateBytesTest, RejectsBadBytesWithClearErrors) {
  ModelConfig config = ConfigNamed("linear_elu");
  auto model = TransformerModel::Create(config, 1, torch::kCPU);
  State state = model->NewState();
  ASSERT_TRUE(model->Prefill(state, {1, 2, 3}).ok());
  const std::string bytes = model->SerializeState(state);

  auto truncated = model->DeserializeState(bytes.substr(0, bytes.size() - 5));
  EXPECT_FALSE(truncated.ok());

  ModelConfig other = config;
  other.attention.kind = AttentionKind::kVq;
  auto vq_model = TransformerModel::Create(other, 1, torch::kCPU);
  auto wrong_kind = vq_model->DeserializeState(bytes);
  ASSERT_FALSE(wrong_kind.ok());
  EXPECT_NE(std::string(wrong_kind.status().message()).find("missing tensor"), std::string::npos)
      << wrong_kind.status();

  ModelConfig wider = config;
  wider.head_dim = 16;
  auto wide_model = TransformerModel::Create(wider, 1, torch::kCPU);
  auto wrong_shape = wide_model->DeserializeState(bytes);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(std::string(wrong_shape.status().message()).find("shape"), std::string::npos)
      << wrong_shape.status();

  ExpectTheSameVerdict(*model, bytes.substr(0, bytes.size() - 5));
  ExpectTheSameVerdict(*vq_model, bytes);
  ExpectTheSameVerdict(*wide_model, bytes);
}

}  // namespace
}  // namespace linserve
