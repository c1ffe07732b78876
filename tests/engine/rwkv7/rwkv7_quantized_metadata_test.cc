// The metadata of RWKV-7 files quantized beforehand, without a model:
// written and read back, each field refused by name when out of place, and
// which loads may serve a file.

#include <string>
#include <vector>

#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7_quantized_metadata.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

QuantizedRwkv7Info Info() {
  QuantizedRwkv7Info info;
  info.quantization = WeightQuantization::kInt4;
  info.group = 64;
  info.compute_dtype = c10::ScalarType::BFloat16;
  info.config = Rwkv7Config01B();
  info.fingerprint = std::string(64, 'a');
  info.tokenizer = "rwkv_world";
  info.data_sha256 = std::string(63, '0') + "f";
  return info;
}

TEST(QuantizedRwkv7MetadataTest, ReadsBackWhatItWrites) {
  const SafetensorsMetadata metadata = QuantizedRwkv7Metadata(Info());
  EXPECT_EQ(metadata.at("format"), "linserve-quantized-rwkv7");
  EXPECT_EQ(metadata.at("format_version"), "1");
  EXPECT_EQ(metadata.at("quantization"), "int4");
  EXPECT_EQ(metadata.at("group_size"), "64");
  EXPECT_EQ(metadata.at("compute_dtype"), "bfloat16");
  absl::StatusOr<QuantizedRwkv7Info> read = ReadQuantizedRwkv7Metadata(metadata);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->quantization, WeightQuantization::kInt4);
  EXPECT_EQ(read->group, 64);
  EXPECT_EQ(read->compute_dtype, c10::ScalarType::BFloat16);
  EXPECT_TRUE(read->config == Rwkv7Config01B());
  EXPECT_EQ(read->fingerprint, Info().fingerprint);
  EXPECT_EQ(read->tokenizer, "rwkv_world");
  EXPECT_EQ(read->data_sha256, Info().data_sha256);
  EXPECT_EQ(DescribeQuantizedRwkv7(*read), "int4 weights in groups of 64 with bfloat16 low-rank matrices");
}

TEST(QuantizedRwkv7MetadataTest, EveryFieldOutOfPlaceIsNamed) {
  auto config_with = [](const char* key, const nlohmann::json& value) {
    nlohmann::json config = Rwkv7ConfigToJson(Rwkv7Config01B());
    if (value.is_null()) {
      config.erase(key);
    } else {
      config[key] = value;
    }
    return config.dump();
  };
  struct Case {
    std::string key;
    std::string value;  // "<erase>" removes the key
    std::string says;
  };
  const std::vector<Case> cases = {
      {"format", "<erase>", "no 'format'"},
      {"format", "pt", "'format' is 'pt'"},
      {"format_version", "0", "format_version '0'"},
      {"quantization", "int2", "'quantization' is 'int2', expected int8 or int4"},
      {"group_size", "128", "'group_size' is '128', expected 32 or 64"},
      {"group_size", "<erase>", "no 'group_size'"},
      {"compute_dtype", "int8", "'compute_dtype' is 'int8'"},
      {"config", "[]", "'config' is not a JSON object"},
      {"config", config_with("vocab_size", nullptr), "'vocab_size' is missing"},
      {"config", config_with("d_model", "768"), "'d_model' is missing or not an integer"},
      {"config", config_with("d_model", 0), "'d_model' is 0, outside [1, 16777216]"},
      {"config", config_with("ffn_size", -3), "'ffn_size' is -3"},
      {"config", config_with("vocab_size", 1e3), "'vocab_size' is missing or not an integer"},
      {"config", config_with("n_layers", uint64_t{1} << 63), "'n_layers' is 9223372036854775808"},
      {"config", config_with("pre_norm", 1), "'pre_norm' is missing or not true or false"},
      {"config", config_with("rope", true), "unknown key 'rope'"},
      {"config", config_with("head_size", 32), "d_model 768 is not n_heads 12 x head_size 32"},
      {"config", config_with("v_lora", 0), "v_lora is 0"},
      {"source_fingerprint", std::string(64, 'A'), "'source_fingerprint'"},
      {"tokenizer", "sentencepiece", "'tokenizer' is 'sentencepiece'"},
      {"data_sha256", std::string(65, 'a'), "'data_sha256'"},
      {"extra", "1", "metadata key 'extra'"},
      {"format", std::string(1000, 'x'), "xxx...'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + " = " + c.value.substr(0, 80));
    SafetensorsMetadata metadata = QuantizedRwkv7Metadata(Info());
    if (c.value == "<erase>") {
      metadata.erase(c.key);
    } else {
      metadata[c.key] = c.value;
    }
    absl::StatusOr<QuantizedRwkv7Info> read = ReadQuantizedRwkv7Metadata(metadata);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(read.status().message().find(c.says), std::string::npos) << read.status();
    EXPECT_LT(read.status().message().size(), 300u) << read.status();
  }
}

TEST(QuantizedRwkv7MetadataTest, ALoadMayAskForTheFilesFormatOrNone) {
  struct Case {
    std::string name;
    LoadOptions options;
    std::string says;  // empty: served
  };
  auto options = [](WeightQuantization kind, int64_t group, std::optional<c10::ScalarType> dtype,
                    const char* device = "cpu") {
    LoadOptions o;
    o.quantization = kind;
    o.quantization_group = group;
    o.dtype = dtype;
    o.device = torch::Device(device);
    return o;
  };
  const auto none = WeightQuantization::kNone, int8 = WeightQuantization::kInt8,
             int4 = WeightQuantization::kInt4;
  const std::vector<Case> cases = {
      {"nothing asked", options(none, 0, std::nullopt), ""},
      {"its format", options(int4, 0, std::nullopt), ""},
      {"its format and group", options(int4, 64, std::nullopt), ""},
      {"its format, group and dtype", options(int4, 64, c10::ScalarType::BFloat16), ""},
      {"another format", options(int8, 0, std::nullopt), "int8 was asked for"},
      {"another group", options(int4, 32, std::nullopt), "groups of 32 were asked for"},
      {"a float dtype", options(none, 0, c10::ScalarType::Float), "float32 weights were asked for"},
      {"its own dtype without a format", options(none, 0, c10::ScalarType::BFloat16),
       "bfloat16 weights were asked for"},
      {"another low-rank dtype", options(int4, 0, c10::ScalarType::Float),
       "float32 low-rank matrices were asked for"},
      {"a GPU", options(none, 0, std::nullopt, "cuda"), "for the CPU, not cuda"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Status status = CheckQuantizedRwkv7Asked(c.options, Info());
    if (c.says.empty()) {
      EXPECT_TRUE(status.ok()) << status;
      continue;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("the file holds int4 weights in groups of 64"),
              std::string::npos)
        << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace linserve
