// RWKV-7: the checkpoint reader, and the three forms (float64 reference,
// recurrent step, chunked prefill) against published logits and each other.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/engine_threads.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/rwkv7/rwkv7_config.h"
#include "engine/rwkv7/rwkv7_reference.h"
#include "engine/formats/safetensors.h"
#include "engine/model/state.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

// The shared RWKV-7 fixtures (tests/engine/RWKV7_FIXTURE.md); tests that
// need them skip without.
std::string Rwkv7FixturePath(const std::string& file) {
  return std::string(LINSERVE_SHARED_DATA_DIR) + "/rwkv7/" + file;
}

bool HaveFixtures() {
  return std::filesystem::exists(Rwkv7FixturePath("tiny-rwkv7-fp32.safetensors")) &&
         std::filesystem::exists(Rwkv7FixturePath("expected-logits-7v0-834K.bin"));
}

#define RWKV7_REQUIRE_FIXTURES()                                                        \
  do {                                                                                  \
    if (!HaveFixtures()) GTEST_SKIP() << "no " << Rwkv7FixturePath("tiny-rwkv7-fp32.safetensors"); \
  } while (0)

// The float32 weights, as the file stores them (BlinkDL's names and shapes).
TensorMap ReadFixtureTensors() {
  auto contents = ReadSafetensorsFile(Rwkv7FixturePath("tiny-rwkv7-fp32.safetensors"));
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.ok() ? contents->tensors : TensorMap{};
}

// The 256 logits after the bytes 34, 105, 110 from the zero state, float32.
torch::Tensor ExpectedFixtureLogits() {
  std::ifstream in(Rwkv7FixturePath("expected-logits-7v0-834K.bin"), std::ios::binary);
  torch::Tensor logits = torch::empty({256}, torch::kFloat32);
  in.read(static_cast<char*>(logits.data_ptr()), 256 * sizeof(float));  // little-endian host
  EXPECT_TRUE(in.good());
  return logits;
}

// Tests feed tokens through small chunks so that 3L+5 tokens cross several.
constexpr int64_t kTestChunk = 8;

// Packed for the CPU's bfloat16 product where it can be, as Rwkv7Model does
// (`pack` false: the path of a GPU or of a CPU without AVX-512 BF16).
Rwkv7 MakeModule(const Rwkv7Checkpoint& checkpoint, torch::ScalarType dtype,
                 int64_t chunk = kTestChunk, bool pack = true) {
  Rwkv7Options options;
  options.dtype = dtype;
  options.chunk_size = chunk;
  Rwkv7 module(checkpoint.config, options);
  module->LoadWeights(checkpoint.weights);
  if (pack) module->PackForCpu();
  return module;
}

torch::Tensor Tokens(const std::vector<int64_t>& tokens) {
  return torch::tensor(tokens, torch::kInt64);
}

// Logits after feeding `tokens` one at a time through the recurrent form.
torch::Tensor StepAll(Rwkv7& module, State& state, const std::vector<int64_t>& tokens) {
  torch::Tensor logits;
  for (int64_t t : tokens) logits = module->ForwardStep(Tokens({t}), state);
  return logits[0];
}

torch::Tensor Prefill(Rwkv7& module, State& state, const std::vector<int64_t>& tokens) {
  return module->ForwardPrefill(Tokens(tokens).unsqueeze(0), state)[0];
}

torch::Tensor ReferenceLast(const Rwkv7Checkpoint& checkpoint,
                            const std::vector<int64_t>& tokens) {
  return torch::tensor(Rwkv7ReferenceLogits(checkpoint, tokens).back(), torch::kFloat64);
}

double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

std::vector<int64_t> Text(const std::string& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// ---- checkpoint reader ----------------------------------------------------

TEST(Rwkv7CheckpointTest, InfersTheFixturesShape) {
  RWKV7_REQUIRE_FIXTURES();
  auto checkpoint = ReadRwkv7Checkpoint(ReadFixtureTensors());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const Rwkv7Config& c = checkpoint->config;
  EXPECT_EQ(c.n_layers, 12);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_heads, 1);
  EXPECT_EQ(c.head_size, 64);
  EXPECT_EQ(c.w_lora, 32);
  EXPECT_EQ(c.a_lora, 32);
  EXPECT_EQ(c.v_lora, 32);
  EXPECT_EQ(c.g_lora, 32);
  EXPECT_EQ(c.ffn_size, 256);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_TRUE(c.pre_norm);
  int64_t parameters = 0;
  for (const auto& [name, t] : checkpoint->weights) parameters += t.numel();
  EXPECT_EQ(parameters, 829888);  // the fixtures' README
}

