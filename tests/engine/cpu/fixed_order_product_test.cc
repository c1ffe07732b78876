// The fixed-order product (engine/cpu/fixed_order_product.h) against the same
// product in float64, and the property it exists for: a row's bits are the
// same whatever the rows around it and the threads (docs/DESIGN.md, "What
// is bit-identical", row "one product"), in the family
// this process runs (LINSERVE_CPU_KERNELS picks it; CI runs this test under
// each family). Shapes around the tiles (6 x 4 and 2 x 2) and the 16-output
// panels.

#include "engine/cpu/fixed_order_product.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/fixed_order_kernel.h"

namespace linserve {
namespace {

const std::pair<int64_t, int64_t> kShapes[] = {{1, 1}, {3, 15}, {4, 16}, {5, 17},
                                               {17, 100}, {64, 768}, {35, 64}};

// float32 sums of `in` products of unit normals: a few ulps of sqrt(in).
double SumTolerance(int64_t in) { return 1e-5 * std::sqrt(static_cast<double>(in)) + 1e-6; }

class FixedOrderProductTest : public ::testing::TestWithParam<torch::ScalarType> {
 protected:
  torch::Tensor Weight(int64_t out, int64_t in) const {
    return torch::randn({out, in}).to(GetParam());
  }
};

TEST_P(FixedOrderProductTest, EqualsTheProductInFloat64) {
  torch::manual_seed(3);
  for (int64_t rows : {1, 2, 3, 4, 5, 9, 70}) {
    for (const auto& [out, in] : kShapes) {
      const torch::Tensor weight = Weight(out, in);
      const torch::Tensor x = torch::randn({rows, in});
      const torch::Tensor expected =
          torch::matmul(x.to(torch::kFloat64), weight.to(torch::kFloat64).t());
      const torch::Tensor got = FixedOrderLinear(x, weight);
      ASSERT_EQ(got.sizes(), torch::IntArrayRef({rows, out}));
      EXPECT_EQ(got.scalar_type(), torch::kFloat32);
      const double tolerance = SumTolerance(in);
      EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), tolerance)
          << rows << " x " << out << " x " << in;
    }
  }
}

TEST_P(FixedOrderProductTest, EachRowHasTheSameBitsWhateverTheRowsAround) {
  torch::manual_seed(4);
  for (const auto& [out, in] : kShapes) {
    const torch::Tensor weight = Weight(out, in);
    const torch::Tensor x = torch::randn({70, in});
    const torch::Tensor all = FixedOrderLinear(x, weight);
    for (int64_t first : {0, 1, 5, 63}) {
      for (int64_t count : {1, 2, 3, 4, 7}) {
        const torch::Tensor part = FixedOrderLinear(x.narrow(0, first, count), weight);
        EXPECT_TRUE(torch::equal(part, all.narrow(0, first, count)))
            << out << " x " << in << ": rows " << first << " + " << count;
      }
    }
    // Leading dimensions are rows too: (B, T, in).
    EXPECT_TRUE(torch::equal(FixedOrderLinear(x.view({7, 10, in}), weight).view({70, out}), all));
  }
}

TEST_P(FixedOrderProductTest, ThreadsDoNotChangeTheBits) {
  torch::manual_seed(6);
  const torch::Tensor weight = Weight(272, 768);
  const torch::Tensor x = torch::randn({33, 768});
  const int threads = EngineThreads();
  SetEngineThreads(1);
  const torch::Tensor one = FixedOrderLinear(x, weight);
  SetEngineThreads(4);
  const torch::Tensor several = FixedOrderLinear(x, weight);
  SetEngineThreads(threads);
  EXPECT_TRUE(torch::equal(one, several));
}

