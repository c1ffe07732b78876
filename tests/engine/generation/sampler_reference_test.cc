// The sampler rebuilt for large vocabularies (engine/generation/sampler.h)
// against the one it replaced (reference_sampler.h, kept verbatim): greedy is
// bit-identical; with temperature and min-p (the same inverse CDF in id
// order, float weights instead of double) a seeded draw picks the same token
// but for the rare draw that lands within rounding of a boundary; top-k and
// top-p now draw in id order rather than most probable first, so their draws
// differ and their distribution is what must agree.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_kernels.h"
#include "engine/generation/generation.h"
#include "engine/generation/sampler.h"
#include "engine/generation/sampling_kernel.h"
#include "engine/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/engine/generation/reference_sampler.h"
#include "tests/engine/generation/sampling_rows.h"

namespace linserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Setting {
  std::string name;
  SamplingParams params;
};

SamplingParams Params(float temperature, int32_t top_k, float top_p, float min_p,
                      float repetition = 1.0f, float presence = 0.0f, float frequency = 0.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = repetition;
  p.presence_penalty = presence;
  p.frequency_penalty = frequency;
  p.seed = 20261126;
  return p;
}

// Settings whose draws keep the reference's id order.
std::vector<Setting> IdOrderSettings() {
  return {{"temperature 1", Params(1.0f, 0, 1.0f, 0.0f)},
          {"temperature 0.6", Params(0.6f, 0, 1.0f, 0.0f)},
          {"temperature 1.7 + penalties", Params(1.7f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.5f)},
          {"min_p 0.05", Params(1.0f, 0, 1.0f, 0.05f)},
          {"min_p 0.2 + repetition", Params(0.8f, 0, 1.0f, 0.2f, 1.5f)}};
}

// Settings that now select and draw in id order.
std::vector<Setting> FilteredSettings() {
  return {{"top_k 40", Params(1.0f, 40, 1.0f, 0.0f)},
          {"top_k 1", Params(0.5f, 1, 1.0f, 0.0f)},
          {"top_p 0.3 + penalties 0.5", Params(1.0f, 0, 0.3f, 0.0f, 1.0f, 0.5f, 0.5f)},
          {"top_p 0.9", Params(1.0f, 0, 0.9f, 0.0f)},
          {"top_k 100 + top_p 0.8", Params(0.9f, 100, 0.8f, 0.0f)},
          {"top_p 0.95 + min_p 0.02", Params(1.2f, 0, 0.95f, 0.02f, 1.1f)},
          {"top_k 5000 + top_p 0.5", Params(1.0f, 5000, 0.5f, 0.0f)}};
}

std::vector<Setting> GreedySettings() {
  return {{"greedy", Params(0.0f, 0, 1.0f, 0.0f)},
          {"greedy + penalties", Params(0.0f, 10, 0.5f, 0.1f, 1.3f, 0.5f, 0.5f)}};
}

std::vector<int64_t> History(int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> history(64);
  for (int64_t& t : history) t = id(rng);
  return history;
}

// Half the sum of |p - q| over both supports.
double TotalVariation(const std::vector<TokenProbability>& p,
                      const std::vector<TokenProbability>& q) {
  std::map<int64_t, double> diff;
  for (const TokenProbability& t : p) diff[t.token] += t.probability;
  for (const TokenProbability& t : q) diff[t.token] -= t.probability;
  double sum = 0.0;
  for (const auto& [token, d] : diff) sum += std::abs(d);
  return sum / 2.0;
}

class SamplerReferenceTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(SamplerReferenceTest, GreedyIsBitIdentical) {
  const int64_t vocab = GetParam();
  std::mt19937_64 rng(1);
  for (const Setting& s : GreedySettings()) {
    Sampler sampler(s.params);
    ReferenceSampler reference(s.params);
    for (int row = 0; row < 50; ++row) {
      const std::vector<float> logits = RandomLogitsRow(vocab, row % 2 == 0, rng);
      const std::vector<int64_t> history = History(vocab, rng);
      EXPECT_EQ(sampler.Sample(logits, history), reference.Sample(logits, history)) << s.name;
    }
  }
}

