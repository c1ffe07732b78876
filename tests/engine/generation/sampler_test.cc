#include "engine/generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kDraws = 20000;

// Logits whose softmax is exactly proportional to `probs`.
std::vector<float> LogitsFor(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

std::vector<double> Frequencies(SamplingParams params, const std::vector<float>& logits,
                                int draws = kDraws) {
  Sampler sampler(std::move(params));
  std::vector<double> freq(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) freq[sampler.Sample(logits, {})] += 1.0 / draws;
  return freq;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p;
  double total = 0.0;
  for (float l : logits) total += std::exp(l / temperature);
  for (float l : logits) p.push_back(std::exp(l / temperature) / total);
  return p;
}

// A fixed pseudo-random logits sequence, different at every step.
std::vector<float> StepLogits(int step) {
  std::vector<float> logits(258);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step) * 3.0);
  }
  return logits;
}

TEST(SamplerTest, UniformDrawIsSplitMix64) {
  // Reference outputs of SplitMix64 started at state 1234567.
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull,
                               9817491932198370423ull, 4593380528125082431ull,
                               16408922859458223821ull};
  for (uint64_t n = 0; n < 5; ++n) {
    EXPECT_EQ(UniformDraw(1234567, n), static_cast<double>(expected[n] >> 11) * 0x1.0p-53);
  }
  for (uint64_t n = 0; n < 1000; ++n) {
    const double u = UniformDraw(42, n);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedsDiffer) {
  auto run = [](uint64_t seed) {
    SamplingParams params;
    params.seed = seed;
    params.top_k = 40;
    params.top_p = 0.9f;
    Sampler sampler(params);
    std::vector<int64_t> tokens;
    for (int step = 0; step < 200; ++step) {
      tokens.push_back(sampler.Sample(StepLogits(step), tokens));
    }
    return tokens;
  };
  const std::vector<int64_t> a = run(7);
  run(8);  // another session in between changes nothing
  EXPECT_EQ(run(7), a);
  EXPECT_NE(run(8), a);
  EXPECT_NE(run(0), a);
}

TEST(SamplerTest, RngStateSaveRestoreContinuesIdentically) {
  SamplingParams params;
  params.seed = 99;
  params.repetition_penalty = 1.3f;
  Sampler original(params);
  std::vector<int64_t> history;
  for (int step = 0; step < 50; ++step)
    history.push_back(original.Sample(StepLogits(step), history));
  const SamplerRngState saved = original.rng_state();
  EXPECT_EQ(saved.seed, 99u);
  EXPECT_EQ(saved.draws, 50u);

  std::vector<int64_t> resumed_history = history;
  for (int step = 50; step < 100; ++step)
    history.push_back(original.Sample(StepLogits(step), history));

  params.seed = 12345;  // overwritten by the restored state
  Sampler resumed(params);
  resumed.set_rng_state(saved);
  for (int step = 50; step < 100; ++step) {
    resumed_history.push_back(resumed.Sample(StepLogits(step), resumed_history));
  }
  EXPECT_EQ(resumed_history, history);
  EXPECT_EQ(resumed.rng_state().draws, 100u);
}

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  struct Case {
    std::vector<float> logits;
    int64_t expected;
  };
  const Case cases[] = {
      {{0.1f, 3.0f, -1.0f, 2.9f}, 1}, {{5.0f, 1.0f, 5.0f}, 0}, {{-kInf, -3.0f, -kInf, -2.0f}, 3},
      {{kNaN, 1.0f, kNaN, 0.5f}, 1},  {{-kInf, -kInf}, 0},     {{1.0f, kInf, 2.0f, kInf}, 1},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.temperature = 0.0f;
    Sampler sampler(params);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sampler.Sample(c.logits, {}), c.expected);
    EXPECT_EQ(sampler.rng_state().draws, 5u);  // greedy also counts its draws
  }
}

