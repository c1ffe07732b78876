// Qwen3.5's config.json parser, the checkpoint reader of a Hugging Face model
// directory, and the random directory writer: the tiny directory loads in
// each layout a real checkpoint comes in, and bad directories are refused
// with an error naming the culprit.

#include "engine/qwen35/qwen35_checkpoint.h"

#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "engine/qwen35/qwen35_reference.h"
#include "engine/text/hf_model_files.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kShard1[] = "model-00001-of-00002.safetensors";
constexpr char kShard2[] = "model-00002-of-00002.safetensors";
constexpr char kIndex[] = "model.safetensors.index.json";

Qwen35Config Tiny() { return *Qwen35ShapeByName("tiny"); }

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void WriteJson(const fs::path& path, const nlohmann::json& json) {
  std::ofstream(path, std::ios::trunc) << json.dump(2);
}

// ---------------------------------------------------------------------------
// config.json

TEST(Qwen35ConfigTest, TinyShape) {
  const Qwen35Config c = Tiny();
  EXPECT_EQ(c.num_hidden_layers, 4);
  ASSERT_EQ(c.layer_types.size(), 4u);
  EXPECT_EQ(c.layer_types[3], Qwen35LayerKind::kFullAttention);
  EXPECT_EQ(c.full_attention_layers(), 1);
  EXPECT_EQ(c.rotary_dim(), 8);
  EXPECT_EQ(c.key_dim(), 32);
  EXPECT_EQ(c.value_dim(), 64);
  EXPECT_EQ(c.conv_dim(), 128);
  EXPECT_EQ(c.linear_num_value_heads / c.linear_num_key_heads, 2);  // grouped value heads
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{kQwen35TinyEndOfTextId});
  EXPECT_EQ(Qwen35FirstAddedTokenId(c.vocab_size), kQwen35TinyEndOfTextId);
}

TEST(Qwen35ConfigTest, RealShapesMatchTheSpec) {
  struct Row {
    const char* name;
    int64_t hidden, layers, heads, kv_heads, value_heads, intermediate;
  };
  for (const Row& row : {Row{"0.8b", 1024, 24, 8, 2, 16, 3584}, Row{"2b", 2048, 24, 8, 2, 16, 6144},
                         Row{"4b", 2560, 32, 16, 4, 32, 9216}}) {
    SCOPED_TRACE(row.name);
    absl::StatusOr<Qwen35Config> c = Qwen35ShapeByName(row.name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->hidden_size, row.hidden);
    EXPECT_EQ(c->num_hidden_layers, row.layers);
    EXPECT_EQ(c->full_attention_layers(), row.layers / 4);
    EXPECT_EQ(c->num_attention_heads, row.heads);
    EXPECT_EQ(c->num_key_value_heads, row.kv_heads);
    EXPECT_EQ(c->linear_num_value_heads, row.value_heads);
    EXPECT_EQ(c->linear_num_key_heads, 16);
    EXPECT_EQ(c->intermediate_size, row.intermediate);
    EXPECT_EQ(c->vocab_size, 248320);
    EXPECT_EQ(c->head_dim, 256);
    EXPECT_EQ(c->rotary_dim(), 64);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(Qwen35FirstAddedTokenId(c->vocab_size), 248044);
    const auto shapes = Qwen35TensorShapes(*c);
    EXPECT_EQ(shapes.at("layers.0.linear_attn.in_proj_qkv.weight"),
              (std::vector<int64_t>{2 * 2048 + 128 * row.value_heads, row.hidden}));
    EXPECT_EQ(shapes.at("layers.3.self_attn.q_proj.weight"),
              (std::vector<int64_t>{2 * 256 * row.heads, row.hidden}));
    EXPECT_EQ(shapes.count("lm_head.weight"), 0u);
    // Through the config.json a real checkpoint writes, nested and flat.
    for (bool flat : {false, true}) {
      absl::StatusOr<Qwen35Config> parsed = Qwen35ConfigFromJson(Qwen35HfConfigJson(*c, flat));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_TRUE(*parsed == *c);
    }
  }
  EXPECT_THAT(Qwen35ShapeByName("9b").status().message(), HasSubstr("'9b'"));
}

TEST(Qwen35ConfigTest, RoundTrips) {
  const Qwen35Config c = Tiny();
  for (const nlohmann::json& json :
       {Qwen35HfConfigJson(c, false), Qwen35HfConfigJson(c, true), Qwen35ConfigToJson(c)}) {
    absl::StatusOr<Qwen35Config> parsed = Qwen35ConfigFromJson(json);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << json.dump();
    EXPECT_TRUE(*parsed == c) << json.dump();
    EXPECT_TRUE(IsQwen35Config(json));
  }
}

TEST(Qwen35ConfigTest, RecognisesTheFamily) {
  EXPECT_TRUE(IsQwen35Config({{"model_type", "qwen3_5"}}));
  EXPECT_TRUE(IsQwen35Config({{"model_type", "qwen3_5_text"}}));
  EXPECT_TRUE(IsQwen35Config({{"architectures", {"Qwen3_5ForCausalLM"}}}));
  EXPECT_FALSE(IsQwen35Config({{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}}));
  EXPECT_FALSE(IsQwen35Config({{"model_type", "qwen3_5_moe"}}));
  EXPECT_FALSE(IsQwen35Config({{"architecture", "rwkv7"}}));
  EXPECT_FALSE(IsQwen35Config(nlohmann::json::array()));
}