Rwkv7Config SmallConfig(int64_t width, int64_t heads) {
  Rwkv7Config c;
  c.n_layers = 3;
  c.d_model = width;
  c.n_heads = heads;
  c.head_size = width / heads;
  c.w_lora = 16;
  c.a_lora = 12;
  c.v_lora = 8;
  c.g_lora = 24;
  c.ffn_size = 4 * width;
  c.vocab_size = 97;
  return c;
}

TEST(Rwkv7CheckpointTest, FillRandomWeightsEqualsLoadingThem) {
  const Rwkv7Config config = SmallConfig(64, 2);
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    Rwkv7 loaded(config, Rwkv7Options{dtype});
    loaded->LoadWeights(RandomRwkv7Weights(config, 5));
    Rwkv7 filled(config, Rwkv7Options{dtype});
    TensorMap parameters;
    for (const auto& item : filled->named_parameters()) parameters[item.key()] = item.value();
    FillRandomRwkv7Weights(config, 5, parameters);
    for (const auto& item : loaded->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), parameters.at(item.key()))) << item.key();
    }
  }
  TensorMap missing = RandomRwkv7Weights(config, 5);
  missing.erase("head.weight");
  EXPECT_THROW(FillRandomRwkv7Weights(config, 5, missing), c10::Error);
}

// BlinkDL's storage: vectors (1, 1, C), as the published .pth files.
TensorMap AsBlinkDl(const TensorMap& canonical) {
  TensorMap out;
  for (const auto& [name, t] : canonical) {
    const bool vector = t.dim() == 1 && name.find("ln") == std::string::npos;
    out[name] = vector ? t.view({1, 1, -1}) : t;
  }
  return out;
}

// The fla-hub renames, written out independently of the reader.
TensorMap AsFla(const TensorMap& canonical) {
  TensorMap out;
  for (const auto& [name, t] : canonical) {
    std::string n = name;
    torch::Tensor v = t;
    auto replace = [&n](const std::string& from, const std::string& to) {
      if (auto pos = n.find(from); pos != std::string::npos) n.replace(pos, from.size(), to);
    };
    replace("blocks.", "model.layers.");
    replace(".att.", ".attn.");
    for (const char* z : {"w", "a", "v", "g"}) {
      const std::string base = absl::StrCat(".attn.", z);
      if (absl::EndsWith(n, base + "0")) replace(base + "0", absl::StrCat(".attn.", z, "_lora.lora.2.bias"));
      if (absl::EndsWith(n, base + "1")) {
        replace(base + "1", absl::StrCat(".attn.", z, "_lora.lora.0.weight"));
        v = t.t().contiguous();
      }
      if (absl::EndsWith(n, base + "2")) {
        replace(base + "2", absl::StrCat(".attn.", z, "_lora.lora.2.weight"));
        v = t.t().contiguous();
      }
    }
    replace(".receptance.", ".r_proj.");
    replace(".attn.key.", ".attn.k_proj.");
    replace(".attn.value.", ".attn.v_proj.");
    replace(".output.", ".o_proj.");
    replace(".ln_x.", ".g_norm.");
    replace(".ln0.", ".pre_norm.");
    replace(".ln1.", ".attn_norm.");
    replace(".ln2.", ".ffn_norm.");
    if (n == "emb.weight") n = "model.embeddings.weight";
    if (n == "head.weight") n = "lm_head.weight";
    if (n == "ln_out.weight") n = "model.norm.weight";
    if (n == "ln_out.bias") n = "model.norm.bias";
    out[n] = v;
  }
  return out;
}