TEST(SamplerTest, GreedyAppliesPenaltiesFirst) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.presence_penalty = 1.0f;
  Sampler sampler(params);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  EXPECT_EQ(sampler.Sample(logits, {}), 0);
  EXPECT_EQ(sampler.Sample(logits, std::vector<int64_t>{0}), 1);
}

TEST(SamplerTest, ApplyPenaltiesChangesLogitsByExactAmounts) {
  // Token counts in the history: 0 twice, 1 once, 3 three times; 7 and -1 are
  // outside the vocabulary and ignored. Token 2 (logit 0) and 4 are unseen.
  const std::vector<int64_t> history = {0, 3, 1, 0, 3, 7, 3, -1};
  const std::vector<float> logits = {2.0f, -2.0f, 0.0f, 4.0f, 1.0f};
  struct Case {
    float repetition, presence, frequency;
    std::vector<float> expected;
  };
  const Case cases[] = {
      {1.0f, 0.0f, 0.0f, {2.0f, -2.0f, 0.0f, 4.0f, 1.0f}},
      {2.0f, 0.0f, 0.0f, {1.0f, -4.0f, 0.0f, 2.0f, 1.0f}},
      {0.5f, 0.0f, 0.0f, {4.0f, -1.0f, 0.0f, 8.0f, 1.0f}},
      {1.0f, 0.5f, 0.0f, {1.5f, -2.5f, 0.0f, 3.5f, 1.0f}},
      {1.0f, -0.5f, 0.0f, {2.5f, -1.5f, 0.0f, 4.5f, 1.0f}},
      {1.0f, 0.0f, 0.25f, {1.5f, -2.25f, 0.0f, 3.25f, 1.0f}},
      {2.0f, 0.5f, 0.25f, {0.0f, -4.75f, 0.0f, 0.75f, 1.0f}},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.repetition_penalty = c.repetition;
    params.presence_penalty = c.presence;
    params.frequency_penalty = c.frequency;
    std::vector<float> out = logits;
    ApplyPenalties(params, history, absl::MakeSpan(out));
    EXPECT_EQ(out, c.expected) << "r=" << c.repetition << " presence=" << c.presence
                               << " frequency=" << c.frequency;
  }
}

// A short history is counted by sorting, a long one (over 2,048 tokens) by a
// table per id: both give each token's exact penalty, and a sampler that
// meets both, one after the other, leaves no count behind.
TEST(SamplerTest, ShortAndLongHistoriesArePenalisedAlike) {
  constexpr int64_t kVocab = 5000;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> id(-3, kVocab + 3);  // a few outside the vocabulary
  SamplingParams params;
  params.repetition_penalty = 1.3f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  params.temperature = 0.0f;
  Sampler sampler(params);
  for (size_t length : {1u, 300u, 2048u, 2049u, 9000u, 40u}) {
    std::vector<int64_t> history(length);
    for (int64_t& t : history) t = id(rng);
    std::vector<float> logits(kVocab);
    for (int64_t i = 0; i < kVocab; ++i) logits[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    std::map<int64_t, int> counts;
    for (int64_t t : history) {
      if (t >= 0 && t < kVocab) ++counts[t];
    }
    std::vector<float> want = logits;
    for (const auto& [token, count] : counts) {
      float& x = want[token];
      x = x > 0.0f ? x / params.repetition_penalty : x * params.repetition_penalty;
      x -= static_cast<float>(count) * params.frequency_penalty;
      x -= params.presence_penalty;
    }
    std::vector<float> got = logits;
    ApplyPenalties(params, history, absl::MakeSpan(got));
    EXPECT_EQ(got, want) << length << " tokens";
    // Greedy after the penalties: the argmax of `want`, lowest id on ties.
    const int64_t best = std::max_element(want.begin(), want.end()) - want.begin();
    std::vector<float> row = logits;
    EXPECT_EQ(sampler.SampleInPlace(absl::MakeSpan(row), history), best) << length << " tokens";
    EXPECT_EQ(row, logits) << length << " tokens: the row was not put back";
  }
}

TEST(SamplerTest, ApplyPenaltiesKeepsZeroAndMinusInfinity) {
  SamplingParams params;
  params.repetition_penalty = 3.0f;
  params.presence_penalty = 1.0f;
  std::vector<float> logits = {0.0f, -kInf};
  ApplyPenalties(params, std::vector<int64_t>{0, 1}, absl::MakeSpan(logits));
  EXPECT_EQ(logits[0], -1.0f);  // 0 * r = 0, then the presence penalty
  EXPECT_EQ(logits[1], -kInf);
}

TEST(SamplerTest, TemperatureMatchesSoftmaxAndConcentratesOrFlattens) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  double previous_max = 1.0;
  for (float temperature : {0.25f, 1.0f, 10.0f}) {
    SamplingParams params;
    params.temperature = temperature;
    params.seed = 3;
    const std::vector<double> freq = Frequencies(params, logits);
    const std::vector<double> expected = Softmax(logits, temperature);
    for (size_t i = 0; i < logits.size(); ++i) {
      EXPECT_NEAR(freq[i], expected[i], 0.015) << "T=" << temperature << " token " << i;
    }
    EXPECT_LT(freq[2], previous_max);  // higher temperature, flatter distribution
    previous_max = freq[2];
  }
  EXPECT_LT(previous_max, 0.40);  // T = 10 is close to uniform
}

