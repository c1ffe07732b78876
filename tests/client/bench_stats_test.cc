#include <gtest/gtest.h>

#include "client/bench.h"
#include "client/stats.h"

namespace linserve {
namespace {

TEST(StatsTest, NearestRankPercentiles) {
  std::vector<double> values;
  for (int i = 100; i >= 1; --i) values.push_back(i);
  const Distribution d = Summarize(values);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_EQ(d.p50, 50);
  EXPECT_EQ(d.p90, 90);
  EXPECT_EQ(d.p99, 99);
  EXPECT_EQ(d.max, 100);
}

TEST(StatsTest, SmallAndEmptySamples) {
  const Distribution one = Summarize({7});
  EXPECT_EQ(one.p50, 7);
  EXPECT_EQ(one.p99, 7);
  EXPECT_EQ(one.max, 7);
  const Distribution none = Summarize({});
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.max, 0);
}

TEST(LengthRangeTest, ParsesOneNumberOrARange) {
  EXPECT_EQ(ParseLengthRange("x", "64")->min, 64);
  EXPECT_EQ(ParseLengthRange("x", "64")->max, 64);
  EXPECT_EQ(ParseLengthRange("x", "8:32")->max, 32);
  for (const char* bad : {"", "0", "9:8", "a", "1:2:3", "-4"}) {
    const auto parsed = ParseLengthRange("prompt_tokens", bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--prompt_tokens"), std::string::npos);
  }
}

TEST(LogitBiasTest, ParsesIdBiasPairs) {
  EXPECT_TRUE(ParseLogitBias("")->empty());
  EXPECT_EQ(*ParseLogitBias("129:-100,3319:2.5"),
            (std::map<int32_t, float>{{129, -100.0f}, {3319, 2.5f}}));
  for (const char* bad : {"1", "a:1", "1:b", "-1:5", "1:2:3", "1:-100,", "1:inf"}) {
    const auto parsed = ParseLogitBias(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--logit_bias"), std::string::npos);
  }
}

// Prompts of token ids are drawn from every id but the special ones.
TEST(OrdinaryTokenIdsTest, EveryIdOutsideTheSpecialRanges) {
  BenchVocabulary world{65536, {{0, 1}, {65530, 65536}}};
  absl::StatusOr<std::vector<int32_t>> ids = OrdinaryTokenIds(world);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 65529u);
  EXPECT_EQ(ids->front(), 1);
  EXPECT_EQ(ids->back(), 65529);
  BenchVocabulary bytes{258, {{256, 258}}};
  ids = OrdinaryTokenIds(bytes);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 256u);
  EXPECT_EQ(ids->back(), 255);
  EXPECT_EQ(OrdinaryTokenIds({300, {}})->size(), 300u);

  // What no prompt can be made from, and ranges out of order or bounds.
  for (const BenchVocabulary& bad :
       {BenchVocabulary{0, {}}, BenchVocabulary{4, {{0, 4}}}, BenchVocabulary{9, {{5, 6}, {1, 2}}},
        BenchVocabulary{9, {{3, 2}}}, BenchVocabulary{9, {{8, 10}}}}) {
    EXPECT_EQ(OrdinaryTokenIds(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad.vocab_size;
  }
}

}  // namespace
}  // namespace linserve
