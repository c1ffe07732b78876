// Qwen3.5 models quantized beforehand (engine/qwen35/qwen35_quantized_file.h):
// quantized at load and quantized, written and read back are the same model
// to the bit (codes, scales, logits, fingerprint), tied and untied, through
// the bytes and a model directory; a tied head is stored once; and every
// hostile file is refused by name.

#include "engine/qwen35/qwen35_quantized_file.h"

#include <torch/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_random.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

const std::vector<int64_t> kPrompt = {17, 4, 99, 200, 3, 61, 8, 150, 42, 300, 7};

Qwen35Config Tiny(bool tied) {
  Qwen35Config config = Qwen35ShapeByName("tiny").value();
  config.tie_word_embeddings = tied;
  return config;
}

LoadOptions Quantized(WeightQuantization kind, int64_t group) {
  LoadOptions options;
  options.quantization = kind;
  options.quantization_group = group;
  return options;
}

std::unique_ptr<Qwen35Model> AtLoad(const Qwen35Config& config, const LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<Qwen35Model>> model = Qwen35Model::FromTensors(
      config, RandomQwen35Weights(config, 5), Tokenizer::Bytes(config.vocab_size), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

absl::StatusOr<std::unique_ptr<Qwen35Model>> Parse(const std::string& bytes,
                                                   const Qwen35Config& config,
                                                   const LoadOptions& options = {}) {
  return ParseQuantizedQwen35(bytes, config, Tokenizer::Bytes(config.vocab_size), options, "file");
}

// Logits after a prefill of the prompt, then after two steps.
std::vector<torch::Tensor> Logits(LanguageModel& model) {
  State state = model.NewState();
  std::vector<torch::Tensor> out;
  out.push_back(torch::tensor(model.Prefill(state, kPrompt).value()));
  for (int64_t token : {7, 201}) out.push_back(model.Step(state, {token}).value().clone());
  return out;
}

void ExpectSameModel(const Qwen35Model& a, LanguageModel& b_model) {
  const auto& b = dynamic_cast<const Qwen35Model&>(b_model);
  const auto qa = a.module()->QuantizedMatrices();
  const auto qb = b.module()->QuantizedMatrices();
  ASSERT_EQ(qa.size(), qb.size());
  // The embedding, the head, 8 matrices per GDN layer (qkv, z, b, a, out and
  // the MLP's 3), 7 per attention layer (q, k, v, o and the MLP's).
  const int64_t full = a.config().full_attention_layers();
  ASSERT_EQ(qa.size(), 2 + 8 * (a.config().num_hidden_layers - full) + 7 * full);
  for (const auto& [name, weight] : qa) {
    auto it = qb.find(name);
    ASSERT_NE(it, qb.end()) << name;
    EXPECT_TRUE(torch::equal(weight.codes, it->second.codes)) << name;
    EXPECT_TRUE(torch::equal(weight.scales, it->second.scales)) << name;
  }
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
  EXPECT_EQ(a.ConfigJson(), b.ConfigJson());
  const std::vector<torch::Tensor> la = Logits(const_cast<Qwen35Model&>(a)), lb = Logits(b_model);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_TRUE(torch::equal(la[i], lb[i])) << "logits " << i;
}

TEST(Qwen35QuantizedFileTest, ReadsBackAsTheModelQuantizedAtLoad) {
  for (const bool tied : {true, false}) {
    for (const auto& [kind, group] : {std::pair{WeightQuantization::kInt8, int64_t{64}},
                                      std::pair{WeightQuantization::kInt4, int64_t{32}},
                                      std::pair{WeightQuantization::kInt8, int64_t{32}}}) {
      SCOPED_TRACE(testing::Message() << (tied ? "tied " : "untied ")
                                      << WeightQuantizationName(kind) << " group " << group);
      const Qwen35Config config = Tiny(tied);
      std::unique_ptr<Qwen35Model> at_load = AtLoad(config, Quantized(kind, group));
      ASSERT_NE(at_load, nullptr);
      absl::StatusOr<std::string> bytes = SerializeQuantizedQwen35(*at_load);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      absl::StatusOr<std::unique_ptr<Qwen35Model>> read = Parse(*bytes, config);
      ASSERT_TRUE(read.ok()) << read.status();
      ExpectSameModel(*at_load, **read);
      // A tied head is the embedding's codes, in the file once and in memory once.
      absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(*bytes);
      ASSERT_TRUE(contents.ok());
      EXPECT_EQ(contents->tensors.count("lm_head.weight.codes"), tied ? 0u : 1u);
      const auto held = (*read)->module()->QuantizedMatrices();
      EXPECT_EQ(held.at("lm_head.weight").codes.data_ptr() ==
                    held.at("embed_tokens.weight").codes.data_ptr(),
                tied);
    }
  }
}

TEST(Qwen35QuantizedFileTest, AQuantizedTiedHeadSharesTheEmbeddingsCodesAtLoadToo) {
  std::unique_ptr<Qwen35Model> model = AtLoad(Tiny(true), Quantized(WeightQuantization::kInt8, 64));
  ASSERT_NE(model, nullptr);
  const auto held = model->module()->QuantizedMatrices();
  EXPECT_EQ(held.at("lm_head.weight").codes.data_ptr(),
            held.at("embed_tokens.weight").codes.data_ptr());
}

TEST(Qwen35QuantizedFileTest, AFloatModelHasNoFileToWrite) {
  LoadOptions options;
  options.dtype = torch::kFloat32;
  std::unique_ptr<Qwen35Model> model = AtLoad(Tiny(true), options);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::string> bytes = SerializeQuantizedQwen35(*model);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition) << bytes.status();
}

// A model directory: the random checkpoint, its float model and the one the
// quantized file serves through LanguageModel::Load, as a server loads it.
class Qwen35QuantizedDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_qwen35_quantized_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ASSERT_TRUE(WriteRandomQwen35Directory(Tiny(true), dir_.string(), {}).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The directory's model quantized at load, its file beside the tokenizer
  // in place of the shards (what linserve-quantize writes).
  std::unique_ptr<LanguageModel> QuantizeInPlace(const LoadOptions& options) {
    absl::StatusOr<std::unique_ptr<LanguageModel>> model =
        LanguageModel::Load(dir_.string(), options);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    const auto& qwen35 = dynamic_cast<const Qwen35Model&>(**model);
    EXPECT_TRUE(WriteQuantizedQwen35File(qwen35, (dir_ / "quantized.safetensors").string()).ok());
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("model", 0) == 0) fs::remove(entry.path());
    }
    fs::rename(dir_ / "quantized.safetensors", dir_ / "model.safetensors");
    return std::move(*model);
  }

  fs::path dir_;
};

