// Tensors in memory advised for huge pages (engine/huge_page_tensor.h):
// whether the kernel grants the pages depends on the system, so this checks
// what the code controls: shape, dtype, alignment, contents, freeing.

#include "engine/huge_page_tensor.h"

#include <cstdint>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace linserve {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

TEST(HugePageTensorTest, ABigTensorStartsOnAHugePageBoundary) {
  const torch::Tensor t = EmptyInHugePages({3, 1024, 1024}, torch::kFloat32);  // 12 MiB
  EXPECT_EQ(t.sizes(), torch::IntArrayRef({3, 1024, 1024}));
  EXPECT_EQ(t.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePage, 0u);
  t.fill_(2.5);  // every byte is writable
  EXPECT_EQ(t.sum().item<double>(), 2.5 * 3 * 1024 * 1024);
}

TEST(HugePageTensorTest, ASmallTensorIsAnOrdinaryOne) {
  const torch::Tensor t = EmptyInHugePages({16, 2}, torch::kBFloat16);
  EXPECT_EQ(t.sizes(), torch::IntArrayRef({16, 2}));
  EXPECT_EQ(t.scalar_type(), torch::kBFloat16);
}

TEST(HugePageTensorTest, ACopyHasTheSameValuesAndOutlivesItsSource) {
  torch::Tensor copy;
  {
    const torch::Tensor source = torch::randn({1500, 1000}).t();  // not contiguous
    copy = CopyToHugePages(source);
    EXPECT_TRUE(torch::equal(copy, source));
    EXPECT_TRUE(copy.is_contiguous());
  }
  EXPECT_TRUE(torch::isfinite(copy).all().item<bool>());
}

}  // namespace
}  // namespace linserve
