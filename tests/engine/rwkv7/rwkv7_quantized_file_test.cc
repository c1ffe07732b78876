// Files of RWKV-7 quantized beforehand (engine/rwkv7/rwkv7_quantized_file.h):
// quantized at load and quantized, written and read back are the same model
// to the bit (codes, scales, logits, fingerprint), through the bytes, a bare
// file and a model directory; and every hostile file is refused by name.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/rwkv7/rwkv7_quantized_file.h"
#include "gtest/gtest.h"
#include "tests/engine/rwkv7/small_rwkv7_shape.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

const std::vector<int64_t> kPrompt = {17, 4, 99, 200, 3, 61, 8, 150, 42};

// Pads every quantized matrix somewhere: V = 250 leaves a last panel short,
// F = 160 a last group of 64 short.
Rwkv7Config TinyShape() { return SmallRwkv7Shape(128, 160, 250); }

LoadOptions Quantized(WeightQuantization kind, int64_t group, torch::ScalarType dtype) {
  LoadOptions options;
  options.dtype = dtype;
  options.quantization = kind;
  options.quantization_group = group;
  return options;
}

std::unique_ptr<Rwkv7Model> Create(const LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<Rwkv7Model>> model = Rwkv7Model::Create(TinyShape(), 5, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// Logits after a chunked prefill of the prompt, then after two steps.
std::vector<torch::Tensor> Logits(LanguageModel& model) {
  State state = model.NewState();
  std::vector<torch::Tensor> out;
  out.push_back(torch::tensor(model.Prefill(state, kPrompt).value()));
  for (int64_t token : {7, 201}) out.push_back(model.Step(state, {token}).value().clone());
  return out;
}

void ExpectSameModel(Rwkv7Model& a, Rwkv7Model& b) {
  const auto qa = a.module()->QuantizedMatrices();
  const auto qb = b.module()->QuantizedMatrices();
  ASSERT_EQ(qa.size(), qb.size());
  ASSERT_EQ(qa.size(), 2 + 6 * TinyShape().n_layers);
  for (const auto& [name, weight] : qa) {
    auto it = qb.find(name);
    ASSERT_NE(it, qb.end()) << name;
    EXPECT_TRUE(torch::equal(weight.codes, it->second.codes)) << name;
    EXPECT_TRUE(torch::equal(weight.scales, it->second.scales)) << name;
  }
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
  EXPECT_EQ(a.ConfigJson(), b.ConfigJson());
  const std::vector<torch::Tensor> la = Logits(a), lb = Logits(b);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_TRUE(torch::equal(la[i], lb[i])) << "logits " << i;
}

struct Format {
  WeightQuantization kind;
  int64_t group;
  torch::ScalarType dtype;  // of the low-rank matrices: bfloat16 is packed on AVX-512 BF16
};

std::string FormatName(const Format& f) {
  return std::string(WeightQuantizationName(f.kind)) + "_" + std::to_string(f.group) + "_" +
         ComputeDtypeName(f.dtype);
}
void PrintTo(const Format& f, std::ostream* os) { *os << FormatName(f); }

class QuantizedFileRoundTrip : public ::testing::TestWithParam<Format> {};

TEST_P(QuantizedFileRoundTrip, WrittenAndReadIsTheModelQuantizedAtLoad) {
  const Format f = GetParam();
  std::unique_ptr<Rwkv7Model> at_load = Create(Quantized(f.kind, f.group, f.dtype));
  LoadOptions float_options;
  float_options.dtype = torch::kFloat32;
  std::unique_ptr<Rwkv7Model> float_model = Create(float_options);
  ASSERT_TRUE(at_load && float_model);

  absl::StatusOr<std::string> bytes = SerializeQuantizedRwkv7(*at_load);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<Rwkv7Model>> read =
      ParseQuantizedRwkv7(*bytes, nlohmann::json::object(), LoadOptions(), "test");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameModel(*at_load, **read);
  EXPECT_EQ((*read)->Fingerprint(), float_model->Fingerprint());
  EXPECT_EQ((*read)->weight_quantization(), f.kind);
  EXPECT_EQ((*read)->compute_dtype(), f.dtype);
  EXPECT_EQ((*read)->tokenizer().name(), at_load->tokenizer().name());
  // Read and written again: the same bytes.
  absl::StatusOr<std::string> again = SerializeQuantizedRwkv7(**read);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *bytes);
  // Asking for the file's own format is the same as asking for none.
  EXPECT_TRUE(ParseQuantizedRwkv7(*bytes, nlohmann::json::object(),
                                  Quantized(f.kind, f.group, f.dtype), "test")
                  .ok());
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantizedFileRoundTrip,
    ::testing::Values(Format{WeightQuantization::kInt8, 32, torch::kBFloat16},
                      Format{WeightQuantization::kInt8, 64, torch::kFloat32},
                      Format{WeightQuantization::kInt4, 32, torch::kFloat32},
                      Format{WeightQuantization::kInt4, 64, torch::kBFloat16}),
    [](const ::testing::TestParamInfo<Format>& info) { return FormatName(info.param); });

class QuantizedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_quantized_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(QuantizedFileTest, LoadsFromAFileAndADirectoryWithoutQuantizingAgain) {
  std::unique_ptr<Rwkv7Model> at_load =
      Create(Quantized(WeightQuantization::kInt4, 32, torch::kBFloat16));
  ASSERT_TRUE(at_load);
  const fs::path file = dir_ / "tiny-int4.safetensors";
  ASSERT_TRUE(WriteQuantizedRwkv7File(*at_load, file.string()).ok());
  EXPECT_TRUE(IsQuantizedRwkv7File(file.string()));

  absl::StatusOr<std::unique_ptr<LanguageModel>> bare = LanguageModel::Load(file.string(), {});
  ASSERT_TRUE(bare.ok()) << bare.status();
  ExpectSameModel(*at_load, static_cast<Rwkv7Model&>(**bare));

  // A directory without config.json, then with one whose tokenizer wins.
  fs::create_directories(dir_ / "model");
  fs::copy_file(file, dir_ / "model" / "model.safetensors");
  absl::StatusOr<std::unique_ptr<LanguageModel>> dir =
      LanguageModel::Load((dir_ / "model").string(), {});
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ((*dir)->ConfigJson()["weight_format"], "int4");
  EXPECT_EQ((*dir)->Fingerprint(), at_load->Fingerprint());
  std::ofstream(dir_ / "model" / "config.json")
      << R"({"architecture": "rwkv7", "tokenizer": {"type": "sentencepiece"}})";
  dir = LanguageModel::Load((dir_ / "model").string(), {});
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("sentencepiece"), std::string::npos) << dir.status();

  // A float file is not this format, and a float model has no quantized file.
  ASSERT_TRUE(WriteSafetensorsFile((dir_ / "float.safetensors").string(),
                                   RandomRwkv7Weights(TinyShape(), 5))
                  .ok());
  EXPECT_FALSE(IsQuantizedRwkv7File((dir_ / "float.safetensors").string()));
  EXPECT_FALSE(IsQuantizedRwkv7File((dir_ / "absent.safetensors").string()));
  LoadOptions float_options;
  float_options.dtype = torch::kFloat32;
  std::unique_ptr<Rwkv7Model> float_model = Create(float_options);
  ASSERT_TRUE(float_model);
  EXPECT_EQ(SerializeQuantizedRwkv7(*float_model).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A valid file, edited: each case changes what it names and, unless it
// tests the hash, seals the file again with a matching data_sha256.
struct Hostile {
  std::string name;
  std::function<void(SafetensorsContents&)> edit;
  bool reseal = true;
  LoadOptions options = {};
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  std::vector<std::string> says;  // in the message
};

std::string ValidFile() {
  std::unique_ptr<Rwkv7Model> model =
      Create(Quantized(WeightQuantization::kInt8, 32, torch::kBFloat16));
  return model ? SerializeQuantizedRwkv7(*model).value() : "";
}

torch::Tensor& At(SafetensorsContents& c, const std::string& name) {
  EXPECT_TRUE(c.tensors.count(name)) << name;
  return c.tensors[name];
}

TEST(QuantizedFileHostileTest, EveryBrokenFileIsRefusedByName) {
  const std::string valid = ValidFile();
  ASSERT_FALSE(valid.empty());
  const std::string key = "blocks.0.att.key.weight";
  nlohmann::json config = Rwkv7ConfigToJson(TinyShape());
  std::vector<Hostile> cases = {
      {"group size the kernels do not take",
       [](SafetensorsContents& c) { c.metadata["group_size"] = "16"; }, true, {},
       absl::StatusCode::kInvalidArgument, {"group_size", "'16'", "32 or 64"}},
      {"group size other than the codes'",
       [](SafetensorsContents& c) { c.metadata["group_size"] = "64"; }, true, {},
       absl::StatusCode::kInvalidArgument, {".scales", "in groups of 64"}},
      {"NaN scale",
       [&](SafetensorsContents& c) {
         At(c, key + ".scales").view(-1)[3] = std::numeric_limits<float>::quiet_NaN();
       },
       true, {}, absl::StatusCode::kInvalidArgument, {key}},
      {"wrong SHA-256",
       [&](SafetensorsContents& c) { At(c, key + ".codes")[0] += 1; }, false, {},
       absl::StatusCode::kDataLoss, {"data_sha256 mismatch"}},
      {"SHA-256 not hex",
       [](SafetensorsContents& c) { c.metadata["data_sha256"] = "xyz"; }, false, {},
       absl::StatusCode::kInvalidArgument, {"data_sha256", "64 lowercase hex"}},
      {"codes of the wrong size",
       [&](SafetensorsContents& c) {
         torch::Tensor& codes = At(c, key + ".codes");
         codes = codes.slice(0, 0, codes.numel() - 64).clone();
       },
       true, {}, absl::StatusCode::kInvalidArgument, {key + ".codes", "expected U8["}},
      {"scales of the wrong dtype",
       [&](SafetensorsContents& c) {
         At(c, key + ".scales") = At(c, key + ".scales").to(torch::kFloat32);
       },
       true, {}, absl::StatusCode::kInvalidArgument, {key + ".scales", "F32", "expected F16"}},
      {"missing tensor",
       [](SafetensorsContents& c) { c.tensors.erase("blocks.1.att.w1"); }, true, {},
       absl::StatusCode::kInvalidArgument, {"missing tensor 'blocks.1.att.w1'"}},
      {"missing scales",
       [&](SafetensorsContents& c) { c.tensors.erase("head.weight.scales"); }, true, {},
       absl::StatusCode::kInvalidArgument, {"missing tensor 'head.weight.scales'"}},
      {"unknown tensor",
       [](SafetensorsContents& c) { c.tensors["blocks.9.att.w1"] = torch::zeros({2}); }, true,
       {}, absl::StatusCode::kInvalidArgument, {"unexpected tensor 'blocks.9.att.w1'"}},
      {"matrix kept in float",
       [](SafetensorsContents& c) {
         c.tensors.erase("head.weight.codes");
         c.tensors.erase("head.weight.scales");
         c.tensors["head.weight"] = torch::zeros({250, 128}, torch::kBFloat16);
       },
       true, {}, absl::StatusCode::kInvalidArgument, {"'head.weight' is not quantized"}},
      {"low-rank matrix of the wrong dtype",
       [](SafetensorsContents& c) {
         At(c, "blocks.0.att.g1") = At(c, "blocks.0.att.g1").to(torch::kFloat32);
       },
       true, {}, absl::StatusCode::kInvalidArgument, {"blocks.0.att.g1", "expected BF16"}},
      {"config that does not fit the tensors",
       [&](SafetensorsContents& c) {
         nlohmann::json wrong = config;
         wrong["ffn_size"] = 192;
         c.metadata["config"] = wrong.dump();
       },
       true, {}, absl::StatusCode::kInvalidArgument, {"ffn.key.weight", "192"}},
      {"config of the wrong heads",
       [&](SafetensorsContents& c) {
         nlohmann::json wrong = config;
         wrong["n_heads"] = 3;
         c.metadata["config"] = wrong.dump();
       },
       true, {}, absl::StatusCode::kInvalidArgument, {"d_model 128 is not n_heads 3"}},
      {"config past its bounds",
       [&](SafetensorsContents& c) {
         nlohmann::json wrong = config;
         wrong["n_layers"] = int64_t{1} << 40;
         c.metadata["config"] = wrong.dump();
       },
       true, {}, absl::StatusCode::kInvalidArgument, {"'n_layers'", "outside"}},
      {"config not JSON", [](SafetensorsContents& c) { c.metadata["config"] = "{"; }, true, {},
       absl::StatusCode::kInvalidArgument, {"'config' is not a JSON object"}},
      {"unknown format version",
       [](SafetensorsContents& c) { c.metadata["format_version"] = "2"; }, true, {},
       absl::StatusCode::kInvalidArgument, {"format_version '2'"}},
      {"unknown metadata key",
       [](SafetensorsContents& c) { c.metadata["scale_bias"] = "1"; }, true, {},
       absl::StatusCode::kInvalidArgument, {"'scale_bias'"}},
      {"another format",
       [](SafetensorsContents& c) { c.metadata.erase("format"); }, true, {},
       absl::StatusCode::kInvalidArgument, {"no 'format'"}},
      {"fingerprint not hex",
       [](SafetensorsContents& c) { c.metadata["source_fingerprint"] = "abc"; }, true, {},
       absl::StatusCode::kInvalidArgument, {"source_fingerprint"}},
      {"int4 asked of an int8 file", [](SafetensorsContents&) {}, true,
       Quantized(WeightQuantization::kInt4, 0, torch::kBFloat16),
       absl::StatusCode::kInvalidArgument, {"holds int8", "int4 was asked for"}},
      {"float32 asked of an int8 file", [](SafetensorsContents&) {}, true,
       [] {
         LoadOptions o;
         o.dtype = torch::kFloat32;
         return o;
       }(),
       absl::StatusCode::kInvalidArgument, {"holds int8", "float32 weights were asked for"}},
      {"another group asked", [](SafetensorsContents&) {}, true,
       Quantized(WeightQuantization::kInt8, 64, torch::kBFloat16),
       absl::StatusCode::kInvalidArgument, {"groups of 32", "groups of 64 were asked for"}},
  };
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.name);
    absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(valid);
    ASSERT_TRUE(contents.ok());
    h.edit(*contents);
    if (h.reseal) contents->metadata["data_sha256"] = QuantizedRwkv7DataSha256(contents->tensors);
    const std::string bytes = SerializeSafetensors(contents->tensors, contents->metadata);
    absl::StatusOr<std::unique_ptr<Rwkv7Model>> model =
        ParseQuantizedRwkv7(bytes, nlohmann::json::object(), h.options, "hostile.safetensors");
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), h.code) << model.status();
    const std::string message(model.status().message());
    EXPECT_EQ(message.rfind("hostile.safetensors: ", 0), 0u) << message;
    for (const std::string& part : h.says) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

TEST(QuantizedFileHostileTest, TruncatedAndEmptyFilesAreDataLoss) {
  const std::string valid = ValidFile();
  ASSERT_FALSE(valid.empty());
  for (size_t size : {size_t{0}, size_t{7}, size_t{100}, valid.size() / 2, valid.size() - 1}) {
    SCOPED_TRACE(size);
    absl::StatusOr<std::unique_ptr<Rwkv7Model>> model = ParseQuantizedRwkv7(
        std::string_view(valid).substr(0, size), nlohmann::json::object(), {}, "cut");
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss) << model.status();
  }
}

}  // namespace
}  // namespace linserve