TEST_P(FixedOrderProductTest, GroupsAreIndependentProducts) {
  torch::manual_seed(7);
  const torch::Tensor weight = torch::randn({3, 20, 33}).to(GetParam());
  const torch::Tensor x = torch::randn({3, 9, 33});
  const torch::Tensor got = FixedOrderGroupLinear(x, weight);
  ASSERT_EQ(got.sizes(), torch::IntArrayRef({3, 9, 20}));
  for (int64_t g = 0; g < 3; ++g) EXPECT_TRUE(torch::equal(got[g], FixedOrderLinear(x[g], weight[g])));
}

TEST_P(FixedOrderProductTest, EmptyAndZeroWidthShapes) {
  const torch::Tensor weight = Weight(8, 16);
  EXPECT_EQ(FixedOrderLinear(torch::zeros({0, 16}), weight).sizes(), torch::IntArrayRef({0, 8}));
  const torch::Tensor none = FixedOrderLinear(torch::zeros({3, 0}), Weight(8, 0));
  EXPECT_TRUE(torch::equal(none, torch::zeros({3, 8})));
  EXPECT_THROW(FixedOrderLinear(torch::zeros({3, 15}), weight), c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FixedOrderProductTest,
                         ::testing::Values(torch::kFloat32, torch::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

// docs/DESIGN.md, "What is bit-identical", the row of the AVX-512 and AVX2
// families: the loops called directly, whatever family the process runs.
TEST(FixedOrderFamiliesTest, Avx512AndAvx2GiveTheSameBitsAndPortableIsClose) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU has no AVX-512F";
  torch::manual_seed(8);
  for (bool bf16 : {false, true}) {
    for (const auto& shape : kShapes) {
      // Copies: a lambda may not capture a structured binding before C++20.
      const int64_t out = shape.first, in = shape.second;
      const int64_t rows = 13;
      const torch::Tensor x = torch::randn({rows, in});
      const torch::Tensor weight =
          torch::randn({out, in}).to(bf16 ? torch::kBFloat16 : torch::kFloat32);
      const torch::Tensor packed = PackFixedOrder(weight);
      auto run = [&](void (*family)(const FixedOrderArgs&, int64_t, int64_t)) {
        torch::Tensor y = torch::empty({rows, out});
        FixedOrderArgs args;
        args.x = x.data_ptr<float>();
        args.x_stride = in;
        args.w = packed.data_ptr();
        args.w_bf16 = bf16;
        args.panel_stride = in * 16;
        args.k_stride = 16;
        args.y = y.data_ptr<float>();
        args.y_stride = out;
        args.rows = rows;
        args.out = out;
        args.in = in;
        family(args, 0, packed.size(0));
        return y;
      };
      const torch::Tensor avx512 = run(&FixedOrderProductAvx512);
      EXPECT_TRUE(torch::equal(avx512, run(&FixedOrderProductAvx2))) << out << " x " << in;
      const double tolerance = SumTolerance(in);
      EXPECT_LT((avx512 - run(&FixedOrderProductPortable)).abs().max().item<double>(), tolerance);
    }
  }
}

// The ways to hand the product a weight give the same bits: packed at load,
// packed for the call, packed once and cached, and an (in, out) matrix read
// in place (16 outputs of an input in a row) or packed.
TEST_P(FixedOrderProductTest, EveryLayoutGivesTheSameBits) {
  torch::manual_seed(9);
  for (const auto& [out, in] : kShapes) {
    const torch::Tensor weight = Weight(out, in);
    const torch::Tensor x = torch::randn({11, in});
    const torch::Tensor expected = FixedOrderLinear(x, weight);
    EXPECT_TRUE(torch::equal(FixedOrderPackedLinear(x, PackFixedOrder(weight), out), expected));
    EXPECT_TRUE(torch::equal(FixedOrderCachedLinear(x, weight), expected));
    EXPECT_TRUE(torch::equal(FixedOrderInputMajorLinear(x, weight.t().contiguous()), expected))
        << out << " x " << in;
    EXPECT_TRUE(torch::equal(FixedOrderInputMajorLinear(x, weight.t()), expected));
  }
}

TEST(FixedOrderCacheTest, AWeightUpdatedInPlaceIsPackedAgain) {
  torch::NoGradGuard no_grad;
  torch::Tensor weight = torch::randn({32, 20});
  const torch::Tensor x = torch::randn({3, 20});
  const torch::Tensor before = FixedOrderCachedLinear(x, weight);
  EXPECT_TRUE(torch::equal(before, FixedOrderLinear(x, weight)));
  weight.mul_(2);  // an optimizer step's kind of change
  const torch::Tensor after = FixedOrderCachedLinear(x, weight);
  EXPECT_TRUE(torch::equal(after, FixedOrderLinear(x, weight)));
  EXPECT_FALSE(torch::equal(after, before));
  // A narrowed view is a weight of its own.
  EXPECT_TRUE(torch::equal(FixedOrderCachedLinear(x, weight.narrow(0, 16, 16)),
                           FixedOrderLinear(x, weight.narrow(0, 16, 16))));
}

TEST(FixedOrderPackTest, PadsOutputsToWholePanels) {
  EXPECT_EQ(PackedFixedOrderShape(17, 5), (std::vector<int64_t>{2, 5, 16}));
  const torch::Tensor weight = torch::arange(17 * 5, torch::kFloat32).view({17, 5});
  const torch::Tensor packed = PackFixedOrder(weight);
  EXPECT_TRUE(IsPackedFixedOrder(packed));
  EXPECT_EQ(packed[0][2][3].item<float>(), weight[3][2].item<float>());
  EXPECT_EQ(packed[1][4][0].item<float>(), weight[16][4].item<float>());
  EXPECT_EQ(packed[1][4][1].item<float>(), 0.0f);
  EXPECT_THROW(FixedOrderPackedLinear(torch::zeros({1, 5}), packed, 40), c10::Error);
}

TEST(FixedOrderProductTest, TrainingKeepsLibTorchsDifferentiableProduct) {
  const torch::Tensor weight = torch::randn({4, 8}, torch::requires_grad());
  const torch::Tensor x = torch::randn({2, 8});
  EXPECT_FALSE(CanUseFixedOrder(x, weight));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(CanUseFixedOrder(x, weight));
  EXPECT_FALSE(CanUseFixedOrder(x, weight.to(torch::kFloat16)));
}

TEST(CpuKernelsTest, ARequestAboveTheCpuIsCapped) {
  EXPECT_EQ(ChooseCpuKernels("avx512", CpuKernels::kAvx2), CpuKernels::kAvx2);
  EXPECT_EQ(ChooseCpuKernels("avx2", CpuKernels::kAvx512), CpuKernels::kAvx2);
  EXPECT_EQ(ChooseCpuKernels("portable", CpuKernels::kAvx512), CpuKernels::kPortable);
  EXPECT_EQ(ChooseCpuKernels("auto", CpuKernels::kAvx512), CpuKernels::kAvx512);
  EXPECT_EQ(ChooseCpuKernels(nullptr, CpuKernels::kPortable), CpuKernels::kPortable);
  EXPECT_EQ(ChooseCpuKernels("sse9", CpuKernels::kAvx2), CpuKernels::kAvx2);
  EXPECT_EQ(ChooseCpuKernels("amx", CpuKernels::kAvx512), CpuKernels::kAvx512);
  EXPECT_EQ(ChooseCpuKernels("avx512", CpuKernels::kAmx), CpuKernels::kAvx512);
  EXPECT_EQ(ChooseCpuKernels("auto", CpuKernels::kAmx), CpuKernels::kAvx512);
  EXPECT_EQ(ChooseCpuKernels("amx", CpuKernels::kAmx), CpuKernels::kAmx);
  std::printf("kernel family in force: %s\n", CpuKernelsName(ActiveCpuKernels()));
}

}  // namespace
}  // namespace linserve
