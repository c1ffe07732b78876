// State-tuning files (engine/rwkv7/rwkv7_tuned_state.h) on the RWKV-7
// fixture: a file in RWKV-PEFT's layout, written here from asymmetric random
// matrices, gives the float64 reference form's logits started from those
// matrices, and read as the other layout it would not (so the test can tell
// a transposed load); bfloat16 and ai00's transposed float16 files read to
// the same state; hostile files are refused naming what is wrong.

#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "engine/formats/pth_reader.h"
#include "engine/formats/pth_writer.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/rwkv7/rwkv7_reference.h"
#include "engine/rwkv7/rwkv7_tuned_state.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

const std::vector<int64_t> kTokens = {34, 105, 110, 32};  // "in 

std::string FixturePath() {
  return std::string(LINSERVE_SHARED_DATA_DIR) + "/rwkv7/tiny-rwkv7-fp32.pth";
}

class TunedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(FixturePath())) GTEST_SKIP() << "no " << FixturePath();
    absl::StatusOr<TensorMap> tensors = ReadPthFile(FixturePath());
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    absl::StatusOr<Rwkv7Checkpoint> checkpoint = ReadRwkv7Checkpoint(*tensors);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *std::move(checkpoint);
    LoadOptions float32;
    float32.dtype = torch::kFloat32;
    absl::StatusOr<std::unique_ptr<Rwkv7Model>> model = Rwkv7Model::Load(FixturePath(), float32);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    // Asymmetric: a transposed read gives another state.
    torch::manual_seed(11);
    const Rwkv7Config& c = checkpoint_.config;
    for (int64_t layer = 0; layer < c.n_layers; ++layer) {
      tuned_.push_back(0.3 * torch::randn({c.n_heads, c.head_size, c.head_size}));
    }
  }

  // The file RWKV-PEFT's torch.save writes: every layer's time_state.
  std::string PeftFile(const std::vector<torch::Tensor>& states) const {
    TensorMap tensors;
    for (size_t i = 0; i < states.size(); ++i) {
      tensors[absl::StrCat("blocks.", i, ".att.time_state")] = states[i];
    }
    return SerializePth(tensors);
  }

  // The engine's logits after kTokens from `file`'s state.
  torch::Tensor EngineLogits(const std::string& file) const {
    absl::StatusOr<TunedState> tuned = ParseRwkv7TunedState(file, checkpoint_.config);
    EXPECT_TRUE(tuned.ok()) << tuned.status();
    absl::StatusOr<State> state = TunedStateToState(*tuned, *model_);
    EXPECT_TRUE(state.ok()) << state.status();
    torch::Tensor logits;
    for (int64_t token : kTokens) logits = model_->Step(*state, {token}).value()[0];
    return logits.to(torch::kFloat64);
  }

  // The float64 reference form's logits after kTokens from `states`, each
  // (H, N, N) indexed [head][value][key], transposed first when asked.
  torch::Tensor ReferenceLogits(const std::vector<torch::Tensor>& states, bool transposed) const {
    std::vector<std::vector<double>> wkv;
    for (const torch::Tensor& s : states) {
      const torch::Tensor values =
          (transposed ? s.transpose(1, 2) : s).to(torch::kFloat64).contiguous();
      wkv.emplace_back(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
    }
    const std::vector<double> last = Rwkv7ReferenceLogits(checkpoint_, kTokens, wkv).back();
    return torch::tensor(last, torch::kFloat64);
  }

  std::string Refusal(const std::string& file) const {
    absl::StatusOr<TunedState> tuned = ParseRwkv7TunedState(file, checkpoint_.config);
    return tuned.ok() ? "(accepted)" : std::string(tuned.status().message());
  }

  Rwkv7Checkpoint checkpoint_;
  std::unique_ptr<Rwkv7Model> model_;
  std::vector<torch::Tensor> tuned_;  // per layer (H, N, N) float32, [head][value][key]
};

double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST_F(TunedStateTest, APeftFileGivesTheReferenceLogitsFromItsMatrices) {
  const std::string file = PeftFile(tuned_);
  absl::StatusOr<TunedState> tuned = ParseRwkv7TunedState(file, checkpoint_.config);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->layout, TunedStateLayout::kValueByKey);

  const torch::Tensor engine = EngineLogits(file);
  const torch::Tensor expected = ReferenceLogits(tuned_, /*transposed=*/false);
  const torch::Tensor transposed = ReferenceLogits(tuned_, /*transposed=*/true);
  const double error = MaxAbsDiff(engine, expected);
  EXPECT_LT(error, 1e-3);
  // A transposed load would be this far off: the test tells the layouts apart.
  EXPECT_GT(MaxAbsDiff(engine, transposed), 100 * error + 1e-2);
  // And the tuned state matters: the zero state's logits are elsewhere.
  const std::vector<double> zero = Rwkv7ReferenceLogits(checkpoint_, kTokens).back();
  EXPECT_GT(MaxAbsDiff(engine, torch::tensor(zero, torch::kFloat64)), 100 * error + 1e-2);
}