TEST(Qwen35ConfigTest, LayerTypesOrTheInterval) {
  nlohmann::json json = Qwen35HfConfigJson(Tiny(), false);
  json["text_config"].erase("layer_types");
  json["text_config"]["full_attention_interval"] = 2;
  absl::StatusOr<Qwen35Config> c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layer_types,
            (std::vector<Qwen35LayerKind>{
                Qwen35LayerKind::kLinearAttention, Qwen35LayerKind::kFullAttention,
                Qwen35LayerKind::kLinearAttention, Qwen35LayerKind::kFullAttention}));
  json["text_config"].erase("full_attention_interval");  // transformers' default: 4
  c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layer_types, Tiny().layer_types);
}

TEST(Qwen35ConfigTest, PureGatedDeltaNet) {
  nlohmann::json json = Qwen35HfConfigJson(Tiny(), false);
  json["text_config"]["layer_types"] = std::vector<std::string>(4, "linear_attention");
  absl::StatusOr<Qwen35Config> c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->full_attention_layers(), 0);
  for (const auto& [name, shape] : Qwen35TensorShapes(*c)) {
    EXPECT_EQ(name.find("self_attn"), std::string::npos) << name;
  }
}

TEST(Qwen35ConfigTest, EosIdsOneOrAList) {
  nlohmann::json json = Qwen35HfConfigJson(Tiny(), false);
  json["text_config"]["eos_token_id"] = {450, 448};
  json["eos_token_id"] = 448;
  absl::StatusOr<Qwen35Config> c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{450, 448}));
  json["text_config"].erase("eos_token_id");
  json.erase("eos_token_id");
  c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST(Qwen35ConfigTest, RopeParametersOrFlatKeys) {
  nlohmann::json json = Qwen35HfConfigJson(Tiny(), true);
  json.erase("rope_parameters");
  json["rope_theta"] = 5e5;
  json["partial_rotary_factor"] = 0.5;
  absl::StatusOr<Qwen35Config> c = Qwen35ConfigFromJson(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_theta, 5e5);
  EXPECT_EQ(c->rotary_dim(), 16);
}

// Each bad field is refused with an error naming it.
TEST(Qwen35ConfigTest, RefusesBadFieldsByName) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;  // on the nested config
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"value heads", [](nlohmann::json& j) { j["text_config"]["linear_num_value_heads"] = 3; },
       "config.json: text_config.linear_num_value_heads (3) is not a multiple of "
       "linear_num_key_heads (2)"},
      {"query heads", [](nlohmann::json& j) { j["text_config"]["num_attention_heads"] = 5; },
       "text_config.num_attention_heads (5) is not a multiple of num_key_value_heads (2)"},
      {"layer type",
       [](nlohmann::json& j) { j["text_config"]["layer_types"][2] = "sliding_attention"; },
       "text_config.layer_types[2] (\"sliding_attention\") is not a known layer type"},
      {"layer count", [](nlohmann::json& j) { j["text_config"]["layer_types"].erase(0); },
       "text_config.layer_types is not a list of num_hidden_layers (4)"},
      {"zero size", [](nlohmann::json& j) { j["text_config"]["hidden_size"] = 0; },
       "text_config.hidden_size (0) is not an integer in [1,"},
      {"missing", [](nlohmann::json& j) { j["text_config"].erase("head_dim"); },
       "text_config.head_dim is missing"},
      {"string", [](nlohmann::json& j) { j["text_config"]["vocab_size"] = "512"; },
       "text_config.vocab_size (\"512\") is not an integer"},
      {"huge", [](nlohmann::json& j) { j["text_config"]["intermediate_size"] = int64_t{1} << 40; },
       "text_config.intermediate_size (1099511627776)"},
      {"rotary",
       [](nlohmann::json& j) {
         j["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.3;
       },
       "text_config.rope_parameters.partial_rotary_factor (0.3) times head_dim (32) gives 9"},
      {"rope type",
       [](nlohmann::json& j) { j["text_config"]["rope_parameters"]["rope_type"] = "yarn"; },
       "text_config.rope_parameters.rope_type (\"yarn\") is not supported"},
      {"theta", [](nlohmann::json& j) { j["text_config"]["rope_parameters"]["rope_theta"] = -1; },
       "text_config.rope_parameters.rope_theta (-1)"},
      {"eps", [](nlohmann::json& j) { j["text_config"]["rms_norm_eps"] = "tiny"; },
       "text_config.rms_norm_eps (\"tiny\") is not a number"},
      {"activation", [](nlohmann::json& j) { j["text_config"]["hidden_act"] = "gelu"; },
       "text_config.hidden_act (\"gelu\") is not supported"},
      {"gate", [](nlohmann::json& j) { j["text_config"]["attn_output_gate"] = false; },
       "text_config.attn_output_gate (false) is not supported"},
      {"experts", [](nlohmann::json& j) { j["text_config"]["num_experts"] = 8; },
       "text_config.num_experts (8) is not supported"},
      {"eos", [](nlohmann::json& j) { j["text_config"]["eos_token_id"] = 512; },
       "text_config.eos_token_id (512) is not a token id"},
      {"eos list",
       [](nlohmann::json& j) {
         j["eos_token_id"] = {1, "2"};
       },
       "config.json: eos_token_id ([1,\"2\"]) is not a token id"},
      {"model type", [](nlohmann::json& j) { j["model_type"] = "llama"; },
       "config.json: model_type (\"llama\") is not supported"},
      {"text config", [](nlohmann::json& j) { j["text_config"] = 3; },
       "config.json: text_config is not a JSON object"},
      {"tie", [](nlohmann::json& j) { j["tie_word_embeddings"] = "yes"; },
       "config.json: tie_word_embeddings (\"yes\") is not true or false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    nlohmann::json json = Qwen35HfConfigJson(Tiny(), false);
    c.edit(json);
    absl::StatusOr<Qwen35Config> parsed = Qwen35ConfigFromJson(json);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.expected));
  }
  // A flat config names its fields without the prefix.
  nlohmann::json flat = Qwen35HfConfigJson(Tiny(), true);
  flat["linear_num_value_heads"] = 3;
  EXPECT_THAT(Qwen35ConfigFromJson(flat).status().message(),
              HasSubstr("config.json: linear_num_value_heads (3) is not a multiple of "
                        "linear_num_key_heads (2)"));
  EXPECT_THAT(Qwen35ConfigFromJson(nlohmann::json::array()).status().message(),
              HasSubstr("not a JSON object"));
}