TEST_P(SamplerReferenceTest, SameSeedSameTokenWhereTheOrderIsUnchanged) {
  const int64_t vocab = GetParam();
  const int rows = vocab > 1000 ? 300 : 1000;
  std::mt19937_64 rng(2);
  for (const Setting& s : IdOrderSettings()) {
    Sampler sampler(s.params);
    ReferenceSampler reference(s.params);
    int differ = 0;
    for (int row = 0; row < rows; ++row) {
      const std::vector<float> logits = RandomLogitsRow(vocab, row % 2 == 0, rng);
      const std::vector<int64_t> history = History(vocab, rng);
      differ += sampler.Sample(logits, history) != reference.Sample(logits, history);
    }
    // A float weight is within about 1e-7 of the double one: a draw moves
    // only where it falls that close to a boundary of the CDF.
    EXPECT_LE(differ, 1 + rows / 500) << s.name;
  }
}

TEST_P(SamplerReferenceTest, DistributionsAgreeForEverySetting) {
  const int64_t vocab = GetParam();
  std::mt19937_64 rng(3);
  std::vector<Setting> settings = IdOrderSettings();
  for (const Setting& s : FilteredSettings()) settings.push_back(s);
  for (const Setting& s : settings) {
    Sampler sampler(s.params);
    ReferenceSampler reference(s.params);
    for (int row = 0; row < 20; ++row) {
      const std::vector<float> logits = RandomLogitsRow(vocab, row % 2 == 0, rng);
      const std::vector<int64_t> history = History(vocab, rng);
      const std::vector<TokenProbability> got = sampler.Probabilities(logits, history);
      const std::vector<TokenProbability> want = reference.Probabilities(logits, history);
      EXPECT_LT(TotalVariation(got, want), 1e-5) << s.name << ", row " << row;
      EXPECT_EQ(got.size(), want.size()) << s.name << ", row " << row;
    }
  }
}

// 20,000 draws of one row against the reference's probabilities, binned as
// the 10 most probable tokens and the rest: a chi-square of 10 degrees of
// freedom over 50 is a one-in-a-million event for a right sampler (the
// seeds are fixed, so the test is deterministic).
TEST_P(SamplerReferenceTest, DrawFrequenciesFollowTheReferenceDistribution) {
  const int64_t vocab = GetParam();
  constexpr int kDraws = 20000;
  std::mt19937_64 rng(4);
  for (const Setting& s : FilteredSettings()) {
    const std::vector<float> logits = RandomLogitsRow(vocab, /*peaked=*/true, rng);
    const std::vector<int64_t> history = History(vocab, rng);
    const std::vector<TokenProbability> want = ReferenceSampler(s.params).Probabilities(logits, history);
    std::map<int64_t, int> bin_of;
    std::vector<double> expected;
    for (size_t i = 0; i < want.size() && i < 10; ++i) {
      bin_of[want[i].token] = static_cast<int>(i);
      expected.push_back(want[i].probability * kDraws);
    }
    double rest = 1.0;
    for (double e : expected) rest -= e / kDraws;
    expected.push_back(rest * kDraws);
    std::vector<double> seen(expected.size(), 0.0);
    Sampler sampler(s.params);
    for (int i = 0; i < kDraws; ++i) {
      const int64_t token = sampler.Sample(logits, history);
      const auto it = bin_of.find(token);
      seen[it == bin_of.end() ? expected.size() - 1 : it->second] += 1.0;
    }
    double chi2 = 0.0;
    for (size_t b = 0; b < expected.size(); ++b) {
      if (expected[b] < 1e-9) {
        EXPECT_EQ(seen[b], 0.0) << s.name << ": a token the reference never draws";
        continue;
      }
      chi2 += (seen[b] - expected[b]) * (seen[b] - expected[b]) / expected[b];
    }
    EXPECT_LT(chi2, 50.0) << s.name;
  }
}