void ExpectSameCheckpoint(const TensorMap& file, const Rwkv7Config& config,
                          const TensorMap& canonical) {
  auto read = ReadRwkv7Checkpoint(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->config == config) << Rwkv7ConfigToJson(read->config).dump();
  ASSERT_EQ(read->weights.size(), canonical.size());
  for (const auto& [name, t] : canonical) {
    ASSERT_TRUE(read->weights.count(name)) << name;
    EXPECT_TRUE(torch::equal(read->weights.at(name), t)) << name;
  }
}

TEST(Rwkv7CheckpointTest, ReadsBlinkDlAndFlaLayouts) {
  const Rwkv7Config config = SmallConfig(96, 3);
  const TensorMap canonical = RandomRwkv7Weights(config, 3);
  ExpectSameCheckpoint(canonical, config, canonical);
  ExpectSameCheckpoint(AsBlinkDl(canonical), config, canonical);
  ExpectSameCheckpoint(AsFla(canonical), config, canonical);
  // Unused block-0 value-residual tensors, as some published files hold.
  TensorMap extra = AsBlinkDl(canonical);
  extra["blocks.0.att.v0"] = torch::zeros({1, 1, 96});
  extra["blocks.0.att.v1"] = torch::zeros({96, 8});
  extra["blocks.0.att.v2"] = torch::zeros({8, 96});
  ExpectSameCheckpoint(extra, config, canonical);
  // fla-hub files may have no pre-norm.
  TensorMap fla = AsFla(canonical);
  fla.erase("model.layers.0.pre_norm.weight");
  fla.erase("model.layers.0.pre_norm.bias");
  auto read = ReadRwkv7Checkpoint(fla);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->config.pre_norm);
}

std::string ErrorOf(const TensorMap& tensors) {
  auto read = ReadRwkv7Checkpoint(tensors);
  if (read.ok()) return "";
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(read.status().message());
}

TEST(Rwkv7CheckpointTest, ErrorsNameTheTensor) {
  const TensorMap good = AsBlinkDl(RandomRwkv7Weights(SmallConfig(64, 2), 4));
  struct Case {
    std::string what;
    std::function<void(TensorMap&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"missing", [](TensorMap& t) { t.erase("blocks.2.att.k_k"); },
       "missing tensor 'blocks.2.att.k_k' (expected shape [64])"},
      {"missing r_k", [](TensorMap& t) { t.erase("blocks.0.att.r_k"); },
       "missing tensor 'blocks.0.att.r_k'"},
      {"wrong shape", [](TensorMap& t) { t["blocks.1.att.key.weight"] = torch::zeros({64, 63}); },
       "tensor 'blocks.1.att.key.weight' has shape [64, 63], expected [64, 64]"},
      {"wrong vector", [](TensorMap& t) { t["blocks.1.att.x_r"] = torch::zeros({1, 2, 64}); },
       "tensor 'blocks.1.att.x_r' has shape [1, 2, 64], expected [64] or [1, 1, 64]"},
      {"wrong low rank", [](TensorMap& t) { t["blocks.2.att.w2"] = torch::zeros({15, 64}); },
       "tensor 'blocks.2.att.w2' has shape [15, 64], expected [16, 64]"},
      {"dtype", [](TensorMap& t) { t["blocks.0.ffn.x_k"] = torch::zeros({64}, torch::kInt32); },
       "tensor 'blocks.0.ffn.x_k' has dtype Int"},
      {"unexpected", [](TensorMap& t) { t["blocks.0.att.extra"] = torch::zeros({2}); },
       "unexpected tensor 'blocks.0.att.extra'"},
      {"heads", [](TensorMap& t) { t["blocks.0.att.r_k"] = torch::zeros({3, 32}); },
       "tensor 'blocks.0.att.r_k' has shape [3, 32]: heads x head size must equal the width 64"},
      {"no blocks",
       [](TensorMap& t) {
         for (auto it = t.begin(); it != t.end();) {
           it = absl::StartsWith(it->first, "blocks.") ? t.erase(it) : std::next(it);
         }
       },
       "no tensors of blocks"},
  };
  for (const Case& c : cases) {
    TensorMap tensors = good;
    c.edit(tensors);
    const std::string error = ErrorOf(tensors);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": " << error;
  }
  // fla-hub files: errors use the file's own names.
  TensorMap fla = AsFla(RandomRwkv7Weights(SmallConfig(64, 2), 4));
  fla.erase("model.layers.1.attn.a_lora.lora.2.weight");
  EXPECT_NE(ErrorOf(fla).find("missing tensor 'model.layers.1.attn.a_lora.lora.2.weight' "
                              "(expected shape [64, 12])"),
            std::string::npos)
      << ErrorOf(fla);
}