TEST(SamplerTest, TopKOnlyYieldsTheKLargest) {
  const std::vector<float> logits = {1.0f, 3.0f, 0.5f, 2.5f, 2.0f, -1.0f};
  SamplingParams params;
  params.top_k = 2;
  const std::vector<double> freq = Frequencies(params, logits);
  const std::vector<double> kept = Softmax({3.0f, 2.5f}, 1.0);
  EXPECT_NEAR(freq[1], kept[0], 0.015);
  EXPECT_NEAR(freq[3], kept[1], 0.015);
  for (int other : {0, 2, 4, 5}) EXPECT_EQ(freq[other], 0.0) << other;
}

TEST(SamplerTest, TopKTiesGoToTheLowestIds) {
  SamplingParams params;
  params.top_k = 2;
  Sampler sampler(params);
  const std::vector<TokenProbability> dist = sampler.Probabilities({1.0f, 2.0f, 2.0f, 2.0f}, {});
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].token, 1);
  EXPECT_EQ(dist[1].token, 2);
  EXPECT_DOUBLE_EQ(dist[0].probability, 0.5);
}

std::set<int64_t> Support(const std::vector<TokenProbability>& dist) {
  std::set<int64_t> tokens;
  for (const TokenProbability& t : dist) tokens.insert(t.token);
  return tokens;
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = LogitsFor({0.1, 0.5, 0.15, 0.25});
  struct Case {
    float top_p;
    std::set<int64_t> kept;
  };
  const Case cases[] = {
      {0.45f, {1}}, {0.7f, {1, 3}}, {0.8f, {1, 3, 2}}, {0.95f, {0, 1, 2, 3}}, {1.0f, {0, 1, 2, 3}},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.top_p = c.top_p;
    Sampler sampler(params);
    const std::vector<TokenProbability> dist = sampler.Probabilities(logits, {});
    EXPECT_EQ(Support(dist), c.kept) << "top_p=" << c.top_p;
    const std::vector<double> freq = Frequencies(params, logits);
    for (int64_t token = 0; token < 4; ++token) {
      EXPECT_EQ(freq[token] > 0.0, c.kept.count(token) == 1) << "top_p=" << c.top_p << " " << token;
    }
  }
}