// Top-p on a wide nucleus starts from a guess made on every 16th id
// (Sampler::SampledBoundary). Rows whose sampled ids stand apart from the
// rest mislead it high or low; the search must still keep exactly the
// reference's nucleus.
TEST(SamplerReferenceTest, TopPKeepsTheReferenceNucleusWhereTheSampleMisleads) {
  constexpr int64_t kVocab = 65536;
  std::mt19937_64 rng(6);
  for (float shift : {-3.0f, -1.0f, 1.0f, 3.0f, 8.0f}) {
    for (float top_p : {0.3f, 0.9f}) {
      std::vector<float> logits = RandomLogitsRow(kVocab, /*peaked=*/false, rng);
      for (int64_t id = 0; id < kVocab; ++id) {
        if (id % 16 == 8) logits[id] += shift;
      }
      const SamplingParams params = Params(1.0f, 0, top_p, 0.0f);
      const std::vector<int64_t> history = History(kVocab, rng);
      const std::vector<TokenProbability> got = Sampler(params).Probabilities(logits, history);
      const std::vector<TokenProbability> want =
          ReferenceSampler(params).Probabilities(logits, history);
      EXPECT_LT(TotalVariation(got, want), 1e-5) << "shift " << shift << ", top_p " << top_p;
      EXPECT_EQ(got.size(), want.size()) << "shift " << shift << ", top_p " << top_p;
    }
  }
}

