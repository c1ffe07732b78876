#include "engine/text/tokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

TEST(TokenizerTest, EncodesEveryByteAsItsValue) {
  Tokenizer tokenizer{ModelConfig()};
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::vector<int64_t> ids = tokenizer.Encode(all_bytes, /*starts_text=*/false);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(ids[b], b);
    EXPECT_EQ(tokenizer.TokenBytes(b), all_bytes.substr(b, 1));
    EXPECT_FALSE(tokenizer.IsSpecial(b));
  }
  EXPECT_EQ(tokenizer.Decode(ids), all_bytes);
}

TEST(TokenizerTest, BosComesFromTheConfig) {
  ModelConfig config;
  config.vocab_size = 300;
  config.bos_id = 299;
  config.eos_id = 256;
  config.add_bos = true;
  Tokenizer tokenizer(config);
  EXPECT_TRUE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.Encode("hé", /*starts_text=*/true), (std::vector<int64_t>{299, 'h', 0xC3, 0xA9}));
  EXPECT_EQ(tokenizer.Encode("", /*starts_text=*/true), (std::vector<int64_t>{299}));
  EXPECT_TRUE(tokenizer.Encode("", /*starts_text=*/false).empty());
  EXPECT_EQ(tokenizer.bos_id(), 299);
  EXPECT_EQ(tokenizer.eos_id(), 256);
  EXPECT_EQ(tokenizer.vocab_size(), 300);
}

TEST(TokenizerTest, AModelThatTakesNoBosNeverGetsOne) {
  ModelConfig config;  // add_bos is false unless the config says otherwise
  Tokenizer tokenizer(config);
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.Encode("hi", /*starts_text=*/true), (std::vector<int64_t>{'h', 'i'}));
  EXPECT_TRUE(tokenizer.Encode("", /*starts_text=*/true).empty());
}

TEST(TokenizerTest, SpecialAndOutOfRangeTokensCarryNoBytes) {
  Tokenizer tokenizer{ModelConfig()};
  struct Case {
    int64_t token;
    bool special;
  };
  const Case cases[] = {{256, true}, {257, true}, {258, false}, {-1, false}, {1 << 20, false}};
  for (const Case& c : cases) {
    EXPECT_EQ(tokenizer.IsSpecial(c.token), c.special) << c.token;
    EXPECT_EQ(tokenizer.TokenBytes(c.token), "") << c.token;
  }
  EXPECT_EQ(tokenizer.Decode({256, 'o', 257, 'k', -3, 258}), "ok");
}

TEST(TokenizerTest, AConfigTokenizerMasksNothing) {
  ModelConfig config;
  config.vocab_size = 300;  // ids 258..299 unused, and samplable as they always were
  Tokenizer tokenizer(config);
  EXPECT_EQ(tokenizer.name(), "byte");
  EXPECT_TRUE(tokenizer.never_sampled().empty());
  EXPECT_TRUE(tokenizer.IsSpecial(299));
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(tokenizer.SpecialIdRanges(), (Ranges{{256, 300}}));
  EXPECT_EQ(Tokenizer::Bytes(256).SpecialIdRanges(), Ranges{});
  EXPECT_EQ(Tokenizer::Bytes(260).SpecialIdRanges(), (Ranges{{256, 260}}));
}

TEST(TokenizerTest, BytesHasNoSpecialIds) {
  const Tokenizer tokenizer = Tokenizer::Bytes(256);
  EXPECT_EQ(tokenizer.name(), "byte");
  EXPECT_EQ(tokenizer.bos_id(), -1);
  EXPECT_EQ(tokenizer.eos_id(), -1);
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.vocab_size(), 256);
  EXPECT_TRUE(tokenizer.never_sampled().empty());
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  // Byte 0 is an ordinary byte, and a new text gets no BOS.
  const std::vector<int64_t> ids = tokenizer.Encode(all_bytes, /*starts_text=*/true);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(ids[b], b);
    EXPECT_EQ(tokenizer.TokenBytes(b), all_bytes.substr(b, 1));
    EXPECT_FALSE(tokenizer.IsSpecial(b));
  }
  EXPECT_EQ(tokenizer.Decode(ids), all_bytes);
  EXPECT_FALSE(tokenizer.IsSpecial(256));
  EXPECT_EQ(tokenizer.TokenBytes(256), "");
}

TEST(TokenizerTest, BytesNeverSamplesIdsPastTheBytes) {
  const Tokenizer tokenizer = Tokenizer::Bytes(260);
  EXPECT_EQ(tokenizer.never_sampled(), (std::vector<int64_t>{256, 257, 258, 259}));
  EXPECT_TRUE(tokenizer.IsSpecial(259));
  EXPECT_FALSE(tokenizer.IsSpecial(260));
  EXPECT_EQ(tokenizer.Decode({'o', 257, 'k'}), "ok");
}

}  // namespace
}  // namespace linserve
