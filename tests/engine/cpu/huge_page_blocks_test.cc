// State tensors sharing huge pages (engine/cpu/huge_page_blocks.h): pieces
// of one size share a page, never overlap, start on cache lines, go back to
// their page when freed, and a page whose pieces are all free goes back to
// the system but for one spare. Whether the kernel grants huge pages depends
// on the system; what the pool controls is checked here.

#include "engine/cpu/huge_page_blocks.h"

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/types.h>

namespace linserve {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

uintptr_t PageOf(const torch::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) & ~(kHugePage - 1);
}

// A KV block of Qwen3.5 0.8B's shape: 2 heads x 64 positions x 256, float32.
torch::Tensor Block() { return EmptyInSharedHugePages({2, 64, 256}, torch::kFloat32); }

TEST(SharedHugePagesTest, SixteenBlocksShareOnePageAndNeverOverlap) {
  std::vector<torch::Tensor> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(Block());
  std::set<uintptr_t> pages;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].sizes(), torch::IntArrayRef({2, 64, 256}));
    EXPECT_EQ(blocks[i].scalar_type(), torch::kFloat32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks[i].data_ptr()) % 64, 0u);
    pages.insert(PageOf(blocks[i]));
    blocks[i].fill_(static_cast<double>(i));
  }
  // 16 x 128 KB fill a page: at most two pages if the pool's spare page
  // had some pieces taken already.
  EXPECT_LE(pages.size(), 2u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].sum().item<double>(), static_cast<double>(i) * 2 * 64 * 256) << i;
  }
}

TEST(SharedHugePagesTest, FreedPiecesReturnAndEmptyPagesGoBackButOne) {
  const SharedHugePageUse before = SharedHugePagesInUse();
  {
    std::vector<torch::Tensor> blocks;
    for (int i = 0; i < 64; ++i) blocks.push_back(Block());  // four pages' worth
    const SharedHugePageUse during = SharedHugePagesInUse();
    EXPECT_EQ(during.pieces_used, before.pieces_used + 64);
    EXPECT_GE(during.pages, before.pages + 3);
  }
  const SharedHugePageUse after = SharedHugePagesInUse();
  EXPECT_EQ(after.pieces_used, before.pieces_used);
  EXPECT_LE(after.pages, before.pages + 1);  // the spare
}

TEST(SharedHugePagesTest, APieceComesFromTheFullestPageWithRoom) {
  // A size no other test takes, so that its pages are this test's alone:
  // 96 KB, 21 to a page.
  auto piece = [] { return EmptyInSharedHugePages({96 * 1024}, torch::kUInt8); };
  std::vector<torch::Tensor> first;
  for (int i = 0; i < 21; ++i) first.push_back(piece());
  const uintptr_t full = PageOf(first[0]);
  for (const torch::Tensor& t : first) ASSERT_EQ(PageOf(t), full);
  const torch::Tensor second = piece();  // a new page, 20 pieces free
  ASSERT_NE(PageOf(second), full);
  first[7] = torch::Tensor();  // the full page now has one free
  EXPECT_EQ(PageOf(piece()), full);
}

TEST(SharedHugePagesTest, ATensorOverHalfAPageHasPagesOfItsOwn) {
  const SharedHugePageUse before = SharedHugePagesInUse();
  const torch::Tensor big = EmptyInSharedHugePages({3, 1024, 256}, torch::kFloat32);  // 3 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % kHugePage, 0u);
  EXPECT_EQ(SharedHugePagesInUse().pieces_used, before.pieces_used);
  big.fill_(1);
  EXPECT_EQ(big.sum().item<double>(), 3.0 * 1024 * 256);
}

TEST(SharedHugePagesTest, ThreadsTakeAndFreePiecesTogether) {
  const SharedHugePageUse before = SharedHugePagesInUse();
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([w] {
      std::vector<torch::Tensor> held;
      for (int i = 0; i < 500; ++i) {
        held.push_back(EmptyInSharedHugePages({64 * (w + 1)}, torch::kFloat32));
        held.back().fill_(w);
        if (held.size() > 20) held.erase(held.begin());
      }
      for (const torch::Tensor& t : held) ASSERT_EQ(t.min().item<float>(), static_cast<float>(w));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(SharedHugePagesInUse().pieces_used, before.pieces_used);
}

}  // namespace
}  // namespace linserve
