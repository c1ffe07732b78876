// The server limits a model directory gets out of the box
// (engine/loader/serving_defaults.h): the fixed defaults for constant-state
// models, and for Qwen3.5 a long context (32,768 tokens of the 0.8B shape)
// with a state file and a prompt that hold it, shortened on a small machine.

#include "engine/loader/serving_defaults.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/model/state.h"
#include "engine/qwen35/qwen35.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t{1} << 30;

std::string ConfigDir(const std::string& name, const std::string& config_json) {
  const fs::path dir = fs::temp_directory_path() /
                       ("linserve_serving_defaults_" + std::to_string(::getpid()) + "_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json;
  return dir.string();
}

TEST(ServingDefaultsTest, AConstantStateModelKeepsTheFixedDefaults) {
  const std::string dir = ConfigDir("rwkv7", R"({"architecture": "rwkv7"})");
  absl::StatusOr<ServingDefaults> defaults = ServingDefaultsForModel(dir, 24 * kGiB);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->max_context_tokens, 8192);
  EXPECT_EQ(defaults->max_state_bytes, int64_t{64} << 20);
  EXPECT_EQ(defaults->max_prompt_bytes, 16384);
  // No directory (a weights file, a missing path): the same.
  EXPECT_EQ(ServingDefaultsForModel(dir + "/none", 24 * kGiB)->max_context_tokens, 8192);
}

TEST(ServingDefaultsTest, Qwen35ZeroPointEightBHolds32kTokensOutOfTheBox) {
  const Qwen35Config config = Qwen35ShapeByName("0.8b").value();
  const std::string dir = ConfigDir("qwen35", Qwen35HfConfigJson(config, false).dump());
  absl::StatusOr<ServingDefaults> defaults = ServingDefaultsForModel(dir, 24 * kGiB);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  const StateLayout layout(Qwen35StateSpecs(config, torch::kFloat32));
  EXPECT_EQ(defaults->max_context_tokens, 32768);
  EXPECT_GE(defaults->max_state_bytes, StateBytes(layout, 32768));
  EXPECT_LT(defaults->max_state_bytes, StateBytes(layout, 32768) + (int64_t{2} << 20));
  EXPECT_EQ(defaults->max_prompt_bytes, 8 * 32768);
  // The old fixed bound held under 2,000 tokens of this shape.
  EXPECT_LT(StateBytes(layout, 1024), int64_t{64} << 20);
  EXPECT_GT(StateBytes(layout, 2048), int64_t{64} << 20);
}

TEST(ServingDefaultsTest, ASmallMachineGetsAShorterContext) {
  const Qwen35Config config = Qwen35ShapeByName("0.8b").value();
  const std::string dir = ConfigDir("qwen35-small", Qwen35HfConfigJson(config, false).dump());
  // 2 GiB: an eighth is 256 MiB, 8,192 tokens of the 0.8B shape's cache fit
  // (about 213 MB) and 16,384 do not.
  absl::StatusOr<ServingDefaults> defaults = ServingDefaultsForModel(dir, 2 * kGiB);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->max_context_tokens, 8192);
}

TEST(ServingDefaultsTest, AMalformedQwen35ConfigIsRefusedByName) {
  const std::string dir = ConfigDir(
      "qwen35-bad", R"({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                        "text_config": {"hidden_size": -1}})");
  absl::StatusOr<ServingDefaults> defaults = ServingDefaultsForModel(dir, 24 * kGiB);
  EXPECT_FALSE(defaults.ok());
}

}  // namespace
}  // namespace linserve
