// The 8- and 4-bit weight loops (engine/cpu/quantized_kernel.h) against the
// plain reference loop, bit for bit, at shapes around the groups, the
// 16-output panels and the tiles (4 rows x 3 panels; one row, a panel at a
// time, four groups in flight),
// for every row count from 1 to 130; and the quantization itself: the half
// conversion, the error bounds of the weights' codes, the activations' codes,
// and what is refused.

#include "engine/cpu/quantized_kernel.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cpu/cpu_kernels.h"

namespace linserve {
namespace {

constexpr WeightQuantization kKinds[] = {WeightQuantization::kInt8, WeightQuantization::kInt4};
constexpr int64_t kGroups[] = {32, 64};

std::string Describe(const QuantizedShape& shape) {
  return std::string(WeightQuantizationName(shape.kind)) + " g" + std::to_string(shape.group) +
         " " + std::to_string(shape.out) + "x" + std::to_string(shape.in);
}

std::vector<float> Normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Equal bits, or both NaN (the loops may carry different NaN payloads).
bool SameValues(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

// A quantized matrix and quantized rows of activations, in vectors.
struct Problem {
  QuantizedShape shape;
  std::vector<float> w;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  int64_t rows = 0;
  std::vector<float> x;
  std::vector<int8_t> xq;
  std::vector<float> xs;
  std::vector<int32_t> xsum;

  Problem(const QuantizedShape& s, int64_t row_count, uint32_t seed) : shape(s), rows(row_count) {
    w = Normal(shape.out * shape.in, seed);
    codes.resize(shape.code_bytes());
    scales.resize(shape.scale_count());
    EXPECT_TRUE(QuantizeWeights(shape, w.data(), shape.in, codes.data(), scales.data()));
    SetInputs(Normal(rows * shape.in, seed + 1));
  }

  void SetInputs(std::vector<float> inputs) {
    x = std::move(inputs);
    xq.assign(rows * shape.padded_in(), 0);
    xs.assign(rows * shape.groups(), 0.0f);
    xsum.assign(rows * shape.groups(), 0);
    QuantizeActivations(shape, x.data(), shape.in, rows, xq.data(), xs.data(), xsum.data());
  }

  QuantizedProductArgs Args(float* y, QuantizedEpilogue epilogue) const {
    QuantizedProductArgs args;
    args.shape = shape;
    args.codes = codes.data();
    args.scales = scales.data();
    args.x = {xq.data(), xs.data(), xsum.data()};
    args.rows = rows;
    args.y = y;
    args.y_stride = shape.out;
    args.epilogue = epilogue;
    return args;
  }

  std::vector<float> Reference(QuantizedEpilogue epilogue) const {
    std::vector<float> y(rows * shape.out);
    QuantizedProductReference(Args(y.data(), epilogue));
    return y;
  }

  // The family's loop over every panel, in calls of `split` panels.
  template <class Loop>
  std::vector<float> Run(Loop loop, QuantizedEpilogue epilogue, int64_t split = 0) const {
    std::vector<float> y(rows * shape.out, -1.0f);
    const QuantizedProductArgs args = Args(y.data(), epilogue);
    const int64_t panels = shape.panels();
    const int64_t step = split > 0 ? split : panels;
    for (int64_t p = 0; p < panels; p += step) loop(args, p, std::min(panels, p + step));
    return y;
  }
};

bool HasVnni() { return ActiveCpuHasAvx512Vnni(); }

TEST(QuantizedShapeTest, SizesAndNames) {
  QuantizedShape shape{37, 100, 32, WeightQuantization::kInt8};
  EXPECT_EQ(shape.panels(), 3);
  EXPECT_EQ(shape.groups(), 4);
  EXPECT_EQ(shape.padded_in(), 128);
  EXPECT_EQ(shape.code_bytes(), 3 * 4 * 32 * 16);
  EXPECT_EQ(shape.scale_count(), 3 * 4 * 16);
  EXPECT_EQ(shape.zero_point(), 128);
  EXPECT_TRUE(IsValidQuantizedShape(shape));
  shape.kind = WeightQuantization::kInt4;
  shape.group = 64;
  EXPECT_EQ(shape.code_bytes(), 3 * 2 * 64 * 16 / 2);
  EXPECT_EQ(shape.zero_point(), 8);
  EXPECT_TRUE(IsValidQuantizedShape(shape));
  EXPECT_FALSE(IsValidQuantizedShape({37, 100, 16, WeightQuantization::kInt8}));
  EXPECT_FALSE(IsValidQuantizedShape({37, 100, 32, WeightQuantization::kNone}));
  EXPECT_FALSE(IsValidQuantizedShape({0, 100, 32, WeightQuantization::kInt8}));
  EXPECT_FALSE(IsValidQuantizedShape({37, 0, 32, WeightQuantization::kInt4}));
  EXPECT_STREQ(WeightQuantizationName(WeightQuantization::kInt8), "int8");
  EXPECT_STREQ(WeightQuantizationName(WeightQuantization::kInt4), "int4");
  EXPECT_STREQ(WeightQuantizationName(WeightQuantization::kNone), "none");
}

TEST(HalfTest, EveryHalfSurvivesTheRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = HalfToFloat(half);
    if ((half & 0x7C00) == 0x7C00 && (half & 0x03FF) != 0) {
      EXPECT_TRUE(std::isnan(value)) << bits;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(value)))) << bits;
      continue;
    }
    EXPECT_EQ(FloatToHalf(value), half) << bits;
  }
}