TEST(SamplerTest, TopPRenormalisesAfterTopK) {
  // Alone, top_p = 0.5 keeps {0.4, 0.3}; after top_k = 2 renormalises to
  // {0.57, 0.43}, the first token already reaches it.
  const std::vector<float> logits = LogitsFor({0.4, 0.3, 0.2, 0.1});
  SamplingParams params;
  params.top_p = 0.5f;
  EXPECT_EQ(Support(Sampler(params).Probabilities(logits, {})), (std::set<int64_t>{0, 1}));
  params.top_k = 2;
  EXPECT_EQ(Support(Sampler(params).Probabilities(logits, {})), (std::set<int64_t>{0}));
}

TEST(SamplerTest, MinPDropsTokensBelowTheScaledMax) {
  const std::vector<float> logits = LogitsFor({0.5, 0.1, 0.25, 0.15});
  struct Case {
    float min_p;
    std::set<int64_t> kept;
  };
  const Case cases[] = {
      {0.0f, {0, 1, 2, 3}}, {0.15f, {0, 1, 2, 3}}, {0.25f, {0, 2, 3}},
      {0.4f, {0, 2}},       {0.6f, {0}},           {1.0f, {0}},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.min_p = c.min_p;
    Sampler sampler(params);
    const std::vector<TokenProbability> dist = sampler.Probabilities(logits, {});
    EXPECT_EQ(Support(dist), c.kept) << "min_p=" << c.min_p;
    double total = 0.0;
    for (const TokenProbability& t : dist) total += t.probability;
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
}

TEST(SamplerTest, NeverReturnsAZeroProbabilityToken) {
  struct Case {
    std::vector<float> logits;
    float temperature;
    std::set<int64_t> allowed;
  };
  const Case cases[] = {
      {{-kInf, 0.0f, -kInf, 0.0f}, 1.0f, {1, 3}},
      {{kNaN, 1.0f, -kInf}, 2.0f, {1}},
      {{1.0f, kInf, 3.0f, kInf}, 1.0f, {1, 3}},
      // Everything but the max underflows at this temperature.
      {{10.0f, 9.0f, 0.0f}, 1e-6f, {0}},
      {{-kInf, -kInf}, 1.0f, {0}},  // no distribution at all: documented fallback
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.temperature = c.temperature;
    Sampler sampler(params);
    std::set<int64_t> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(sampler.Sample(c.logits, {}));
    EXPECT_EQ(seen, c.allowed);
  }
}

// `error` empty: valid; else a substring the message must contain.
void ExpectValidation(const SamplingParams& params, const std::string& error,
                      const std::string& what) {
  const absl::Status status = ValidateSamplingParams(params, SamplingLimits());
  if (error.empty()) {
    EXPECT_TRUE(status.ok()) << what << ": " << status;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(std::string(status.message()).find(error), std::string::npos)
        << what << ": " << status << " does not contain " << error;
  }
}

// A temperature above 0 whose inverse overflows a float (a fuzzer found
// 7.9e-42 with top-k, min-p and penalties) is the limit it tends to: the top
// token, every draw, whatever else is on.
TEST(SamplerTest, ATemperatureWhoseInverseOverflowsKeepsTheTopToken) {
  std::vector<float> logits = StepLogits(3);
  const int64_t top = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (int32_t top_k : {0, 41}) {
    for (float top_p : {1.0f, 0.3f}) {
      SamplingParams params;
      params.temperature = 7.9e-42f;
      params.top_k = top_k;
      params.top_p = top_p;
      params.min_p = 0.05f;
      params.seed = 3;
      Sampler sampler(params);
      for (int i = 0; i < 20; ++i) {
        EXPECT_EQ(sampler.Sample(logits, {}), top) << "top_k " << top_k << ", top_p " << top_p;
      }
      const std::vector<TokenProbability> dist = sampler.Probabilities(logits, {});
      ASSERT_EQ(dist.size(), 1u);
      EXPECT_EQ(dist[0].token, top);
    }
  }
}

TEST(SamplerTest, ValidationChecksEveryBoundAndOneStepPast) {
  struct FloatField {
    float SamplingParams::*field;
    const char* name;
    float lo, hi;
    bool lo_open;
    const char* bound;
  };
  const FloatField floats[] = {
      {&SamplingParams::temperature, "temperature", 0.0f, 100.0f, false, "[0, 100]"},
      {&SamplingParams::top_p, "top_p", 0.0f, 1.0f, true, "(0, 1]"},
      {&SamplingParams::min_p, "min_p", 0.0f, 1.0f, false, "[0, 1]"},
      {&SamplingParams::repetition_penalty, "repetition_penalty", 0.0f, 10.0f, true, "(0, 10]"},
      {&SamplingParams::presence_penalty, "presence_penalty", -2.0f, 2.0f, false, "[-2, 2]"},
      {&SamplingParams::frequency_penalty, "frequency_penalty", -2.0f, 2.0f, false, "[-2, 2]"},
  };
  for (const FloatField& f : floats) {
    const std::string error = std::string(f.name) + " = ";
    const std::string bound = std::string(" is outside ") + f.bound;
    const struct {
      float value;
      bool valid;
    } values[] = {
        {f.lo, !f.lo_open},
        {std::nextafter(f.lo, kInf), true},
        {std::nextafter(f.lo, -kInf), false},
        {f.hi, true},
        {std::nextafter(f.hi, kInf), false},
        {kNaN, false},
        {kInf, false},
        {-kInf, false},
    };
    for (const auto& v : values) {
      SamplingParams params;
      params.*f.field = v.value;
      const std::string what = std::string(f.name) + " = " + std::to_string(v.value);
      ExpectValidation(params, v.valid ? "" : error, what);
      if (!v.valid) ExpectValidation(params, bound, what);
    }
  }

  struct IntField {
    int32_t SamplingParams::*field;
    const char* name;
    int32_t lo, hi;
  };
  const IntField ints[] = {{&SamplingParams::top_k, "top_k", 0, 258},
                           {&SamplingParams::max_new_tokens, "max_new_tokens", 1, 4096}};
  for (const IntField& f : ints) {
    const std::string bound =
        " is outside [" + std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]";
    for (int32_t value : {f.lo - 1, f.lo, f.hi, f.hi + 1}) {
      SamplingParams params;
      params.*f.field = value;
      const bool valid = value >= f.lo && value <= f.hi;
      const std::string error = std::string(f.name) + " = " + std::to_string(value) + bound;
      ExpectValidation(params, valid ? "" : error, error);
    }
  }
}

