// Tensors in memory advised for huge pages (engine/cpu/huge_page_tensor.h):
// whether the kernel grants the pages depends on the system, so this checks
// what the code controls: shape, dtype, alignment, disjoint pieces, lifetime.

#include "engine/cpu/huge_page_tensor.h"

#include <cstdint>

#include <gtest/gtest.h>
#include <torch/types.h>

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

TEST(HugePageArenaTest, PiecesAreDisjointAlignedAndOutliveTheArena) {
  torch::Tensor a, b, c;
  {
    HugePageArena arena({3 * 1024 * 1024 * 2, 10, 64 * 4});
    a = arena.Take({3 * 1024, 1024}, torch::kBFloat16);
    b = arena.Take({5}, torch::kBFloat16);  // 10 bytes: the next piece starts 64 on
    c = arena.Take({8, 8}, torch::kFloat32);
    EXPECT_THROW(arena.Take({1}, torch::kUInt8), c10::Error);  // no room asked for
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data_ptr()) % kHugePage, 0u);
  for (const torch::Tensor& piece : {b, c}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(piece.data_ptr()) % 64, 0u);
    EXPECT_TRUE(piece.is_contiguous());
  }
  EXPECT_EQ(c.scalar_type(), torch::kFloat32);
  EXPECT_EQ(c.sizes(), torch::IntArrayRef({8, 8}));
  // Writing one piece leaves the others as they were.
  a.fill_(1);
  b.fill_(2);
  c.fill_(3);
  EXPECT_EQ(a.sum().item<double>(), 3.0 * 1024 * 1024);
  EXPECT_EQ(b.sum().item<double>(), 10.0);
  EXPECT_EQ(c.sum().item<double>(), 192.0);
}

}  // namespace
}  // namespace linserve