TEST(HalfTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, to even
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // rounds past the largest half: Inf
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie, to even: zero
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);  // the largest subnormal
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0xFC00)) && HalfToFloat(0xFC00) < 0);
}

// F16C is CPUID leaf 1, ECX bit 29 (not a name __builtin_cpu_supports knows
// on every compiler).
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

__attribute__((target("f16c"))) uint16_t HardwareHalf(float value) {
  return static_cast<uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

TEST(HalfTest, AgreesWithTheF16cInstruction) {
  if (!HasF16c()) GTEST_SKIP() << "this CPU has no F16C";
  std::mt19937 rng(5);
  for (int i = 0; i < 2000000; ++i) {
    // Floats of every exponent a half can reach, and past it both ways.
    const uint32_t bits = (rng() & 0x807FFFFFu) | ((95 + rng() % 66) << 23);
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    ASSERT_EQ(FloatToHalf(value), HardwareHalf(value)) << bits;
  }
}

// The portable loop's fused multiply-add against std::fma, on cases built to
// fall next to a float's rounding midpoint, where adding in double and
// rounding to float (rounding twice) gives another float.
TEST(FusedMultiplyAddTest, RoundsOnceAsStdFma) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  int64_t twice_rounded_differs = 0;
  auto check = [&](float a, float b, float c) {
    const float want = std::fma(a, b, c);
    const float got = FusedMultiplyAdd(a, b, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << a << " " << b << " " << c;
      return;
    }
    ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
        << std::hexfloat << a << " * " << b << " + " << c << ": " << got << ", not " << want;
    const float twice = static_cast<float>(static_cast<double>(a) * b + c);
    twice_rounded_differs += std::memcmp(&twice, &want, sizeof(float)) != 0;
  };
  for (int i = 0; i < 300000; ++i) {
    // a b about half an ulp of c, with low bits past double's reach.
    const int exponent = static_cast<int>(rng() % 40) - 20;
    const float c = std::ldexp(unit(rng), exponent) * (rng() % 2 ? 1.0f : -1.0f);
    const float a = std::ldexp(1.0f + static_cast<float>(rng() % 64) * 0x1p-23f,
                               exponent - 24 - static_cast<int>(rng() % 3));
    const float b = (1.0f + static_cast<float>(static_cast<int>(rng() % 2048) - 1024) * 0x1p-23f) *
                    (rng() % 2 ? 1.0f : -1.0f);
    check(a, b, c);
    // Any bits: subnormals, Inf, NaN, overflow.
    uint32_t bits[3] = {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()),
                        static_cast<uint32_t>(rng())};
    float any[3];
    std::memcpy(any, bits, sizeof(any));
    check(any[0], any[1], any[2]);
    // Cancellation, and results below the normal range.
    const float x = unit(rng), y = unit(rng);
    check(x, y, -(x * y));
    check(std::ldexp(x, -70), std::ldexp(y, -70), std::ldexp(unit(rng), -140));
  }
  EXPECT_GT(twice_rounded_differs, 0) << "no case next to a midpoint";
}

