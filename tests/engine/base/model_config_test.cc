#include "engine/base/model_config.h"

#include "gtest/gtest.h"

namespace linserve {
namespace {

using nlohmann::json;

TEST(ModelConfigTest, RoundTripsThroughJson) {
  ModelConfig config;
  config.attention.kind = AttentionKind::kVq;
  config.attention.window = 32;
  config.attention.scale = AttentionScale::kEntropyInvariant;
  config.attention.token_shift = true;
  config.training = {{"seed", 7}};
  auto parsed = ModelConfigFromJson(ModelConfigToJson(config));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ModelConfigToJson(*parsed), ModelConfigToJson(config));
  EXPECT_EQ(parsed->attention.kind, AttentionKind::kVq);
  EXPECT_EQ(parsed->attention.window, 32);
  EXPECT_TRUE(parsed->attention.token_shift);
  EXPECT_EQ(parsed->training["seed"], 7);
}

TEST(ModelConfigTest, ErrorsNameTheField) {
  struct Case {
    json config;
    std::string expected;
  };
  const Case cases[] = {
      {{{"d_modle", 4}}, "unknown key 'd_modle'"},
      {{{"attention", {{"kind", "linear_relu"}}}}, "attention.kind 'linear_relu'"},
      {{{"attention", {{"windw", 3}}}}, "unknown key 'attention.windw'"},
      {{{"n_layers", 0}}, "n_layers = 0 is outside [1, 1024]"},
      {{{"head_dim", 7}}, "head_dim = 7 must be even"},
      {{{"d_model", "big"}}, "'d_model' has the wrong type"},
      {{{"attention", {{"kind", "vq"}, {"rope", true}}}}, "attention.rope applies to"},
      {{{"attention", {{"kind", "linear_elu"}, {"scale", "entropy_invariant"}}}},
       "'entropy_invariant' applies to"},
      {{{"tokenizer", {{"type", "bpe"}}}}, "tokenizer.type 'bpe'"},
      {{{"attention", {{"token_shift", 1}}}}, "'attention.token_shift' has the wrong type"},
  };
  for (const Case& c : cases) {
    auto parsed = ModelConfigFromJson(c.config);
    ASSERT_FALSE(parsed.ok()) << c.config;
    EXPECT_NE(std::string(parsed.status().message()).find(c.expected), std::string::npos)
        << parsed.status() << " does not contain " << c.expected;
  }
}

}  // namespace
}  // namespace linserve