TEST(SamplerTest, ValidationMessagesNameFieldAndBound) {
  struct Case {
    void (*set)(SamplingParams&);
    std::string error;  // empty: valid
  };
  const Case cases[] = {
      {[](SamplingParams&) {}, ""},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p = 1.5 is outside (0, 1]"},
      {[](SamplingParams& p) { p.temperature = std::nextafter(100.0f, 200.0f); },
       "temperature = 100.00001 is outside [0, 100]"},
      {[](SamplingParams& p) { p.temperature = kNaN; }, "temperature = nan is outside [0, 100]"},
      {[](SamplingParams& p) { p.presence_penalty = -kInf; },
       "presence_penalty = -inf is outside [-2, 2]"},
      {[](SamplingParams& p) { p.top_k = 259; }, "top_k = 259 is outside [0, 258]"},
      {[](SamplingParams& p) { p.stop.assign(8, "x"); }, ""},
      {[](SamplingParams& p) { p.stop.assign(9, "x"); }, "stop has 9 sequences; at most 8"},
      {[](SamplingParams& p) {
         p.stop = {"a", ""};
       },
       "stop[1] is empty"},
      {[](SamplingParams& p) { p.stop = {std::string(256, 'a')}; }, ""},
      {[](SamplingParams& p) {
         p.stop = {"a", std::string(257, 'a')};
       },
       "stop[1] is 257 bytes; at most 256"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    SamplingParams params;
    cases[i].set(params);
    ExpectValidation(params, cases[i].error, "case " + std::to_string(i));
  }
}

}  // namespace
}  // namespace linserve
