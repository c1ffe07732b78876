// linserve-quantize end to end: a random RWKV-7 written as a bfloat16 model
// directory, quantized by the program into a file and into a directory, and
// a random Qwen3.5 checkpoint directory quantized into a directory, each
// served exactly as the same model quantized at load; what it prints, and
// what it refuses.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "engine/rwkv7/rwkv7_config.h"
#include "gtest/gtest.h"
#include "tests/engine/rwkv7/small_rwkv7_shape.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Ran RunQuantize(const std::string& args) {
  Ran ran;
  FILE* pipe = popen((std::string(LINSERVE_QUANTIZE_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) ran.output.append(buffer, n);
  const int status = pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

std::vector<torch::Tensor> Logits(LanguageModel& model) {
  State state = model.NewState();
  std::vector<torch::Tensor> out;
  out.push_back(torch::tensor(model.Prefill(state, {5, 80, 120, 3, 9}).value()));
  out.push_back(model.Step(state, {44}).value().clone());
  return out;
}

class QuantizeToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_quantize_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "float");
    const Rwkv7Config shape = SmallRwkv7Shape(128, 256, 256);
    TensorMap weights = RandomRwkv7Weights(shape, 3);
    for (auto& [name, tensor] : weights) tensor = tensor.to(torch::kBFloat16);
    ASSERT_TRUE(
        WriteSafetensorsFile((dir_ / "float" / "model.safetensors").string(), weights).ok());
    std::ofstream(dir_ / "float" / "config.json")
        << R"({"architecture": "rwkv7", "tokenizer": {"type": "bytes"}})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string In() const { return (dir_ / "float").string(); }

  fs::path dir_;
};

TEST_F(QuantizeToolTest, WritesAFileServedAsTheModelQuantizedAtLoad) {
  for (const std::string dtype : {"int8", "int4"}) {
    SCOPED_TRACE(dtype);
    const std::string out = (dir_ / (dtype + ".safetensors")).string();
    const Ran ran = RunQuantize(In() + " " + out + " --dtype=" + dtype + " --group_size=32");
    ASSERT_EQ(ran.exit_code, 0) << ran.output;

    LoadOptions at_load_options;
    ASSERT_TRUE(ApplyDtypeFlag(dtype, at_load_options).ok());
    at_load_options.quantization_group = 32;
    auto at_load = LanguageModel::Load(In(), at_load_options);
    ASSERT_TRUE(at_load.ok()) << at_load.status();
    auto served = LanguageModel::Load(out, {});
    ASSERT_TRUE(served.ok()) << served.status();
    auto float_model = LanguageModel::Load(In(), {});
    ASSERT_TRUE(float_model.ok()) << float_model.status();

    EXPECT_EQ((*served)->WeightFormatName(), dtype);
    EXPECT_EQ((*served)->ConfigJson()["quantization_group"], 32);
    EXPECT_EQ((*served)->Fingerprint(), (*float_model)->Fingerprint());
    const std::vector<torch::Tensor> a = Logits(**at_load), b = Logits(**served);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;

    // What it did, in words.
    EXPECT_NE(ran.output.find(out), std::string::npos) << ran.output;
    EXPECT_NE(ran.output.find(dtype + " in groups of 32"), std::string::npos) << ran.output;
    EXPECT_NE(ran.output.find("fingerprint " + (*float_model)->Fingerprint()), std::string::npos)
        << ran.output;
    EXPECT_NE(ran.output.find(" MB"), std::string::npos) << ran.output;
  }
}

TEST_F(QuantizeToolTest, WritesAModelDirectory) {
  const fs::path out = dir_ / "int8";
  const Ran ran = RunQuantize(In() + " " + out.string() + "/ --dtype=int8");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  std::ifstream in(out / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["architecture"], "rwkv7");
  EXPECT_EQ(config["tokenizer"]["type"], "byte");
  auto served = LanguageModel::Load(out.string(), {});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->WeightFormatName(), "int8");
  EXPECT_EQ((*served)->tokenizer().name(), "byte");
  // The format's default group.
  EXPECT_EQ((*served)->ConfigJson()["quantization_group"],
            DefaultQuantizationGroup(WeightQuantization::kInt8));
  // A server asking for another format is refused, naming both.
  LoadOptions int4;
  int4.quantization = WeightQuantization::kInt4;
  auto refused = LanguageModel::Load(out.string(), int4);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("int8"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("int4"), std::string::npos) << refused.status();
}

TEST_F(QuantizeToolTest, RefusesWhatItCannotDo) {
  const std::string out = (dir_ / "out.safetensors").string();
  Ran ran = RunQuantize(In() + " " + out + " --dtype=bfloat16");
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_NE(ran.output.find("int8 or int4"), std::string::npos) << ran.output;
  ran = RunQuantize(In() + " " + out + " --dtype=int8 --group_size=48");
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_NE(ran.output.find("48"), std::string::npos) << ran.output;
  ran = RunQuantize(In() + " --dtype=int8");
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.output.find("usage"), std::string::npos) << ran.output;
  ran = RunQuantize((dir_ / "absent").string() + " " + out + " --dtype=int8");
  EXPECT_EQ(ran.exit_code, 1);
  ran = RunQuantize(In() + " " + In() + " --dtype=int8");
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_NE(ran.output.find("IN"), std::string::npos) << ran.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(QuantizeToolTest, WritesAQwen35DirectoryWithoutTheShards) {
  const fs::path in = dir_ / "qwen35";
  ASSERT_TRUE(WriteRandomQwen35Directory(Qwen35ShapeByName("tiny").value(), in.string(), {}).ok());
  const fs::path out = dir_ / "qwen35-int4";
  const Ran ran = RunQuantize(in.string() + " " + out.string() + "/ --dtype=int4");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  // The weights in one file; every other file of the checkpoint beside it.
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out)) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"config.json", "generation_config.json",
                                             "model.safetensors", "tokenizer.json",
                                             "tokenizer_config.json"}));

  LoadOptions at_load_options;
  ASSERT_TRUE(ApplyDtypeFlag("int4", at_load_options).ok());
  auto at_load = LanguageModel::Load(in.string(), at_load_options);
  ASSERT_TRUE(at_load.ok()) << at_load.status();
  auto served = LanguageModel::Load(out.string(), {});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->architecture(), "qwen3_5");
  EXPECT_EQ((*served)->WeightFormatName(), "int4");
  EXPECT_EQ((*served)->Fingerprint(), (*at_load)->Fingerprint());
  const std::vector<torch::Tensor> a = Logits(**at_load), b = Logits(**served);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  EXPECT_NE(ran.output.find("int4 in groups of 32, every matrix"), std::string::npos)
      << ran.output;
  EXPECT_NE(ran.output.find("fingerprint " + (*at_load)->Fingerprint()), std::string::npos)
      << ran.output;

  // A Qwen3.5 model is a directory: a bare file OUT is refused, and nothing written.
  const Ran refused =
      RunQuantize(in.string() + " " + (dir_ / "q.safetensors").string() + " --dtype=int8");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("directory"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir_ / "q.safetensors"));
}

}  // namespace
}  // namespace linserve