// |w - s q| <= |s| / 2 (and the float rounding of w / s and s q), except
// int4 values of the opposite sign to the group's extreme past 7.5 steps,
// clamped to 7: within |s|.
TEST(QuantizeWeightsTest, ErrorBoundsAndTheExtremes) {
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : kGroups) {
      const QuantizedShape shape{37, 100, group, kind};
      std::vector<float> w = Normal(shape.out * shape.in, 11);
      w[5] = 0.0f;
      // A whole group of zeros in output 3.
      for (int64_t k = 0; k < group; ++k) w[3 * shape.in + k] = 0.0f;
      std::vector<uint8_t> codes(shape.code_bytes());
      std::vector<uint16_t> scales(shape.scale_count());
      ASSERT_TRUE(QuantizeWeights(shape, w.data(), shape.in, codes.data(), scales.data()));
      const float top = kind == WeightQuantization::kInt4 ? -8.0f : 127.0f;
      for (int64_t o = 0; o < shape.out; ++o) {
        for (int64_t g = 0; g < shape.groups(); ++g) {
          const float s = HalfToFloat(scales[((o / 16) * shape.groups() + g) * 16 + o % 16]);
          int64_t extreme = -1;
          for (int64_t k = g * group; k < std::min(shape.in, (g + 1) * group); ++k) {
            if (extreme < 0 ||
                std::fabs(w[o * shape.in + k]) > std::fabs(w[o * shape.in + extreme])) {
              extreme = k;
            }
            const float value = w[o * shape.in + k];
            const float got = DequantizedWeight(shape, codes.data(), scales.data(), o, k);
            const float steps = s == 0.0f ? 0.0f : value / s;
            const float bound =
                (steps > 7.5f && kind == WeightQuantization::kInt4 ? 1.0f : 0.5f) * std::fabs(s) +
                1e-6f * std::fabs(value);
            EXPECT_LE(std::fabs(value - got), bound)
                << Describe(shape) << " [" << o << "][" << k << "]";
          }
          if (s == 0.0f) {
            EXPECT_EQ(o, 3) << "only the zeros have no scale";
            continue;
          }
          // The extreme is the scale's whole range: -8 steps (int4), 127
          // steps of its sign (int8).
          const float got = DequantizedWeight(shape, codes.data(), scales.data(), o, extreme);
          const float sign =
              kind == WeightQuantization::kInt8 && w[o * shape.in + extreme] < 0 ? -1 : 1;
          EXPECT_EQ(got, s * top * sign) << Describe(shape) << " [" << o << "][" << extreme << "]";
        }
      }
      // Outputs past `out` and inputs past `in`: code z, no scale.
      for (int64_t k = 0; k < shape.padded_in(); ++k) {
        for (int64_t o = 0; o < shape.panels() * 16; ++o) {
          if (o < shape.out && k < shape.in) continue;
          EXPECT_EQ(DequantizedWeight(shape, codes.data(), scales.data(), o, k), 0.0f);
        }
      }
      for (int64_t g = 0; g < shape.groups(); ++g) {
        EXPECT_EQ(scales[((shape.out / 16) * shape.groups() + g) * 16 + 15], 0);
      }
    }
  }
}