// ---- the published logits ------------------------------------------------

class Rwkv7FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RWKV7_REQUIRE_FIXTURES();
    auto checkpoint = ReadRwkv7Checkpoint(ReadFixtureTensors());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
    expected_ = ExpectedFixtureLogits();
  }

  Rwkv7Checkpoint checkpoint_;
  torch::Tensor expected_;  // (256) float32
  const std::vector<int64_t> in_ = {34, 105, 110};  // "in
};

// A correct implementation lands near 4e-7 of the published float32 logits
// (an independent float64 one agrees with them to that); typical mistakes
// (a wrong eps, a decayed S where the previous one belongs) give 4e-5..1e-4.
constexpr double kFixtureTolerance = 1e-5;

TEST_F(Rwkv7FixtureTest, ReferenceMatches) {
  EXPECT_LT(MaxAbsDiff(ReferenceLast(checkpoint_, in_), expected_), kFixtureTolerance);
}

TEST_F(Rwkv7FixtureTest, RecurrentAndChunkedMatch) {
  Rwkv7 module = MakeModule(checkpoint_, torch::kFloat32);
  State step = module->NewState();
  EXPECT_LT(MaxAbsDiff(StepAll(module, step, in_), expected_), kFixtureTolerance);
  for (int64_t chunk : {1, 2, 8, 32, 64}) {
    Rwkv7 chunked = MakeModule(checkpoint_, torch::kFloat32, chunk);
    State state = chunked->NewState();
    EXPECT_LT(MaxAbsDiff(Prefill(chunked, state, in_), expected_), kFixtureTolerance) << chunk;
  }
}

TEST_F(Rwkv7FixtureTest, MatchesInABatchBesideOtherSessions) {
  Rwkv7 module = MakeModule(checkpoint_, torch::kFloat32);
  // Three sessions at three positions: two have read other text.
  State a = module->NewState(), b = module->NewState(), c = module->NewState();
  Prefill(module, a, Text("The quick brown fox jumps over the lazy dog"));
  Prefill(module, b, {34, 105});
  Prefill(module, c, Text("RWKV"));
  State solo_a = CloneState(a), solo_c = CloneState(c);
  const torch::Tensor alone_a = StepAll(module, solo_a, {46});
  const torch::Tensor alone_c = StepAll(module, solo_c, {55});
  State batch = StackStates({&a, &b, &c});
  const torch::Tensor logits = module->ForwardStep(Tokens({46, 110, 55}), batch);
  EXPECT_LT(MaxAbsDiff(logits[1], expected_), kFixtureTolerance);
  EXPECT_LT(MaxAbsDiff(logits[0], alone_a), 1e-5);
  EXPECT_LT(MaxAbsDiff(logits[2], alone_c), 1e-5);
  EXPECT_EQ(batch.positions, (std::vector<int64_t>{44, 3, 5}));

  // Prefill of a batch at one position: "in" beside two other texts.
  State p = module->NewState(3);
  const torch::Tensor rows = Tokens({34, 105, 110, 120, 121, 122, 1, 2, 3}).view({3, 3});
  const torch::Tensor prefilled = module->ForwardPrefill(rows, p);
  EXPECT_LT(MaxAbsDiff(prefilled[0], expected_), kFixtureTolerance);
}

// bfloat16 weights and products, float32 state. bfloat16 keeps 8 significant
// bits, so every input of a product is rounded by up to 2^-9 relative; over
// 12 layers that leaves about 1e-2 on these logits (largest about 2.6;
// measured 1e-2 recurrent, 7e-3 chunked with oneDNN's products). 5e-2 allows
// five times that, and is still far below what a wrong formula gives (order
// one); the argmax must not move. Both product paths: the packed one (the
// fixture's every matrix packs) and oneDNN's.
TEST_F(Rwkv7FixtureTest, Bfloat16IsClose) {
  for (bool pack : {true, false}) {
    Rwkv7 module = MakeModule(checkpoint_, torch::kBFloat16, kTestChunk, pack);
    EXPECT_EQ(IsPackedBf16(module->head->weight), pack && HasCpuBf16Product());
    State step = module->NewState(), chunked = module->NewState();
    const torch::Tensor a = StepAll(module, step, in_);
    const torch::Tensor b = Prefill(module, chunked, in_);
    for (const torch::Tensor& logits : {a, b}) {
      EXPECT_LT(MaxAbsDiff(logits, expected_), 5e-2) << "packed " << pack;
      EXPECT_EQ(logits.argmax().item<int64_t>(), expected_.argmax().item<int64_t>())
          << "packed " << pack;
    }
  }
}