// ---------------------------------------------------------------------------
// Random weights

TEST(Qwen35RandomTest, DeterministicInTheSeed) {
  const TensorMap a = RandomQwen35Weights(Tiny(), 1);
  const TensorMap b = RandomQwen35Weights(Tiny(), 1);
  const TensorMap c = RandomQwen35Weights(Tiny(), 2);
  ASSERT_EQ(a.size(), Qwen35TensorShapes(Tiny()).size());
  for (const auto& [name, tensor] : a) {
    EXPECT_EQ(tensor.scalar_type(), torch::kFloat32) << name;
    EXPECT_EQ(tensor.sizes(), at::IntArrayRef(Qwen35TensorShapes(Tiny()).at(name))) << name;
    EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
    EXPECT_FALSE(torch::equal(tensor, c.at(name))) << name;
  }
}

// The scales RandomQwen35Weights promises.
TEST(Qwen35RandomTest, ScalesAsDocumented) {
  Qwen35Config config = Tiny();
  const TensorMap w = RandomQwen35Weights(config, 1);
  torch::manual_seed(0);
  // Zero-centred norms small but not zero; the GDN output norm around one.
  for (const auto& [name, t] : w) {
    if (t.dim() != 1 || name.find("linear_attn.") != std::string::npos) continue;
    EXPECT_LE(t.abs().max().item<float>(), 0.25f) << name;
    EXPECT_GT(t.abs().mean().item<float>(), 0.05f) << name;
  }
  const at::Tensor gdn_norm = w.at("layers.0.linear_attn.norm.weight");
  EXPECT_GE(gdn_norm.min().item<float>(), 0.7f);
  EXPECT_LE(gdn_norm.max().item<float>(), 1.3f);
  // Logits of a normalised hidden state through the tied embedding: std about 8.
  const at::Tensor h = torch::randn({256, 64});
  const at::Tensor hn = h / h.pow(2).mean(-1, true).sqrt() * (1 + w.at("norm.weight"));
  const double logit_std = hn.matmul(w.at("embed_tokens.weight").t()).std().item<double>();
  EXPECT_GT(logit_std, 6.0);
  EXPECT_LT(logit_std, 10.0);
  // Decays exp(g) spread over (0, 1), g = -exp(A_log) softplus(a + dt_bias).
  std::vector<at::Tensor> decays;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string b = "layers." + std::to_string(layer) + ".linear_attn.";
    const at::Tensor a = torch::randn({1000, 64}).matmul(w.at(b + "in_proj_a.weight").t());
    const at::Tensor g = -w.at(b + "A_log").exp() * torch::softplus(a + w.at(b + "dt_bias"));
    decays.push_back(g.exp().flatten());
  }
  const at::Tensor decay = torch::cat(decays);
  EXPECT_LT(decay.min().item<float>(), 0.05f);
  EXPECT_GT(decay.max().item<float>(), 0.98f);
  EXPECT_LT(decay.quantile(0.25).item<float>(), 0.6f);
  EXPECT_GT(decay.quantile(0.75).item<float>(), 0.8f);
  // An untied model: an embedding of std 1 and a head of std 8 / sqrt(H).
  config.tie_word_embeddings = false;
  const TensorMap untied = RandomQwen35Weights(config, 1);
  EXPECT_NEAR(untied.at("embed_tokens.weight").std().item<double>(), 1.0, 0.05);
  EXPECT_NEAR(untied.at("lm_head.weight").std().item<double>(), 1.0, 0.05);
}