TEST_P(SamplerReferenceTest, SamplingInPlaceLeavesTheRowAsItWas) {
  const int64_t vocab = GetParam();
  std::mt19937_64 rng(5);
  std::vector<Setting> settings = IdOrderSettings();
  for (const Setting& s : FilteredSettings()) settings.push_back(s);
  for (const Setting& s : settings) {
    std::vector<float> row = RandomLogitsRow(vocab, true, rng);
    row[3] = -kInf;
    row[5] = std::nanf("");
    const std::vector<float> before = row;
    const std::vector<int64_t> history = History(vocab, rng);
    Sampler in_place(s.params);
    Sampler copying(s.params);
    EXPECT_EQ(in_place.SampleInPlace(absl::MakeSpan(row), history),
              copying.Sample(before, history))
        << s.name;
    EXPECT_EQ(std::memcmp(row.data(), before.data(), row.size() * sizeof(float)), 0) << s.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, SamplerReferenceTest, ::testing::Values(258, 65536),
                         [](const auto& info) { return "V" + std::to_string(info.param); });

TEST(SamplerReferenceTest, NextInPlaceMasksAndRestoresTheRow) {
  // Ids 256 and up of a byte tokenizer carry no bytes and are never sampled.
  const Tokenizer tokenizer = Tokenizer::Bytes(300);
  std::mt19937_64 rng(6);
  std::vector<float> row = RandomLogitsRow(300, false, rng);
  for (int i = 256; i < 300; ++i) row[i] = 100.0f;  // would win, but is never sampled
  const std::vector<float> before = row;
  Generation generation(tokenizer, Params(1.0f, 0, 0.9f, 0.0f, 1.2f), {1, 2, 3});
  const int64_t token = generation.NextInPlace(absl::MakeSpan(row)).token;
  EXPECT_LT(token, 256);
  EXPECT_EQ(std::memcmp(row.data(), before.data(), row.size() * sizeof(float)), 0);
}

// Each family the CPU can run gives the portable family's bits.
TEST(SamplingKernelTest, EveryFamilyGivesTheSameBits) {
  std::mt19937_64 rng(7);
  std::vector<float> logits = RandomLogitsRow(65536 + 37, true, rng);
  logits[11] = -kInf;
  logits[12] = std::nanf("");
  logits[13] = -1000.0f;
  using MaxFn = float (*)(const float*, int64_t);
  using WeightsFn = void (*)(const SamplingWeightsArgs&);
  using SelectFn = int64_t (*)(const float*, int64_t, float, int32_t*);
  struct Family {
    CpuKernels kernels;
    MaxFn max;
    WeightsFn weights;
    SelectFn select;
  };
  const Family families[] = {
      {CpuKernels::kPortable, SamplingMaxPortable, SamplingWeightsPortable, SamplingSelectPortable},
      {CpuKernels::kAvx2, SamplingMaxAvx2, SamplingWeightsAvx2, SamplingSelectAvx2},
      {CpuKernels::kAvx512, SamplingMaxAvx512, SamplingWeightsAvx512, SamplingSelectAvx512}};
  const auto n = static_cast<int64_t>(logits.size());
  const int64_t blocks = (n + kSamplingBlock - 1) / kSamplingBlock;
  std::vector<float> want_weights;
  std::vector<double> want_sums;
  std::vector<int32_t> want_ids;
  float want_max = 0.0f;
  int ran = 0;
  for (const Family& f : families) {
    if (ActiveCpuKernels() < f.kernels) continue;
    ++ran;
    const float max = f.max(logits.data(), n);
    std::vector<float> weights(n);
    std::vector<double> sums(blocks);
    SamplingWeightsArgs args;
    args.logits = logits.data();
    args.n = n;
    args.max_logit = max;
    args.temperature = 0.7f;
    args.floor = 1e-6f;
    args.weights = weights.data();
    args.block_sums = sums.data();
    f.weights(args);
    std::vector<int32_t> ids(n);
    ids.resize(f.select(weights.data(), n, 0x1p-6f, ids.data()));
    if (want_weights.empty()) {
      want_max = max;
      want_weights = weights;
      want_sums = sums;
      want_ids = ids;
      EXPECT_EQ(weights[11], 0.0f);
      EXPECT_EQ(weights[12], 0.0f);
      EXPECT_EQ(weights[13], 0.0f);
      // Against double exp: the polynomial's error (2e-7) and the float
      // argument's rounding, |x| 2^-23 twice (subtract, divide).
      for (int64_t i = 0; i < n; ++i) {
        const double x = (static_cast<double>(logits[i]) - max) / 0.7f;
        const double exact = std::exp(x);
        if (exact >= 1e-6) {
          ASSERT_NEAR(weights[i], exact, exact * (2e-7 + std::abs(x) * 2.4e-7))
              << "logit " << logits[i];
        }
      }
      continue;
    }
    EXPECT_EQ(std::memcmp(&max, &want_max, sizeof(max)), 0) << CpuKernelsName(f.kernels);
    EXPECT_EQ(std::memcmp(weights.data(), want_weights.data(), n * sizeof(float)), 0)
        << CpuKernelsName(f.kernels);
    EXPECT_EQ(std::memcmp(sums.data(), want_sums.data(), blocks * sizeof(double)), 0)
        << CpuKernelsName(f.kernels);
    EXPECT_EQ(ids, want_ids) << CpuKernelsName(f.kernels);
  }
  EXPECT_GE(ran, 1);
}

// SamplingSelectBetween, dense and sparse, in every family: the ids a plain
// loop finds, ascending, with their weights.
TEST(SamplingKernelTest, EveryFamilySelectsTheIdsAPlainLoopFinds) {
  using BetweenFn = int64_t (*)(const float*, int64_t, float, float, bool, int32_t*, float*);
  const std::pair<CpuKernels, BetweenFn> families[] = {
      {CpuKernels::kPortable, SamplingSelectBetweenPortable},
      {CpuKernels::kAvx2, SamplingSelectBetweenAvx2},
      {CpuKernels::kAvx512, SamplingSelectBetweenAvx512}};
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> weights(65536 + 37);  // a tail past the last block of 16
  for (float& w : weights) w = uniform(rng);
  weights[5] = 0.0f;
  weights[6] = 1.0f;
  const auto n = static_cast<int64_t>(weights.size());
  const std::pair<float, float> ranges[] = {
      {0.25f, 0.75f}, {0.5f, 0.5001f}, {0.0f, 0x1p-30f}, {0.0f, 2.0f}, {0.3f, 0.3f}};
  for (const auto& [lo, hi] : ranges) {
    std::vector<int32_t> want_ids;
    std::vector<float> want_values;
    for (int64_t i = 0; i < n; ++i) {
      if (weights[i] >= lo && weights[i] < hi) {
        want_ids.push_back(static_cast<int32_t>(i));
        want_values.push_back(weights[i]);
      }
    }
    for (const auto& [kernels, between] : families) {
      if (ActiveCpuKernels() < kernels) continue;
      for (bool dense : {false, true}) {
        std::vector<int32_t> ids(n);
        std::vector<float> values(n);
        const int64_t count = between(weights.data(), n, lo, hi, dense, ids.data(), values.data());
        ids.resize(count);
        values.resize(count);
        EXPECT_EQ(ids, want_ids) << CpuKernelsName(kernels) << " [" << lo << ", " << hi << ")";
        EXPECT_EQ(values, want_values) << CpuKernelsName(kernels);
        std::vector<int32_t> ids_only(n);
        ids_only.resize(between(weights.data(), n, lo, hi, dense, ids_only.data(), nullptr));
        EXPECT_EQ(ids_only, want_ids) << CpuKernelsName(kernels);
      }
    }
  }
}

}  // namespace
}  // namespace linserve