// ---- random weights, several heads ----------------------------------------

struct Shape {
  std::string name;
  Rwkv7Config config;
};

std::vector<Shape> RandomShapes() {
  return {{"C128_H2", SmallConfig(128, 2)},
          {"C192_H3", SmallConfig(192, 3)},
          {"C64_H4_N16", SmallConfig(64, 4)}};
}

std::vector<int64_t> RandomTokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> out;
  uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out.push_back(static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(vocab)));
  }
  return out;
}

class Rwkv7FormsTest : public ::testing::TestWithParam<Shape> {};

// The float32 forms against the float64 reference: the logits are of order
// one (random weights are scaled so); float32 products and sums carry about
// 1e-6 relative error per layer, and the chunked form's decay ratios, each
// rounded once, add as much again, so 1e-4 leaves an order of magnitude of
// margin while a per-head mistake shows at 1e-1.
constexpr double kFormsTolerance = 1e-4;

TEST_P(Rwkv7FormsTest, ThreeFormsAgree) {
  Rwkv7Checkpoint checkpoint{GetParam().config, RandomRwkv7Weights(GetParam().config, 11)};
  Rwkv7 module = MakeModule(checkpoint, torch::kFloat32);
  const int64_t L = kTestChunk;
  for (int64_t n : {int64_t{1}, int64_t{7}, L, L + 1, 3 * L + 5}) {
    const std::vector<int64_t> tokens = RandomTokens(n, checkpoint.config.vocab_size, n);
    const torch::Tensor reference = ReferenceLast(checkpoint, tokens);
    const double scale = std::max(1.0, reference.abs().max().item<double>());
    State step = module->NewState(), chunked = module->NewState();
    const torch::Tensor a = StepAll(module, step, tokens);
    const torch::Tensor b = Prefill(module, chunked, tokens);
    EXPECT_LT(MaxAbsDiff(a, reference), kFormsTolerance * scale) << "recurrent, n=" << n;
    EXPECT_LT(MaxAbsDiff(b, reference), kFormsTolerance * scale) << "chunked, n=" << n;
    // Both forms leave the same state.
    for (size_t l = 0; l < step.layers.size(); ++l) {
      for (size_t i = 0; i < step.layers[l].size(); ++i) {
        EXPECT_LT(MaxAbsDiff(step.layers[l][i], chunked.layers[l][i]), 1e-4)
            << "n=" << n << " layer " << l << " tensor " << i;
      }
    }
  }
}

TEST_P(Rwkv7FormsTest, PrefillThenStepEqualsLongerPrefill) {
  Rwkv7Checkpoint checkpoint{GetParam().config, RandomRwkv7Weights(GetParam().config, 12)};
  Rwkv7 module = MakeModule(checkpoint, torch::kFloat32);
  for (int64_t n : {int64_t{1}, int64_t{7}, kTestChunk, 3 * kTestChunk + 5}) {
    const std::vector<int64_t> tokens = RandomTokens(n + 1, checkpoint.config.vocab_size, 7 * n);
    State a = module->NewState(), b = module->NewState();
    Prefill(module, a, std::vector<int64_t>(tokens.begin(), tokens.end() - 1));
    const torch::Tensor stepped = StepAll(module, a, {tokens.back()});
    const torch::Tensor whole = Prefill(module, b, tokens);
    EXPECT_LT(MaxAbsDiff(stepped, whole), kFormsTolerance) << "n=" << n;
    EXPECT_EQ(a.positions, b.positions);
  }
}