TEST_F(Qwen35QuantizedDirectoryTest, ServesTheFileAsItIs) {
  std::unique_ptr<LanguageModel> at_load = QuantizeInPlace(Quantized(WeightQuantization::kInt4, 0));
  ASSERT_NE(at_load, nullptr);
  EXPECT_TRUE(IsQuantizedQwen35Directory(dir_.string()));
  absl::StatusOr<std::unique_ptr<LanguageModel>> served = LanguageModel::Load(dir_.string(), {});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->WeightFormatName(), "int4");
  EXPECT_EQ((*served)->ConfigJson()["quantization_group"],
            DefaultQuantizationGroup(WeightQuantization::kInt4));
  // generation_config.json's end ids are the directory's, as for the float model.
  EXPECT_EQ(dynamic_cast<Qwen35Model&>(**served).config().eos_token_ids,
            dynamic_cast<Qwen35Model&>(*at_load).config().eos_token_ids);
  ExpectSameModel(dynamic_cast<Qwen35Model&>(*at_load), **served);

  // The same format asked for by name serves; another is refused naming both.
  LoadOptions int4 = Quantized(WeightQuantization::kInt4, 32);
  EXPECT_TRUE(LanguageModel::Load(dir_.string(), int4).ok());
  const std::vector<std::pair<LoadOptions, std::vector<std::string>>> refused = {
      {Quantized(WeightQuantization::kInt8, 0), {"int4", "int8"}},
      {Quantized(WeightQuantization::kInt4, 64), {"groups of 64"}},
      {[] {
         LoadOptions o;
         o.dtype = torch::kBFloat16;
         return o;
       }(),
       {"int4", "bfloat16", "without a dtype"}},
  };
  for (const auto& [options, words] : refused) {
    absl::StatusOr<std::unique_ptr<LanguageModel>> model =
        LanguageModel::Load(dir_.string(), options);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& word : words) {
      EXPECT_NE(model.status().message().find(word), std::string::npos) << model.status();
    }
  }
}