// Greedy decoding of the tiny random model through the float64 reference:
// every step's margin (top-1 minus top-2 logit) clear of what rounding the
// weights to bfloat16 moves the logits by, so that a bfloat16 form greedy-
// decodes the same tokens; and logits of std about 8. The price: with the
// embedding tied and the residual writes small, the last token's own row
// dominates the logits, and greedy decoding repeats it (measured: 1 distinct
// token in 32, margins >= 20, bfloat16 shifts <= 0.22). Writes four times
// larger make the tokens follow the context (20-28 distinct) but leave a
// third of the steps within bfloat16 rounding of a tie: random weights give
// one or the other.
TEST(Qwen35RandomTest, GreedyMarginsClearOfBfloat16Rounding) {
  const Qwen35Config config = Tiny();
  const TensorMap f32 = RandomQwen35Weights(config, 1);
  TensorMap bf16;
  for (const auto& [name, t] : f32) bf16[name] = t.to(torch::kBFloat16).to(torch::kFloat32);
  const Qwen35Reference exact(config, f32);
  const Qwen35Reference rounded(config, bf16);
  torch::manual_seed(7);
  const at::Tensor prompt = torch::randint(Qwen35FirstAddedTokenId(config.vocab_size), {64});
  std::vector<int64_t> tokens(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + 64);
  Qwen35ReferenceState state, state_bf16;
  std::vector<std::vector<double>> logits = exact.Forward(tokens, state);
  std::vector<std::vector<double>> logits_bf16 = rounded.Forward(tokens, state_bf16);
  double min_margin = 1e9, max_shift = 0, sum_std = 0;
  int clear = 0;
  std::set<int64_t> generated;
  for (int step = 0; step < 32; ++step) {
    const at::Tensor a = torch::tensor(logits.back(), torch::kFloat64);
    const at::Tensor b = torch::tensor(logits_bf16.back(), torch::kFloat64);
    const auto top = a.topk(2);
    min_margin = std::min(min_margin, (std::get<0>(top)[0] - std::get<0>(top)[1]).item<double>());
    max_shift = std::max(max_shift, (a - b).abs().max().item<double>());
    sum_std += a.std().item<double>();
    const int64_t next = std::get<1>(top)[0].item<int64_t>();
    clear += (std::get<0>(top)[0] - std::get<0>(top)[1]).item<double>() > 2 * (a - b).abs().max().item<double>();
    EXPECT_EQ(b.argmax().item<int64_t>(), next) << "step " << step;
    generated.insert(next);
    logits = exact.Forward({next}, state);
    logits_bf16 = rounded.Forward({next}, state_bf16);
  }
  std::printf("tiny random model, 32 greedy steps: smallest margin %.3f, largest bfloat16 shift "
              "%.3f, mean logit std %.2f, %zu distinct tokens, %d clear\n",
              min_margin, max_shift, sum_std / 32, generated.size(), clear);
  EXPECT_GT(min_margin, 2 * max_shift);
  EXPECT_GT(sum_std / 32, 1.0);
  EXPECT_LT(sum_std / 32, 20.0);
}

// ---------------------------------------------------------------------------
// Model directories

class Qwen35CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("linserve_qwen35_checkpoint_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  void TearDown() override { fs::remove_all(base_); }

  // A tiny random directory under base_/name.
  fs::path Write(const Qwen35Config& config, Qwen35DirectoryOptions options = {},
                 const std::string& name = "model") {
    const fs::path dir = base_ / name;
    const absl::Status written = WriteRandomQwen35Directory(config, dir.string(), options);
    EXPECT_TRUE(written.ok()) << written;
    return dir;
  }

  absl::StatusOr<Qwen35Checkpoint> Read(const fs::path& dir) {
    return ReadQwen35Checkpoint(dir.string(), ReadJson(dir / "config.json"));
  }

  // Rewrites one shard after `edit`, keeping the index in step with its names.
  void EditShard(const fs::path& dir, const std::string& shard,
                 const std::function<void(TensorMap&)>& edit) {
    absl::StatusOr<SafetensorsContents> contents = ReadSafetensorsFile((dir / shard).string());
    ASSERT_TRUE(contents.ok()) << contents.status();
    edit(contents->tensors);
    ASSERT_TRUE(WriteSafetensorsFile((dir / shard).string(), contents->tensors).ok());
    nlohmann::json index = ReadJson(dir / kIndex);
    nlohmann::json map = nlohmann::json::object();
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (file != shard) map[name] = file;
    }
    for (const auto& [name, tensor] : contents->tensors) map[name] = shard;
    index["weight_map"] = map;
    WriteJson(dir / kIndex, index);
  }

  // The shard the index assigns `name` to.
  std::string ShardOf(const fs::path& dir, const std::string& name) {
    return ReadJson(dir / kIndex)["weight_map"].value(name, std::string("(none)"));
  }

  // Edits the tensor `name` where it lies; the shard's name.
  std::string EditTensor(const fs::path& dir, const std::string& name,
                         const std::function<void(at::Tensor&)>& edit) {
    const std::string shard = ShardOf(dir, name);
    EditShard(dir, shard, [&](TensorMap& t) { edit(t.at(name)); });
    return shard;
  }

  void EditConfig(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json config = ReadJson(dir / "config.json");
    edit(config);
    WriteJson(dir / "config.json", config);
  }

  // Expects the directory refused with `code` and every one of `parts` in the message.
  void ExpectRefused(const fs::path& dir, absl::StatusCode code,
                     const std::vector<std::string>& parts) {
    absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
    ASSERT_FALSE(read.ok()) << "loaded";
    EXPECT_EQ(read.status().code(), code) << read.status();
    for (const std::string& part : parts) {
      EXPECT_THAT(read.status().message(), HasSubstr(part));
    }
  }

  fs::path base_;
};