TEST_P(Rwkv7FormsTest, BatchRowsEqualSingleSessions) {
  Rwkv7Checkpoint checkpoint{GetParam().config, RandomRwkv7Weights(GetParam().config, 13)};
  Rwkv7 module = MakeModule(checkpoint, torch::kFloat32);
  const int64_t V = checkpoint.config.vocab_size;
  std::vector<State> singles;
  std::vector<torch::Tensor> expected;
  torch::Tensor rows = torch::empty({3, 2 * kTestChunk + 3}, torch::kInt64);
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<int64_t> tokens = RandomTokens(rows.size(1), V, 100 + i);
    rows[i] = Tokens(tokens);
    singles.push_back(module->NewState());
    expected.push_back(Prefill(module, singles.back(), tokens));
  }
  // Low-rank widths of 8 to 24 here, so within a tolerance: docs/DESIGN.md,
  // "What is bit-identical" (Rwkv7PiecesTest.ABatchGivesEachSessionItsBits
  // checks the bits at the published widths).
  State batch = module->NewState(3);
  const torch::Tensor logits = module->ForwardPrefill(rows, batch);
  for (int64_t i = 0; i < 3; ++i) EXPECT_LT(MaxAbsDiff(logits[i], expected[i]), 1e-5) << i;
  // The batch's state rows are the single sessions' states.
  for (size_t l = 0; l < batch.layers.size(); ++l) {
    for (size_t t = 0; t < batch.layers[l].size(); ++t) {
      for (int64_t i = 0; i < 3; ++i) {
        EXPECT_LT(MaxAbsDiff(batch.layers[l][t][i], singles[i].layers[l][t][0]), 1e-5);
      }
    }
  }
  // Then one step for all three at different positions (one steps ahead first).
  StepAll(module, singles[0], {5});
  State stacked = StackStates({&singles[0], &singles[1], &singles[2]});
  const torch::Tensor step = module->ForwardStep(Tokens({6, 7, 8}), stacked);
  for (int64_t i = 0; i < 3; ++i) {
    State single = CloneState(singles[i]);
    EXPECT_LT(MaxAbsDiff(step[i], StepAll(module, single, {6 + i})), 1e-5) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Rwkv7FormsTest, ::testing::ValuesIn(RandomShapes()),
                         [](const auto& info) { return info.param.name; });

TEST(Rwkv7StateTest, StateSizeIsConstantAndFinite) {
  const Rwkv7Config config = SmallConfig(128, 2);
  Rwkv7Checkpoint checkpoint{config, RandomRwkv7Weights(config, 14)};
  Rwkv7 module = MakeModule(checkpoint, torch::kFloat32, 32);
  auto bytes = [](const State& state) {
    int64_t total = 0;
    for (const LayerState& layer : state.layers) {
      for (const torch::Tensor& t : layer) total += t.numel() * t.element_size();
    }
    return total;
  };
  State short_state = module->NewState(), long_state = module->NewState();
  Prefill(module, short_state, RandomTokens(10, config.vocab_size, 1));
  Prefill(module, long_state, RandomTokens(10000, config.vocab_size, 2));
  EXPECT_EQ(bytes(short_state), bytes(long_state));
  EXPECT_EQ(bytes(long_state), 3 * (2 * 128 + 2 * 64 * 64) * 4);
  for (const LayerState& layer : long_state.layers) {
    for (const torch::Tensor& t : layer) EXPECT_TRUE(torch::isfinite(t).all().item<bool>());
  }
  EXPECT_EQ(long_state.positions, std::vector<int64_t>{10000});
}

// Two layers at the 0.1B shape's width and low-rank widths.
Rwkv7Config PublishedWidths() {
  Rwkv7Config config = SmallConfig(768, 12);
  config.n_layers = 2;
  config.w_lora = 64;
  config.a_lora = 64;
  config.v_lora = 32;
  config.g_lora = 128;
  return config;
}