TEST_F(Qwen35QuantizedDirectoryTest, AConfigOfAnotherShapeIsRefusedByName) {
  ASSERT_NE(QuantizeInPlace(Quantized(WeightQuantization::kInt8, 0)), nullptr);
  std::ifstream in(dir_ / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  // The end ids and the context length are the directory's to change.
  config["text_config"]["max_position_embeddings"] = 2048;
  std::ofstream(dir_ / "config.json") << config.dump();
  std::ofstream(dir_ / "generation_config.json") << R"({"eos_token_id": [3, 5]})";
  absl::StatusOr<std::unique_ptr<LanguageModel>> served = LanguageModel::Load(dir_.string(), {});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(dynamic_cast<Qwen35Model&>(**served).config().max_position_embeddings, 2048);
  // The shape is not.
  config["text_config"]["intermediate_size"] = 192;
  std::ofstream(dir_ / "config.json") << config.dump();
  absl::StatusOr<std::unique_ptr<LanguageModel>> model = LanguageModel::Load(dir_.string(), {});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("'intermediate_size'"), std::string::npos)
      << model.status();
  EXPECT_NE(model.status().message().find("another model"), std::string::npos) << model.status();
}

// Each hostile file, made from a good one, and the words its refusal names.
struct Hostile {
  const char* what;
  std::function<void(SafetensorsContents&)> edit;
  bool reseal;  // the hash made to match again, so that the check behind it is reached
  absl::StatusCode code;
  std::vector<std::string> words;
};