// The loaded weights are the random ones, rounded as the file stores them.
void ExpectWeightsOf(const Qwen35Checkpoint& checkpoint, const Qwen35Config& config) {
  const TensorMap expected = RandomQwen35Weights(config, 1);
  ASSERT_EQ(checkpoint.weights.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(checkpoint.weights.count(name));
    const at::Tensor& got = checkpoint.weights.at(name);
    const bool f32 = name.find("A_log") != std::string::npos ||
                     name.find("linear_attn.norm.weight") != std::string::npos;
    EXPECT_EQ(got.scalar_type(), f32 ? torch::kFloat32 : torch::kBFloat16);
    EXPECT_TRUE(torch::equal(got, tensor.to(got.scalar_type())));
  }
}

TEST_F(Qwen35CheckpointTest, TinyDirectoryLoads) {
  const Qwen35Config config = Tiny();
  const fs::path dir = Write(config);
  for (const char* file : {"config.json", "generation_config.json", kIndex, kShard1, kShard2,
                           "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  }
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->skipped_visual, kQwen35RandomVisualTensors);
  EXPECT_EQ(read->skipped_mtp, kQwen35RandomMtpTensors);
  EXPECT_EQ(read->skipped_tied_head, 0);
  EXPECT_EQ(read->shards, 2);
  EXPECT_EQ(read->prefix, "model.language_model.");
  // config.json's <|endoftext|>, then generation_config.json's <|im_end|>.
  EXPECT_EQ(read->config.eos_token_ids, (std::vector<int64_t>{448, 450}));
  Qwen35Config expected = config;
  expected.eos_token_ids = {448, 450};
  EXPECT_TRUE(read->config == expected);
  ExpectWeightsOf(*read, config);
  // Both shards hold model tensors, as a real split does.
  const nlohmann::json index = ReadJson(dir / kIndex);
  EXPECT_EQ(index["weight_map"]["model.language_model.embed_tokens.weight"], kShard1);
  EXPECT_EQ(index["weight_map"]["model.language_model.norm.weight"], kShard2);
  // The same seed writes the same bytes.
  const fs::path again = Write(config, {}, "again");
  for (const char* file : {kShard1, kShard2, "tokenizer.json"}) {
    std::ifstream a(dir / file, std::ios::binary), b(again / file, std::ios::binary);
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_TRUE(sa.str() == sb.str()) << file;
  }
}

TEST_F(Qwen35CheckpointTest, FlatConfigAndTextOnlyNames) {
  Qwen35DirectoryOptions options;
  options.flat_config = true;
  options.text_only_names = true;
  const fs::path dir = Write(Tiny(), options);
  const nlohmann::json config = ReadJson(dir / "config.json");
  EXPECT_EQ(config["model_type"], "qwen3_5_text");
  EXPECT_FALSE(config.contains("text_config"));
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->prefix, "model.");
  EXPECT_EQ(read->skipped_visual, 0);
  EXPECT_EQ(read->skipped_mtp, kQwen35RandomMtpTensors);
  ExpectWeightsOf(*read, Tiny());
}

TEST_F(Qwen35CheckpointTest, FlatConfigWithLanguageModelNames) {
  Qwen35DirectoryOptions options;
  options.flat_config = true;
  absl::StatusOr<Qwen35Checkpoint> read = Read(Write(Tiny(), options));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->prefix, "model.language_model.");
}

TEST_F(Qwen35CheckpointTest, PureGatedDeltaNetLoads) {
  Qwen35Config config = Tiny();
  config.layer_types.assign(4, Qwen35LayerKind::kLinearAttention);
  const fs::path dir = Write(config);
  EXPECT_EQ(ReadJson(dir / "config.json")["text_config"]["layer_types"][3], "linear_attention");
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.full_attention_layers(), 0);
  ExpectWeightsOf(*read, config);
}

TEST_F(Qwen35CheckpointTest, UntiedHeadIsRequired) {
  Qwen35Config config = Tiny();
  config.tie_word_embeddings = false;
  const fs::path dir = Write(config);
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->weights.count("lm_head.weight"));
  EXPECT_EQ(ReadJson(dir / kIndex)["weight_map"]["lm_head.weight"], kShard2);
  ExpectWeightsOf(*read, config);
  EditShard(dir, kShard2, [](TensorMap& t) { t.erase("lm_head.weight"); });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"missing tensor 'lm_head.weight' (expected shape [512, 64])"});
}

TEST_F(Qwen35CheckpointTest, TiedHeadInTheFileIsIgnored) {
  const fs::path dir = Write(Tiny());
  EditShard(dir, kShard2, [](TensorMap& t) {
    t["lm_head.weight"] = torch::zeros({512, 64}, torch::kBFloat16);
  });
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->skipped_tied_head, 1);
  EXPECT_EQ(read->weights.count("lm_head.weight"), 0u);
}

TEST_F(Qwen35CheckpointTest, OneFileWithoutIndex) {
  const fs::path dir = Write(Tiny());
  TensorMap all;
  for (const char* shard : {kShard1, kShard2}) {
    absl::StatusOr<SafetensorsContents> contents = ReadSafetensorsFile((dir / shard).string());
    ASSERT_TRUE(contents.ok());
    all.insert(contents->tensors.begin(), contents->tensors.end());
    fs::remove(dir / shard);
  }
  fs::remove(dir / kIndex);
  ASSERT_TRUE(WriteSafetensorsFile((dir / "model.safetensors").string(), all).ok());
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->shards, 1);
  ExpectWeightsOf(*read, Tiny());
}

