// The AVX-512 products (engine/cpu_matvec.h) against the same product in
// float64: one row in float32 and bfloat16, widths with and without a tail
// past the kernels' 64-column steps, on one thread and several; a few rows
// in float32, with weight rows past the last block of eight.

#include "engine/cpu_matvec.h"

#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace linserve {
namespace {

class CpuMatVecTest : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(CpuMatVecTest, EqualsTheProductInFloat64) {
  const torch::ScalarType dtype = GetParam();
  if (!HasCpuMatVec(dtype)) GTEST_SKIP() << "this CPU has no AVX-512F";
  torch::manual_seed(3);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 63}, {300, 64},
                                   {2500, 100}, {1030, 768}}) {
    const torch::Tensor weight = torch::randn({rows, cols}).to(dtype);
    const torch::Tensor x = torch::randn({cols});
    const torch::Tensor expected =
        torch::mv(weight.to(torch::kFloat64), x.to(torch::kFloat64));  // the same bf16 weights
    const torch::Tensor got = CpuMatVec(weight, x);
    ASSERT_EQ(got.sizes(), torch::IntArrayRef({rows}));
    EXPECT_EQ(got.scalar_type(), torch::kFloat32);
    // float32 sums of `cols` products of unit-scale values: a few ulps of
    // sqrt(cols).
    const double tolerance = 1e-5 * std::sqrt(static_cast<double>(cols));
    EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), tolerance)
        << rows << " x " << cols;
  }
}

TEST_P(CpuMatVecTest, RowsSplitOverThreadsGiveTheSameBits) {
  const torch::ScalarType dtype = GetParam();
  if (!HasCpuMatVec(dtype)) GTEST_SKIP() << "this CPU has no AVX-512F";
  const torch::Tensor weight = torch::randn({5000, 96}).to(dtype);
  const torch::Tensor x = torch::randn({96});
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const torch::Tensor one = CpuMatVec(weight, x);
  torch::set_num_threads(4);
  const torch::Tensor several = CpuMatVec(weight, x);
  torch::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, several));
}

TEST(CpuFewRowsProductTest, EqualsTheProductInFloat64) {
  const torch::ScalarType dtype = torch::kFloat32;
  if (!HasCpuMatVec(dtype)) GTEST_SKIP() << "this CPU has no AVX-512F";
  torch::manual_seed(4);
  for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, kMaxFewRows}) {
    for (const auto& [out, cols] : {std::pair<int64_t, int64_t>{1, 3}, {13, 64}, {2053, 96}}) {
      const torch::Tensor weight = torch::randn({out, cols}).to(dtype);
      const torch::Tensor x = torch::randn({rows, cols});
      const torch::Tensor expected =
          torch::matmul(x.to(torch::kFloat64), weight.to(torch::kFloat64).t());
      const torch::Tensor got = CpuFewRowsProduct(weight, x);
      ASSERT_EQ(got.sizes(), torch::IntArrayRef({rows, out}));
      const double tolerance = 1e-5 * std::sqrt(static_cast<double>(cols));
      EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), tolerance)
          << rows << " rows, " << out << " x " << cols;
    }
  }
}

TEST(CpuFewRowsProductTest, EachRowHasTheSameBitsWhateverTheOthers) {
  const torch::ScalarType dtype = torch::kFloat32;
  if (!HasCpuMatVec(dtype)) GTEST_SKIP() << "this CPU has no AVX-512F";
  const torch::Tensor weight = torch::randn({300, 80}).to(dtype);
  const torch::Tensor x = torch::randn({7, 80});
  const torch::Tensor all = CpuFewRowsProduct(weight, x);
  for (int64_t r = 0; r < 7; ++r) {
    EXPECT_TRUE(torch::equal(all[r], CpuFewRowsProduct(weight, x.narrow(0, r, 1))[0])) << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuMatVecTest,
                         ::testing::Values(torch::kFloat32, torch::kBFloat16),
                         [](const auto& info) {
                           return std::string(info.param == torch::kFloat32 ? "float32"
                                                                            : "bfloat16");
                         });

}  // namespace
}  // namespace linserve
