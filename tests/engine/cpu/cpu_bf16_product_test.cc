// The packed bfloat16 product (engine/cpu/cpu_bf16_product.h) against the same
// product in float64 from the bfloat16-rounded inputs: row counts around the
// AVX-512 loop's 4-row tiles and the AMX loop's 16- and 32-row ones, outputs
// around their 80- and 32-output tiles, inputs that are not whole AMX tiles
// of 32, one thread and several. ctest runs the binary twice, by default
// and with LINSERVE_CPU_KERNELS=amx, so that a machine with AMX checks both
// loops.

#include "engine/cpu/cpu_bf16_product.h"

#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"

namespace linserve {
namespace {

TEST(CpuBf16ProductTest, PacksOnlyWholeBlocks) {
  EXPECT_TRUE(CanPackBf16(16, 2));
  EXPECT_TRUE(CanPackBf16(65536, 768));
  EXPECT_FALSE(CanPackBf16(24, 64));  // outputs not a multiple of 16
  EXPECT_FALSE(CanPackBf16(32, 63));  // inputs odd
  EXPECT_FALSE(CanPackBf16(0, 64));
  const torch::Tensor packed = PackBf16(torch::randn({48, 10}).to(torch::kBFloat16));
  EXPECT_TRUE(IsPackedBf16(packed));
  EXPECT_EQ(packed.sizes(), torch::IntArrayRef({3, 5, 16, 2}));
  EXPECT_FALSE(IsPackedBf16(torch::zeros({3, 5, 16, 2})));  // float32
  EXPECT_THROW(PackBf16(torch::zeros({24, 64}, torch::kBFloat16)), c10::Error);
}

TEST(CpuBf16ProductTest, EqualsTheProductInFloat64) {
  if (!HasCpuBf16Product()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  torch::manual_seed(5);
  std::printf("kernel family in force: %s\n", CpuKernelsName(ActiveCpuKernels()));
  for (int64_t rows : {1, 3, 4, 5, 15, 16, 17, 32, 33, 64, 70}) {
    for (const auto& [out, in] : {std::pair<int64_t, int64_t>{16, 2}, {48, 64}, {64, 768},
                                  {80, 30}, {48, 100}, {272, 3072}}) {
      const torch::Tensor weight = torch::randn({out, in}).to(torch::kBFloat16);
      const torch::Tensor x = torch::randn({rows, in});
      const torch::Tensor expected = torch::matmul(
          x.to(torch::kBFloat16).to(torch::kFloat64), weight.to(torch::kFloat64).t());
      const torch::Tensor got = PackedBf16Product(PackBf16(weight), x);
      ASSERT_EQ(got.sizes(), torch::IntArrayRef({rows, out}));
      EXPECT_EQ(got.scalar_type(), torch::kFloat32);
      // float32 sums of `in` products of unit-scale values: a few ulps of
      // sqrt(in).
      const double tolerance = 1e-5 * std::sqrt(static_cast<double>(in));
      EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), tolerance)
          << rows << " rows, " << out << " x " << in;
    }
  }
}

// The bench's shape class of 1,024 rows (a prefill), 768 x 768: the AMX
// loop's ranges of rows that stay in L2, each several row tiles.
TEST(CpuBf16ProductTest, ManyRowsEqualTheProductInFloat64) {
  if (!HasCpuBf16Product()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  torch::manual_seed(6);
  const torch::Tensor weight = torch::randn({768, 768}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({1024, 768});
  const torch::Tensor expected =
      torch::matmul(x.to(torch::kBFloat16).to(torch::kFloat64), weight.to(torch::kFloat64).t());
  const torch::Tensor got = PackedBf16Product(PackBf16(weight), x);
  EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(),
            1e-5 * std::sqrt(768.0));
}

// The AMX family's bits are its own (its tile unit sums 32 inputs in its
// own order): against the AVX-512 loop's they differ by float32 rounding
// alone, each being within 1e-5 sqrt(in) of float64, so 2e-5 sqrt(in) apart.
TEST(CpuBf16ProductTest, AmxAndAvx512AgreeWithinRounding) {
  if (!ActiveCpuHasAmx()) GTEST_SKIP() << "the AMX family is not in force (no AMX, or not named)";
  torch::manual_seed(7);
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{768, 768}, {64, 100}}) {
    const torch::Tensor packed = PackBf16(torch::randn({out, in}).to(torch::kBFloat16));
    const torch::Tensor x = torch::randn({20, in});
    const torch::Tensor amx = PackedBf16ProductWith(Bf16Loop::kAmx, packed, x);
    const torch::Tensor avx512 = PackedBf16ProductWith(Bf16Loop::kAvx512, packed, x);
    const double difference = (amx - avx512).abs().max().item<double>();
    EXPECT_LT(difference, 2e-5 * std::sqrt(static_cast<double>(in))) << out << " x " << in;
    std::printf("%ld x %ld: AMX - AVX-512 at most %.3g, %.1f%% of outputs differ\n",
                static_cast<long>(out), static_cast<long>(in), difference,
                100.0 * (amx != avx512).to(torch::kFloat64).mean().item<double>());
  }
}

TEST(CpuBf16ProductTest, KeepsLeadingDimensions) {
  if (!HasCpuBf16Product()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const torch::Tensor weight = torch::randn({32, 8}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({2, 3, 8});
  const torch::Tensor got = PackedBf16Product(PackBf16(weight), x);
  ASSERT_EQ(got.sizes(), torch::IntArrayRef({2, 3, 32}));
  EXPECT_TRUE(torch::equal(got[1][2], PackedBf16Product(PackBf16(weight), x[1][2])));
}

TEST(CpuBf16ProductTest, ReluSquaredEpilogueIsTheActivationOfTheSums) {
  if (!HasCpuBf16Product()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const torch::Tensor packed = PackBf16(torch::randn({96, 40}).to(torch::kBFloat16));
  const torch::Tensor x = torch::randn({6, 40});
  const torch::Tensor sums = PackedBf16Product(packed, x);
  ASSERT_TRUE((sums < 0).any().item<bool>());
  EXPECT_TRUE(torch::equal(PackedBf16Product(packed, x, Bf16Epilogue::kReluSquared),
                           torch::relu(sums).square()));
}

// Each output is summed in one order whatever else is computed: a row alone
// gets the bits it gets in a batch, and threads change nothing.
// docs/DESIGN.md, "What is bit-identical", row "one product".
TEST(CpuBf16ProductTest, EachRowHasTheSameBitsWhateverTheOthersAndThreads) {
  if (!HasCpuBf16Product()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const torch::Tensor packed = PackBf16(torch::randn({4096, 96}).to(torch::kBFloat16));
  const torch::Tensor x = torch::randn({40, 96});
  const int threads = EngineThreads();
  SetEngineThreads(1);
  const torch::Tensor all = PackedBf16Product(packed, x);
  for (int64_t r = 0; r < 40; ++r) {
    EXPECT_TRUE(torch::equal(all[r], PackedBf16Product(packed, x.narrow(0, r, 1))[0])) << r;
  }
  SetEngineThreads(4);
  const torch::Tensor several = PackedBf16Product(packed, x);
  SetEngineThreads(threads);
  EXPECT_TRUE(torch::equal(all, several));
  // Pieces of rows: the AMX loop's whole tiles and its spare ones.
  EXPECT_TRUE(torch::equal(all.narrow(0, 3, 33), PackedBf16Product(packed, x.narrow(0, 3, 33))));
}

}  // namespace
}  // namespace linserve