TEST_F(Qwen35CheckpointTest, Float16Loads) {
  const fs::path dir = Write(Tiny());
  EditTensor(dir, "model.language_model.embed_tokens.weight",
             [](at::Tensor& w) { w = w.to(torch::kHalf); });
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->weights.at("embed_tokens.weight").scalar_type(), torch::kHalf);
}

// The Hugging Face cache links a snapshot's files into the repository's
// blobs/ (models--org--name/snapshots/REV/x -> ../../blobs/SHA): that one
// way out of the directory is the cache's own layout, and is accepted.
TEST_F(Qwen35CheckpointTest, HuggingFaceCacheLayoutLoads) {
  const fs::path repo = base_ / "models--Qwen--Qwen3.5-tiny";
  const fs::path snapshot = repo / "snapshots" / "0123abc";
  const fs::path model = Write(Tiny(), {}, "src");
  fs::create_directories(snapshot);
  fs::create_directories(repo / "blobs");
  for (const auto& entry : fs::directory_iterator(model)) {
    const std::string name = entry.path().filename().string();
    fs::rename(entry.path(), repo / "blobs" / ("sha-" + name));
    fs::create_symlink(fs::path("../../blobs") / ("sha-" + name), snapshot / name);
  }
  absl::StatusOr<Qwen35Checkpoint> read = Read(snapshot);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectWeightsOf(*read, Tiny());
}

// ---------------------------------------------------------------------------
// Bad directories, each refused naming the culprit.

TEST_F(Qwen35CheckpointTest, RefusesAShardPathWithDotDot) {
  const fs::path dir = Write(Tiny());
  fs::copy_file(dir / kShard2, base_ / "x.safetensors");
  nlohmann::json index = ReadJson(dir / kIndex);
  index["weight_map"]["model.language_model.norm.weight"] = "../x.safetensors";
  WriteJson(dir / kIndex, index);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {kIndex, "shard '../x.safetensors' leaves the model directory"});
  index["weight_map"]["model.language_model.norm.weight"] = "a/../../x.safetensors";
  WriteJson(dir / kIndex, index);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument, {"'a/../../x.safetensors' leaves"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnAbsoluteShardPath) {
  const fs::path dir = Write(Tiny());
  const std::string absolute = (dir / kShard2).string();  // even one inside the directory
  nlohmann::json index = ReadJson(dir / kIndex);
  for (auto& [name, shard] : index["weight_map"].items()) {
    if (shard == kShard2) shard = absolute;
  }
  WriteJson(dir / kIndex, index);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"shard '" + absolute + "' is an absolute path"});
}

TEST_F(Qwen35CheckpointTest, RefusesASymlinkedShardLeadingOut) {
  const fs::path dir = Write(Tiny());
  fs::rename(dir / kShard2, base_ / "elsewhere.safetensors");
  fs::create_symlink(base_ / "elsewhere.safetensors", dir / kShard2);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {std::string("shard '") + kShard2 + "' resolves to", "elsewhere.safetensors",
                 "outside the model directory"});
  // A relative link out, and a link to a directory holding the shard, alike.
  fs::remove(dir / kShard2);
  fs::create_symlink("../elsewhere.safetensors", dir / kShard2);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument, {"outside the model directory"});
  fs::remove(dir / kShard2);
  fs::create_directories(base_ / "outside");
  fs::rename(base_ / "elsewhere.safetensors", base_ / "outside" / kShard2);
  fs::create_directory_symlink(base_ / "outside", dir / "linked");
  nlohmann::json index = ReadJson(dir / kIndex);
  for (auto& [name, shard] : index["weight_map"].items()) {
    if (shard == kShard2) shard = std::string("linked/") + kShard2;
  }
  WriteJson(dir / kIndex, index);
  ExpectRefused(
      dir, absl::StatusCode::kInvalidArgument,
      {std::string("shard 'linked/") + kShard2 + "' resolves to", "outside the model directory"});
}

TEST_F(Qwen35CheckpointTest, RefusesASymlinkedSingleFileLeadingOut) {
  const fs::path dir = Write(Tiny());
  TensorMap all;
  for (const char* shard : {kShard1, kShard2}) {
    all.merge(ReadSafetensorsFile((dir / shard).string())->tensors);
    fs::remove(dir / shard);
  }
  fs::remove(dir / kIndex);
  ASSERT_TRUE(WriteSafetensorsFile((base_ / "outside.safetensors").string(), all).ok());
  fs::create_symlink(base_ / "outside.safetensors", dir / "model.safetensors");
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"shard 'model.safetensors' resolves to", "outside the model directory"});
}

TEST_F(Qwen35CheckpointTest, RefusesAMissingShard) {
  const fs::path dir = Write(Tiny());
  fs::remove(dir / kShard2);
  ExpectRefused(dir, absl::StatusCode::kNotFound,
                {kIndex, std::string("shard '") + kShard2 + "' does not exist"});
}

TEST_F(Qwen35CheckpointTest, RefusesADirectoryWithoutWeights) {
  const fs::path dir = Write(Tiny());
  fs::remove(dir / kIndex);
  ExpectRefused(dir, absl::StatusCode::kNotFound,
                {"neither model.safetensors nor model.safetensors.index.json"});
}