TEST(Qwen35QuantizedFileTest, EveryHostileFileIsRefusedByName) {
  const Qwen35Config config = Tiny(false);
  std::unique_ptr<Qwen35Model> model = AtLoad(config, Quantized(WeightQuantization::kInt8, 64));
  ASSERT_NE(model, nullptr);
  const std::string good = SerializeQuantizedQwen35(*model).value();
  const std::string codes = "layers.0.mlp.up_proj.weight.codes";
  const std::string scales = "layers.0.mlp.up_proj.weight.scales";
  const std::vector<Hostile> cases = {
      {"a flipped code",
       [&](SafetensorsContents& c) {
         c.tensors[codes] = c.tensors[codes].clone();
         c.tensors[codes].data_ptr<uint8_t>()[5] ^= 1;
       },
       false,
       absl::StatusCode::kDataLoss,
       {"data_sha256 mismatch"}},
      {"a swapped pair",
       [&](SafetensorsContents& c) {
         std::swap(c.tensors["layers.0.linear_attn.A_log"],
                   c.tensors["layers.0.linear_attn.dt_bias"]);
       },
       false,
       absl::StatusCode::kDataLoss,
       {"data_sha256"}},
      {"another format",
       [](SafetensorsContents& c) { c.metadata["format"] = "linserve-quantized-rwkv7"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"format", "linserve-quantized-qwen3_5"}},
      {"a later version",
       [](SafetensorsContents& c) { c.metadata["format_version"] = "2"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"format_version", "'2'"}},
      {"an unknown key",
       [](SafetensorsContents& c) { c.metadata["compute_dtype"] = "bfloat16"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"'compute_dtype'"}},
      {"a bad quantization",
       [](SafetensorsContents& c) { c.metadata["quantization"] = "int3"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"quantization", "'int3'"}},
      {"a bad group",
       [](SafetensorsContents& c) { c.metadata["group_size"] = "48"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"group_size", "'48'"}},
      {"a short fingerprint",
       [](SafetensorsContents& c) { c.metadata["source_fingerprint"] = "ab"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"source_fingerprint"}},
      {"a config of another shape",
       [](SafetensorsContents& c) {
         nlohmann::json j = nlohmann::json::parse(c.metadata["config"]);
         j["num_hidden_layers"] = 8;
         c.metadata["config"] = j.dump();
       },
       false,
       absl::StatusCode::kInvalidArgument,
       {"'num_hidden_layers'", "another model"}},
      {"a config that is not JSON",
       [](SafetensorsContents& c) { c.metadata["config"] = "{"; },
       false,
       absl::StatusCode::kInvalidArgument,
       {"'config'"}},
      {"missing scales",
       [&](SafetensorsContents& c) { c.tensors.erase(scales); },
       true,
       absl::StatusCode::kInvalidArgument,
       {"missing tensor", scales}},
      {"codes cut short",
       [&](SafetensorsContents& c) {
         c.tensors[codes] = c.tensors[codes].slice(0, 0, 100).clone();
       },
       true,
       absl::StatusCode::kInvalidArgument,
       {codes, "U8[100]", "expected U8["}},
      {"a NaN scale",
       [&](SafetensorsContents& c) {
         c.tensors[scales] = c.tensors[scales].clone();
         c.tensors[scales].view(torch::kInt16).data_ptr<int16_t>()[0] = 0x7e00;
       },
       true,
       absl::StatusCode::kInvalidArgument,
       {"layers.0.mlp.up_proj.weight"}},
      {"a matrix kept in float",
       [&](SafetensorsContents& c) {
         c.tensors.erase(codes);
         c.tensors.erase(scales);
         c.tensors["layers.0.mlp.up_proj.weight"] =
             torch::zeros({config.intermediate_size, config.hidden_size});
       },
       true,
       absl::StatusCode::kInvalidArgument,
       {"'layers.0.mlp.up_proj.weight' is not quantized"}},
      {"a vector quantized",
       [&](SafetensorsContents& c) {
         c.tensors["layers.0.linear_attn.norm.weight.codes"] = c.tensors[codes];
       },
       true,
       absl::StatusCode::kInvalidArgument,
       {"layers.0.linear_attn.norm.weight"}},
      {"a vector of another dtype",
       [&](SafetensorsContents& c) {
         c.tensors["norm.weight"] = c.tensors["norm.weight"].to(torch::kBFloat16);
       },
       true,
       absl::StatusCode::kInvalidArgument,
       {"'norm.weight'", "BF16"}},
      {"an unexpected tensor",
       [](SafetensorsContents& c) { c.tensors["mtp.fc.weight"] = torch::zeros({2}); },
       true,
       absl::StatusCode::kInvalidArgument,
       {"unexpected tensor 'mtp.fc.weight'"}},
  };
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.what);
    SafetensorsContents contents = ParseSafetensors(good).value();
    h.edit(contents);
    if (h.reseal) contents.metadata["data_sha256"] = QuantizedFileDataSha256(contents.tensors);
    const std::string bytes = SerializeSafetensors(contents.tensors, contents.metadata);
    absl::StatusOr<std::unique_ptr<Qwen35Model>> read = Parse(bytes, config);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), h.code) << read.status();
    for (const std::string& word : h.words) {
      EXPECT_NE(read.status().message().find(word), std::string::npos) << read.status();
    }
  }
  // Not a safetensors file at all.
  absl::StatusOr<std::unique_ptr<Qwen35Model>> read = Parse(good.substr(0, 40), config);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
}

}  // namespace
}  // namespace linserve