// docs/DESIGN.md, "What is bit-identical", row "prefill in pieces ending on
// chunk boundaries". The prefix-state cache resumes a prompt at a chunk boundary and prefills
// the rest in pieces that end on chunk boundaries (server/scheduling/prefill_pieces.h);
// its output is the same bits as a run from the start only if a chunk's
// numbers do not depend on how many chunks share the engine call. Low-rank
// widths and width as published (Dv = 32 is the narrowest product), chunk 32.
TEST(Rwkv7PiecesTest, ChunkAlignedPiecesGiveTheSameBitsAsOneCall) {
  const Rwkv7Config config = PublishedWidths();
  Rwkv7Checkpoint checkpoint{config, RandomRwkv7Weights(config, 21)};
  constexpr int64_t L = 32;
  const std::vector<int64_t> tokens = RandomTokens(5 * L + 7, config.vocab_size, 21);
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    Rwkv7 module = MakeModule(checkpoint, dtype, L);
    auto run = [&](const std::vector<int64_t>& ends) {
      State state = module->NewState();
      torch::Tensor logits;
      int64_t start = 0;
      for (int64_t end : ends) {
        logits = Prefill(module, state,
                         std::vector<int64_t>(tokens.begin() + start, tokens.begin() + end));
        start = end;
      }
      return std::make_pair(logits, state);
    };
    // The whole prompt on one thread, the pieces on two: the cache's resumes
    // hold at any pool size.
    SetEngineThreads(1);
    const auto [whole_logits, whole] = run({5 * L, 5 * L + 7});
    SetEngineThreads(2);
    for (const std::vector<int64_t>& ends : {std::vector<int64_t>{L, 3 * L, 5 * L, 5 * L + 7},
                                             {4 * L, 5 * L, 5 * L + 7},
                                             {2 * L, 5 * L, 5 * L + 7}}) {
      const auto [logits, state] = run(ends);
      EXPECT_TRUE(torch::equal(logits, whole_logits))
          << c10::toString(dtype) << ", pieces ending at " << ends[0];
      for (size_t l = 0; l < state.layers.size(); ++l) {
        for (size_t t = 0; t < state.layers[l].size(); ++t) {
          EXPECT_TRUE(torch::equal(state.layers[l][t], whole.layers[l][t]))
              << c10::toString(dtype) << ", pieces ending at " << ends[0] << ", layer " << l
              << " tensor " << t;
        }
      }
    }
    SetEngineThreads(1);
  }
}

// docs/DESIGN.md, "What is bit-identical", rows "prefill of several
// sessions" and "decode batch", at the 0.1B shape's widths (every width a
// multiple of 32): each session's logits and state have the same bits in a
// batch of three as alone, prefill and decode, in both dtypes.
TEST(Rwkv7PiecesTest, ABatchGivesEachSessionItsBits) {
  const Rwkv7Config config = PublishedWidths();
  Rwkv7Checkpoint checkpoint{config, RandomRwkv7Weights(config, 22)};
  constexpr int64_t L = 32;
  constexpr int64_t kSessions = 3, kLength = 2 * L + 5;
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    Rwkv7 module = MakeModule(checkpoint, dtype, L);
    torch::Tensor rows = torch::empty({kSessions, kLength}, torch::kInt64);
    std::vector<State> singles;
    std::vector<torch::Tensor> prefilled, stepped;
    for (int64_t i = 0; i < kSessions; ++i) {
      const std::vector<int64_t> tokens = RandomTokens(kLength, config.vocab_size, 40 + i);
      rows[i] = Tokens(tokens);
      singles.push_back(module->NewState());
      prefilled.push_back(Prefill(module, singles.back(), tokens));
    }
    // One session a token ahead, so the decode batch mixes positions.
    StepAll(module, singles[0], {5});
    for (int64_t i = 0; i < kSessions; ++i) {
      State single = CloneState(singles[i]);
      stepped.push_back(StepAll(module, single, {9 + i}));
    }
    State batch = module->NewState(kSessions);
    const torch::Tensor logits = module->ForwardPrefill(rows, batch);
    State stacked = StackStates({&singles[0], &singles[1], &singles[2]});
    const torch::Tensor step = module->ForwardStep(Tokens({9, 10, 11}), stacked);
    for (int64_t i = 0; i < kSessions; ++i) {
      EXPECT_TRUE(torch::equal(logits[i], prefilled[i])) << c10::toString(dtype) << " prefill " << i;
      EXPECT_TRUE(torch::equal(step[i], stepped[i])) << c10::toString(dtype) << " decode " << i;
    }
  }
}

}  // namespace
}  // namespace linserve