TEST_F(Qwen35CheckpointTest, RefusesAMissingTensor) {
  const fs::path dir = Write(Tiny());
  const std::string name = "model.language_model.layers.1.linear_attn.A_log";
  EditShard(dir, ShardOf(dir, name), [&](TensorMap& t) { ASSERT_EQ(t.erase(name), 1u); });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"missing tensor 'model.language_model.layers.1.linear_attn.A_log' (expected "
                 "shape [4])"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnExtraTensor) {
  const fs::path dir = Write(Tiny());
  EditShard(dir, kShard2, [](TensorMap& t) {
    t["model.language_model.layers.3.linear_attn.A_log"] = torch::zeros({4});
    t["model.layers.0.mlp.up_proj.weight"] = torch::zeros({128, 64});  // another prefix
  });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"unexpected tensor 'model.language_model.layers.3.linear_attn.A_log' [4] in " +
                     std::string(kShard2),
                 "unexpected tensor 'model.layers.0.mlp.up_proj.weight' [128, 64]"});
}

TEST_F(Qwen35CheckpointTest, RefusesAWrongShape) {
  const fs::path dir = Write(Tiny());
  const std::string shard =
      EditTensor(dir, "model.language_model.layers.0.linear_attn.conv1d.weight", [](at::Tensor& w) {
        w = torch::zeros({128, 4});
      });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"tensor 'model.language_model.layers.0.linear_attn.conv1d.weight' in " + shard +
                 " has shape [128, 4], expected [128, 1, 4]"});
}

TEST_F(Qwen35CheckpointTest, RefusesTiledShapesOfUngroupedHeads) {
  // A file written for Hv = Hk (e.g. value heads tiled away) against the config's Hv.
  const fs::path dir = Write(Tiny());
  EditTensor(dir, "model.language_model.layers.0.linear_attn.in_proj_b.weight", [](at::Tensor& w) {
    w = torch::zeros({2, 64}, torch::kBFloat16);
  });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"'model.language_model.layers.0.linear_attn.in_proj_b.weight'",
                 "has shape [2, 64], expected [4, 64]"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnUnknownLayerType) {
  const fs::path dir = Write(Tiny());
  EditConfig(dir, [](nlohmann::json& j) { j["text_config"]["layer_types"][1] = "mamba"; });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"config.json: text_config.layer_types[1] (\"mamba\") is not a known layer type"});
}

TEST_F(Qwen35CheckpointTest, RefusesALayerTypeTheTensorsContradict) {
  // config.json says layer 0 is full attention; the file holds a GDN layer.
  const fs::path dir = Write(Tiny());
  EditConfig(dir, [](nlohmann::json& j) { j["text_config"]["layer_types"][0] = "full_attention"; });
  ExpectRefused(
      dir, absl::StatusCode::kInvalidArgument,
      {"missing tensor 'model.language_model.layers.0.self_attn.k_norm.weight'", "; and 10 more"});
}

TEST_F(Qwen35CheckpointTest, RefusesANaN) {
  const fs::path dir = Write(Tiny());
  const std::string shard =
      EditTensor(dir, "model.language_model.layers.3.self_attn.o_proj.weight",
                 [](at::Tensor& w) { w[1][2] = std::numeric_limits<float>::quiet_NaN(); });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"tensor 'model.language_model.layers.3.self_attn.o_proj.weight' in " + shard +
                 " holds a NaN or infinite value (element 130)"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnInfinity) {
  const fs::path dir = Write(Tiny());
  EditTensor(dir, "model.language_model.layers.2.linear_attn.A_log",
             [](at::Tensor& w) { w[0] = -std::numeric_limits<float>::infinity(); });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"'model.language_model.layers.2.linear_attn.A_log'", "NaN or infinite"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnUnsupportedDtype) {
  const fs::path dir = Write(Tiny());
  const std::string shard = EditTensor(dir, "model.language_model.layers.0.linear_attn.dt_bias",
                                       [](at::Tensor& w) { w = w.to(torch::kFloat64); });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"tensor 'model.language_model.layers.0.linear_attn.dt_bias' in " + shard +
                 " has dtype Double, expected BF16, F16 or F32"});
}

TEST_F(Qwen35CheckpointTest, RefusesABadConfigField) {
  const fs::path dir = Write(Tiny());
  EditConfig(dir, [](nlohmann::json& j) { j["text_config"]["num_hidden_layers"] = -4; });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"config.json: text_config.num_hidden_layers (-4)"});
}

TEST_F(Qwen35CheckpointTest, RefusesHeadsThatDoNotDivide) {
  const fs::path dir = Write(Tiny());
  EditConfig(dir, [](nlohmann::json& j) { j["text_config"]["linear_num_value_heads"] = 3; });
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"config.json: text_config.linear_num_value_heads (3) is not a multiple of "
                 "linear_num_key_heads (2)"});
}

TEST_F(Qwen35CheckpointTest, RefusesAnIndexThatDisagreesWithItsShards) {
  const fs::path dir = Write(Tiny());
  nlohmann::json index = ReadJson(dir / kIndex);
  index["weight_map"]["model.language_model.norm.weight"] = kShard1;  // it lies in shard 2
  WriteJson(dir / kIndex, index);
  absl::StatusOr<Qwen35Checkpoint> read = Read(dir);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("'model.language_model.norm.weight'"));
  index["weight_map"] = nlohmann::json::array();
  WriteJson(dir / kIndex, index);
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument, {kIndex, "weight_map"});
  std::ofstream(dir / kIndex, std::ios::trunc) << "{\"weight_map\": ";
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument, {kIndex, "truncated JSON"});
}