TEST_F(TunedStateTest, ABfloat16PeftFileAndAnAi00FileReadToTheSameState) {
  std::vector<torch::Tensor> bf16, ai00_f16;
  TensorMap ai00;
  for (size_t i = 0; i < tuned_.size(); ++i) {
    bf16.push_back(tuned_[i].to(torch::kBFloat16));
    // ai00's converter: the last two axes swapped, float16.
    ai00[absl::StrCat("blocks.", i, ".att.time_state")] =
        tuned_[i].transpose(1, 2).to(torch::kFloat16).contiguous();
    ai00_f16.push_back(tuned_[i].to(torch::kFloat16).to(torch::kFloat32));
  }
  absl::StatusOr<TunedState> from_bf16 =
      ParseRwkv7TunedState(PeftFile(bf16), checkpoint_.config);
  ASSERT_TRUE(from_bf16.ok()) << from_bf16.status();
  for (size_t i = 0; i < tuned_.size(); ++i) {
    EXPECT_TRUE(torch::equal(from_bf16->wkv[i], bf16[i].to(torch::kFloat32)));
  }

  const std::string ai00_file = SerializeSafetensors(ai00, {{"format", "pt"}});
  absl::StatusOr<TunedState> from_ai00 = ParseRwkv7TunedState(ai00_file, checkpoint_.config);
  ASSERT_TRUE(from_ai00.ok()) << from_ai00.status();
  EXPECT_EQ(from_ai00->layout, TunedStateLayout::kKeyByValue);
  for (size_t i = 0; i < tuned_.size(); ++i) {
    EXPECT_TRUE(torch::equal(from_ai00->wkv[i], ai00_f16[i])) << "layer " << i;
  }
  // Read back into the engine, it gives the reference's logits from the
  // float16 matrices, in the value-by-key layout.
  EXPECT_LT(MaxAbsDiff(EngineLogits(ai00_file), ReferenceLogits(ai00_f16, false)), 1e-3);
}

TEST_F(TunedStateTest, HostileFilesAreRefusedNamingWhatIsWrong) {
  const Rwkv7Config& c = checkpoint_.config;
  std::vector<torch::Tensor> states = tuned_;

  states[3] = torch::zeros({c.n_heads, c.head_size, c.head_size - 1});
  EXPECT_NE(Refusal(PeftFile(states)).find("'blocks.3.att.time_state' has shape (1, 64, 63)"),
            std::string::npos)
      << Refusal(PeftFile(states));

  states = tuned_;
  states.pop_back();
  EXPECT_NE(Refusal(PeftFile(states)).find("no tensor 'blocks.11.att.time_state'"),
            std::string::npos);

  states = tuned_;
  states.push_back(tuned_[0]);
  EXPECT_NE(Refusal(PeftFile(states)).find("names layer 12; the model has 12 layers"),
            std::string::npos);

  states = tuned_;
  states[5] = states[5].clone();
  states[5][0][1][2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(Refusal(PeftFile(states)).find("'blocks.5.att.time_state' holds a NaN"),
            std::string::npos);
  states[5][0][1][2] = std::numeric_limits<float>::infinity();
  EXPECT_NE(Refusal(PeftFile(states)).find("NaN or infinite"), std::string::npos);

  TensorMap model_file;
  model_file["blocks.0.att.time_state"] = tuned_[0];
  model_file["emb.weight"] = torch::zeros({256, 64});
  EXPECT_NE(Refusal(SerializePth(model_file)).find("'emb.weight' is not a layer's time_state"),
            std::string::npos);

  const std::string whole = PeftFile(tuned_);
  absl::StatusOr<TunedState> truncated =
      ParseRwkv7TunedState(whole.substr(0, whole.size() / 2), c);
  EXPECT_FALSE(truncated.ok());
  EXPECT_EQ(Refusal("just some text"),
            "state-tuning file: neither a .pth (zip) nor a safetensors file");
  EXPECT_EQ(Refusal(""), "state-tuning file: neither a .pth (zip) nor a safetensors file");
}

}  // namespace
}  // namespace linserve