TEST(QuantizeWeightsTest, RefusesWhatNoHalfScaleHolds) {
  for (WeightQuantization kind : kKinds) {
    const QuantizedShape shape{20, 40, 32, kind};
    std::vector<uint8_t> codes(shape.code_bytes());
    std::vector<uint16_t> scales(shape.scale_count());
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 1e30f}) {
      std::vector<float> w = Normal(shape.out * shape.in, 12);
      w[17 * shape.in + 35] = bad;
      EXPECT_FALSE(QuantizeWeights(shape, w.data(), shape.in, codes.data(), scales.data()))
          << WeightQuantizationName(kind) << " " << bad;
    }
    // Values too small for a half scale are zeros.
    std::vector<float> tiny(shape.out * shape.in, 1e-30f);
    ASSERT_TRUE(QuantizeWeights(shape, tiny.data(), shape.in, codes.data(), scales.data()));
    EXPECT_EQ(DequantizedWeight(shape, codes.data(), scales.data(), 0, 0), 0.0f);
  }
}

TEST(QuantizeActivationsTest, CodesScalesAndSums) {
  const QuantizedShape shape{16, 70, 32, WeightQuantization::kInt8};
  std::vector<float> x = Normal(2 * shape.in, 13);
  for (int64_t k = 32; k < 64; ++k) x[k] = 0.0f;  // row 0, group 1: zeros
  x[shape.in + 3] = std::numeric_limits<float>::quiet_NaN();
  const int64_t groups = shape.groups();
  std::vector<int8_t> xq(2 * shape.padded_in(), 99);
  std::vector<float> xs(2 * groups);
  std::vector<int32_t> xsum(2 * groups);
  QuantizeActivations(shape, x.data(), shape.in, 2, xq.data(), xs.data(), xsum.data());
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      float largest = 0.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < 32; ++i) {
        const int64_t k = g * 32 + i;
        const int8_t q = xq[r * shape.padded_in() + k];
        sum += q;
        if (k >= shape.in || std::isnan(x[r * shape.in + k])) {
          EXPECT_EQ(q, 0) << r << " " << k;
          continue;
        }
        largest = std::max(largest, std::fabs(x[r * shape.in + k]));
      }
      EXPECT_EQ(xs[r * groups + g], largest / 127.0f);
      EXPECT_EQ(xsum[r * groups + g], sum);
      for (int64_t i = 0; i < 32 && g * 32 + i < shape.in; ++i) {
        const float v = x[r * shape.in + g * 32 + i];
        if (std::isnan(v) || largest == 0.0f) continue;
        EXPECT_LE(std::fabs(v / xs[r * groups + g] - xq[r * shape.padded_in() + g * 32 + i]),
                  0.5f + 1e-4f);
        if (std::fabs(v) == largest) {
          EXPECT_EQ(std::abs(xq[r * shape.padded_in() + g * 32 + i]), 127);
        }
      }
    }
  }
  EXPECT_EQ(xs[1], 0.0f);
  EXPECT_EQ(xsum[1], 0);
}