TEST_F(Qwen35CheckpointTest, RefusesACorruptShard) {
  const fs::path dir = Write(Tiny());
  fs::resize_file(dir / kShard2, fs::file_size(dir / kShard2) - 100);
  ExpectRefused(dir, absl::StatusCode::kDataLoss, {kShard2});
}

TEST_F(Qwen35CheckpointTest, RefusesABadGenerationConfig) {
  const fs::path dir = Write(Tiny());
  WriteJson(dir / "generation_config.json", {{"eos_token_id", {450, 9999}}});
  ExpectRefused(dir, absl::StatusCode::kInvalidArgument,
                {"generation_config.json: eos_token_id ([450,9999]) is not a token id"});
}

// ---------------------------------------------------------------------------
// The tokenizer the writer ships.

TEST_F(Qwen35CheckpointTest, TinyTokenizerLoads) {
  const fs::path dir = Write(Tiny());
  absl::StatusOr<Tokenizer> tokenizer =
      LoadHfTokenizerDirectory(dir.string(), Tiny().vocab_size, HfTokenizerOptions());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string text = "<|im_start|>user\nHello, the world!<|im_end|>\n<think>\n\n</think>";
  absl::StatusOr<std::vector<int64_t>> ids = tokenizer->TryEncode(text, true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_GE(ids->size(), 6u);
  EXPECT_EQ(ids->front(), 449);  // <|im_start|>, no BOS before it
  EXPECT_EQ(ids->back(), 473);   // </think>
  EXPECT_NE(std::find(ids->begin(), ids->end(), 450), ids->end());  // <|im_end|>
  EXPECT_LT(ids->size(), text.size() / 2);                          // the merges do work
  EXPECT_EQ(tokenizer->Decode(*ids, /*skip_special=*/false), text);
  // Both ends of a turn stop generation.
  EXPECT_EQ(tokenizer->eos_ids(), (std::vector<int64_t>{448, 450}));
}

TEST(Qwen35TokenizerTest, RealShapeHasTheRealIds) {
  const Qwen35Config config = *Qwen35ShapeByName("0.8b");
  absl::StatusOr<std::shared_ptr<const HfTokenizer>> hf =
      HfTokenizer::FromJson(Qwen35TokenizerJson(config), "tokenizer.json", HfTokenizerOptions());
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::vector<Qwen35AddedToken>& added = Qwen35AddedTokens();
  for (size_t i = 0; i < added.size(); ++i) {
    EXPECT_EQ((*hf)->IdOf(added[i].content), 248044 + static_cast<int64_t>(i)) << added[i].content;
    EXPECT_EQ((*hf)->IsSpecial(248044 + static_cast<int64_t>(i)), added[i].special);
  }
  EXPECT_EQ((*hf)->IdOf("<|im_end|>"), 248046);
  EXPECT_EQ((*hf)->IdOf("<think>"), 248068);
  EXPECT_EQ((*hf)->IdOf("</think>"), 248069);
  EXPECT_EQ((*hf)->id_end(), 248070);
  absl::StatusOr<Tokenizer> tokenizer =
      Tokenizer::HuggingFace(*hf, Tokenizer::HfSpecials{{248046, 248044}, {}, {}}, 248320);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // The 250 padding rows are never sampled; the regular and added ids are.
  EXPECT_EQ(tokenizer->never_sampled().size(), 250u);
  EXPECT_EQ(tokenizer->never_sampled().front(), 248070);
}

// Ids beyond the regular vocabulary: the library numbers added tokens after
// the vocabulary's entries, whatever ids tokenizer.json gives them
// (AddedVocabulary::add_tokens), and engine/text does the same; an id left
// free inside the vocabulary's own numbering (a sparse vocab) is a gap no
// token fills and nothing samples.
TEST(Qwen35TokenizerTest, SparseIds) {
  nlohmann::json json = nlohmann::json::parse(Qwen35TokenizerJson(Tiny()));
  // The added tokens claim ids past a gap: they are renumbered from 448.
  for (auto& token : json["added_tokens"]) token["id"] = token["id"].get<int64_t>() + 1000;
  absl::StatusOr<std::shared_ptr<const HfTokenizer>> hf =
      HfTokenizer::FromJson(json.dump(), "tokenizer.json", HfTokenizerOptions());
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->IdOf("<|endoftext|>"), 448);
  // Added tokens that are vocabulary entries keep the vocabulary's ids, gaps and all.
  for (auto& token : json["added_tokens"]) {
    const int64_t id = token["id"].get<int64_t>() - 1000 + 40;  // 488..513
    token["id"] = id;
    json["model"]["vocab"][token["content"].get<std::string>()] = id;
  }
  hf = HfTokenizer::FromJson(json.dump(), "tokenizer.json", HfTokenizerOptions());
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->IdOf("<|endoftext|>"), 488);
  EXPECT_EQ((*hf)->id_end(), 514);
  EXPECT_TRUE((*hf)->TokenBytes(460, false).empty());  // a gap
  EXPECT_EQ((*hf)->Decode({488}, false), "<|endoftext|>");
  // Past the model's 512 rows: refused by name.
  EXPECT_THAT(Tokenizer::HuggingFace(*hf, {}, 512).status().message(),
              HasSubstr("the tokenizer has token id 513, past the model's 512 embedding rows"));
}

}  // namespace
}  // namespace linserve
