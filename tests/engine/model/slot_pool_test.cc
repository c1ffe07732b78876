// The decode slot pool (engine/model/slot_pool.h): sessions joining and
// leaving in random order step to the same bits as each stepped alone, for
// every attention kind with a constant state and for RWKV-7 (whose token
// shifts the model replaces rather than updates); the softmax baseline's
// growing cache goes through the pool's stacking fallback.

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "engine/model/language_model.h"
#include "engine/model/slot_pool.h"
#include "engine/transformer/transformer_model.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"
#include "tests/rwkv7_fixture.h"

namespace linserve {
namespace {

constexpr int kSessions = 6;
constexpr int kSteps = 12;

// Session s's token at its step t.
int64_t TokenOf(int s, int t) { return 1 + (37 * s + 11 * t) % 250; }

// Each session's logits at each of its steps, stepped alone from its prompt.
std::vector<std::vector<torch::Tensor>> Alone(LanguageModel& model,
                                              const std::vector<State>& starts) {
  std::vector<std::vector<torch::Tensor>> out;
  for (int s = 0; s < kSessions; ++s) {
    State state = CloneState(starts[s]);
    std::vector<torch::Tensor> steps;
    for (int t = 0; t < kSteps; ++t) {
      absl::StatusOr<torch::Tensor> logits = model.Step(state, {TokenOf(s, t)});
      EXPECT_TRUE(logits.ok()) << logits.status();
      steps.push_back(logits->reshape({-1}).clone());
    }
    out.push_back(std::move(steps));
  }
  return out;
}

// Sessions join and leave the pool at random (a leaver takes its state out,
// as a finished turn or a checkpoint does, and may join again later) until
// each has taken all its steps; every row is compared with the session alone.
void ExpectSameBitsAsAlone(LanguageModel& model, bool exact, uint64_t seed) {
  std::vector<State> starts;
  for (int s = 0; s < kSessions; ++s) {
    State state = model.NewState();
    std::vector<int64_t> prompt;
    for (int i = 0; i <= s; ++i) prompt.push_back(1 + (s * 7 + i * 3) % 200);
    ASSERT_TRUE(model.Prefill(state, prompt).ok());
    starts.push_back(std::move(state));
  }
  const std::vector<std::vector<torch::Tensor>> alone = Alone(model, starts);

  SlotPool pool(model.state_layout());
  std::vector<State> own = starts;       // a session's state while out of the pool
  std::vector<int> slot_of(kSessions, -1);
  std::vector<int> session_in;           // the session in each slot
  std::vector<int> taken(kSessions, 0);  // steps taken
  std::mt19937_64 rng(seed);
  int compared = 0;
  auto leave = [&](int slot) {
    const int s = session_in[slot];
    own[s] = pool.Leave(slot);
    session_in[slot] = session_in.back();
    slot_of[session_in[slot]] = slot;
    session_in.pop_back();
    slot_of[s] = -1;
  };
  while (true) {
    for (int s = 0; s < kSessions; ++s) {
      if (taken[s] < kSteps && slot_of[s] < 0 && rng() % 2 == 0) {
        slot_of[s] = static_cast<int>(pool.Join(own[s]));
        ASSERT_EQ(slot_of[s], static_cast<int>(session_in.size()));
        session_in.push_back(s);
      }
    }
    for (int slot = static_cast<int>(session_in.size()) - 1; slot >= 0; --slot) {
      if (rng() % 4 == 0) leave(slot);  // a checkpoint, or a pause
    }
    if (session_in.empty()) {
      bool done = true;
      for (int s = 0; s < kSessions; ++s) done = done && taken[s] == kSteps;
      if (done) break;
      continue;
    }
    std::vector<int64_t> tokens;
    for (int s : session_in) tokens.push_back(TokenOf(s, taken[s]));
    absl::StatusOr<torch::Tensor> logits = model.Step(pool.Batch(), tokens);
    ASSERT_TRUE(logits.ok()) << logits.status();
    pool.Absorb();
    for (size_t slot = 0; slot < session_in.size(); ++slot) {
      const int s = session_in[slot];
      const torch::Tensor& want = alone[s][taken[s]];
      const torch::Tensor got = (*logits)[static_cast<int64_t>(slot)];
      EXPECT_TRUE(exact ? torch::equal(got, want) : torch::allclose(got, want, 1e-4, 1e-5))
          << "session " << s << ", step " << taken[s] << ", slot " << slot;
      ++taken[s];
      ++compared;
    }
    for (int slot = static_cast<int>(session_in.size()) - 1; slot >= 0; --slot) {
      if (taken[session_in[slot]] == kSteps) leave(slot);
    }
  }
  EXPECT_EQ(compared, kSessions * kSteps);
  for (int s = 0; s < kSessions; ++s) {
    EXPECT_EQ(own[s].positions[0], starts[s].positions[0] + kSteps) << "session " << s;
  }
}

class SlotPoolKindTest : public ::testing::TestWithParam<NamedConfig> {};

TEST_P(SlotPoolKindTest, JoiningAndLeavingKeepsEachSessionsBits) {
  auto model = TransformerModel::Create(GetParam().config, 5, torch::kCPU);
  const bool exact = HasConstantState(GetParam().config.attention.kind);
  for (uint64_t seed : {1, 2, 3}) ExpectSameBitsAsAlone(*model, exact, seed);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SlotPoolKindTest, ::testing::ValuesIn(AllKindConfigs()),
                         [](const auto& info) { return info.param.name; });

TEST(SlotPoolRwkv7Test, JoiningAndLeavingKeepsEachSessionsBits) {
  if (!std::filesystem::exists(Rwkv7FixturePath("tiny-rwkv7-fp32.pth"))) {
    GTEST_SKIP() << "no " << Rwkv7FixturePath("tiny-rwkv7-fp32.pth");
  }
  const std::string dir = WriteTinyRwkv7Dir(
      (std::filesystem::temp_directory_path() / "slot-pool-rwkv7").string());
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    LoadOptions options;
    options.device = torch::kCPU;
    options.dtype = dtype;
    auto model = LanguageModel::Load(dir, options);
    ASSERT_TRUE(model.ok()) << model.status();
    for (uint64_t seed : {4, 5}) ExpectSameBitsAsAlone(**model, /*exact=*/true, seed);
  }
}

TEST(SlotPoolTest, GrowsPastItsFirstCapacityAndKeepsTheRows) {
  auto model = TransformerModel::Create(ConfigNamed("linear_elu"), 5, torch::kCPU);
  SlotPool pool(model->state_layout());
  std::vector<State> states;
  for (int s = 0; s < 20; ++s) {
    State state = model->NewState();
    ASSERT_TRUE(model->Prefill(state, {static_cast<int64_t>(1 + s)}).ok());
    EXPECT_EQ(pool.Join(state), s);
    states.push_back(std::move(state));
  }
  EXPECT_EQ(pool.size(), 20);
  // Slot 3 leaves: the last (19) moves into it.
  State out = pool.Leave(3);
  for (size_t t = 0; t < out.layers[0].size(); ++t) {
    EXPECT_TRUE(torch::equal(out.layers[0][t], states[3].layers[0][t]));
    EXPECT_TRUE(torch::equal(pool.Batch().layers[0][t][3], states[19].layers[0][t][0]));
  }
  EXPECT_EQ(pool.size(), 19);
}

}  // namespace
}  // namespace linserve