TEST(QuantizeActivationsTest, TheVnniLoopGivesTheSameBits) {
  if (!HasVnni()) GTEST_SKIP() << "no AVX-512 VNNI in force";
  for (int64_t group : kGroups) {
    for (int64_t in : {1, 15, 16, 17, 31, 32, 33, 100, 768, 1000}) {
      const QuantizedShape shape{16, in, group, WeightQuantization::kInt8};
      const int64_t rows = 5;
      std::vector<float> x = Normal(rows * in, 14);
      x[0] = std::numeric_limits<float>::quiet_NaN();
      if (in > 3) x[in + 2] = std::numeric_limits<float>::infinity();
      if (in > 40) {
        for (int64_t k = 0; k < in; ++k) x[2 * in + k] = 0.0f;
        // A denormal largest value: an infinite inverse.
        for (int64_t k = 0; k < in; ++k) x[3 * in + k] = k == 7 ? 1e-40f : 0.0f;
      }
      const int64_t groups = shape.groups(), padded = shape.padded_in();
      std::vector<int8_t> q1(rows * padded, 1), q2(rows * padded, 2);
      std::vector<float> s1(rows * groups), s2(rows * groups);
      std::vector<int32_t> m1(rows * groups), m2(rows * groups);
      QuantizeActivations(shape, x.data(), in, rows, q1.data(), s1.data(), m1.data());
      QuantizeActivationsVnni(shape, x.data(), in, rows, q2.data(), s2.data(), m2.data());
      EXPECT_EQ(q1, q2) << group << " " << in;
      EXPECT_TRUE(SameValues(s1, s2)) << group << " " << in;
      EXPECT_EQ(m1, m2) << group << " " << in;
    }
  }
}

// Around every edge: outputs around the panels and the 3- and 4-panel
// tiles, inputs around the groups; the last two have whole runs of the
// one-row loop's groups in flight (8 of 4-bit, 4 of 8-bit) and a tail.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1},    {15, 31}, {16, 32},  {17, 33},
                                               {37, 100}, {48, 64}, {65, 127}, {113, 200},
                                               {200, 96}, {33, 300}, {20, 1000}};

TEST(QuantizedProductTest, EveryFamilyEqualsTheReferenceBitForBit) {
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : kGroups) {
      for (const auto& [out, in] : kShapes) {
        const QuantizedShape shape{out, in, group, kind};
        for (int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 13}) {
          const Problem problem(shape, rows, 20 + static_cast<uint32_t>(rows));
          for (QuantizedEpilogue epilogue :
               {QuantizedEpilogue::kNone, QuantizedEpilogue::kReluSquared}) {
            const std::vector<float> expected = problem.Reference(epilogue);
            const std::string what = Describe(shape) + " rows " + std::to_string(rows) +
                                     (epilogue == QuantizedEpilogue::kNone ? "" : " relu^2");
            EXPECT_TRUE(SameBits(problem.Run(QuantizedProductPortable, epilogue), expected))
                << "portable " << what;
            if (HasVnni()) {
              EXPECT_TRUE(SameBits(problem.Run(QuantizedProductVnni, epilogue), expected))
                  << "vnni " << what;
            }
          }
        }
      }
    }
  }
}

// Every row count from 1 to 130 (the 4-row tiles, the 16-row blocks and
// past), a matrix of 5 panels with the last one partial: each against the
// first rows of the reference's 130.
TEST(QuantizedProductTest, EveryRowCountUpTo130) {
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : kGroups) {
      const QuantizedShape shape{70, 150, group, kind};
      Problem problem(shape, 130, 40);
      for (QuantizedEpilogue epilogue :
           {QuantizedEpilogue::kNone, QuantizedEpilogue::kReluSquared}) {
        problem.rows = 130;
        const std::vector<float> all = problem.Reference(epilogue);
        for (int64_t rows = 1; rows <= 130; ++rows) {
          problem.rows = rows;
          const std::vector<float> expected(all.begin(), all.begin() + rows * shape.out);
          ASSERT_TRUE(SameBits(problem.Run(QuantizedProductPortable, epilogue), expected))
              << "portable " << Describe(shape) << " rows " << rows;
          if (HasVnni()) {
            ASSERT_TRUE(SameBits(problem.Run(QuantizedProductVnni, epilogue), expected))
                << "vnni " << Describe(shape) << " rows " << rows;
          }
        }
      }
    }
  }
}

// Panels split over calls (as over threads) give the same bits; and a row's
// bits are its own whatever the rows beside it.
TEST(QuantizedProductTest, PanelSplitsAndNeighbourRowsChangeNoBits) {
  for (WeightQuantization kind : kKinds) {
    const QuantizedShape shape{200, 96, 32, kind};  // 13 panels
    const Problem problem(shape, 11, 50);
    for (QuantizedEpilogue epilogue : {QuantizedEpilogue::kNone, QuantizedEpilogue::kReluSquared}) {
      const std::vector<float> whole = problem.Reference(epilogue);
      for (int64_t split : {1, 2, 5, 12}) {
        EXPECT_TRUE(SameBits(problem.Run(QuantizedProductPortable, epilogue, split), whole));
        if (HasVnni()) {
          EXPECT_TRUE(SameBits(problem.Run(QuantizedProductVnni, epilogue, split), whole));
        }
      }
      if (!HasVnni()) continue;
      for (int64_t r = 0; r < problem.rows; ++r) {
        Problem one = problem;
        one.rows = 1;
        one.xq.erase(one.xq.begin(), one.xq.begin() + r * shape.padded_in());
        one.xs.erase(one.xs.begin(), one.xs.begin() + r * shape.groups());
        one.xsum.erase(one.xsum.begin(), one.xsum.begin() + r * shape.groups());
        const std::vector<float> alone = one.Run(QuantizedProductVnni, epilogue);
        EXPECT_TRUE(SameBits(alone, std::vector<float>(whole.begin() + r * shape.out,
                                                       whole.begin() + (r + 1) * shape.out)))
            << "row " << r;
      }
    }
  }
}

TEST(QuantizedProductTest, NonFiniteActivationsRunAndAgree) {
  for (WeightQuantization kind : kKinds) {
    const QuantizedShape shape{40, 80, 32, kind};
    Problem problem(shape, 6, 60);
    std::vector<float> x = problem.x;
    x[3] = std::numeric_limits<float>::quiet_NaN();
    x[80 + 40] = std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < 80; ++k) x[2 * 80 + k] = std::numeric_limits<float>::quiet_NaN();
    problem.SetInputs(x);
    for (QuantizedEpilogue epilogue : {QuantizedEpilogue::kNone, QuantizedEpilogue::kReluSquared}) {
      const std::vector<float> expected = problem.Reference(epilogue);
      EXPECT_TRUE(SameValues(problem.Run(QuantizedProductPortable, epilogue), expected));
      if (HasVnni()) EXPECT_TRUE(SameValues(problem.Run(QuantizedProductVnni, epilogue), expected));
      // A row of NaN quantizes to zeros: its outputs are 0.
      for (int64_t o = 0; o < shape.out; ++o) EXPECT_EQ(expected[2 * shape.out + o], 0.0f);
    }
  }
}

// The product is close to the float one it stands for: each group's error
// is bounded by the weights' and activations' half steps.
TEST(QuantizedProductTest, CloseToTheFloatProduct) {
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : kGroups) {
      const QuantizedShape shape{64, 256, group, kind};
      const Problem problem(shape, 4, 70);
      const std::vector<float> y = problem.Reference(QuantizedEpilogue::kNone);
      double worst = 0.0, scale = 0.0;
      for (int64_t r = 0; r < problem.rows; ++r) {
        for (int64_t o = 0; o < shape.out; ++o) {
          double exact = 0.0;
          for (int64_t k = 0; k < shape.in; ++k) {
            exact += static_cast<double>(problem.x[r * shape.in + k]) * problem.w[o * shape.in + k];
          }
          worst = std::max(worst, std::fabs(exact - y[r * shape.out + o]));
          scale = std::max(scale, std::fabs(exact));
        }
      }
      // Unit normals over 256 inputs: sums of about 16; int4 is coarser.
      EXPECT_LT(worst, kind == WeightQuantization::kInt4 ? 0.25 * scale : 0.03 * scale)
          << Describe(shape) << ": " << worst << " of " << scale;
    }
  }
}

}  // namespace
}  // namespace linserve
