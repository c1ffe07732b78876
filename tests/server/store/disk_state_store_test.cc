// The disk store keeps one file per (tenant, session), named by the server,
// and gives back what it was given.

#include "server/store/disk_state_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "server/store/atomic_file.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

class DiskStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_disk_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(DiskStateStoreTest, PutGetDeleteAndLoadAll) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  const StoredSessionKey a{"tenant-a", "0123456789abcdef0123456789abcdef"};
  const StoredSessionKey b{"tenant-b", "0123456789abcdef0123456789abcdef"};
  EXPECT_EQ((*store)->Get(a).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*store)->Put(a, "state of a").ok());
  ASSERT_TRUE((*store)->Put(b, "state of b").ok());
  EXPECT_EQ(*(*store)->Get(a), "state of a");
  EXPECT_EQ(*(*store)->Get(b), "state of b") << "same id, other tenant: another file";
  ASSERT_TRUE((*store)->Put(a, "newer state of a").ok());
  EXPECT_EQ(*(*store)->Get(a), "newer state of a");

  auto all = (*store)->LoadAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);

  ASSERT_TRUE((*store)->Delete(a).ok());
  EXPECT_EQ((*store)->Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->Delete(a).ok()) << "deleting twice is fine";
}

TEST_F(DiskStateStoreTest, FileNamesComeFromTheServerNotTheClient) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  const StoredSessionKey hostile{"../../etc", "../passwd"};
  const fs::path path = (*store)->PathOf(hostile);
  EXPECT_EQ(path.parent_path(), dir_);
  EXPECT_EQ(path.filename().string().size(), 64u + 6u) << path;  // sha256 hex + ".state"
  // ("ab", "c") and ("a", "bc") are different sessions.
  EXPECT_NE((*store)->PathOf({"ab", "c"}), (*store)->PathOf({"a", "bc"}));
}

TEST_F(DiskStateStoreTest, OpeningRemovesTemporariesOfACrashedWrite) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / (std::string("x.state") + kTempSuffix + "1-0")) << "torn";
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(DiskStateStoreTest, ByteBudgetRefusesGrowthCountsReplacementsAndSurvivesReopen) {
  const StoredSessionKey a{"t", "0123456789abcdef0123456789abcdef"};
  const StoredSessionKey b{"t", "fedcba9876543210fedcba9876543210"};
  {
    auto store = DiskStateStore::Open(dir_.string(), 25);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(a, std::string(10, 'a')).ok());
    ASSERT_TRUE((*store)->Put(b, std::string(10, 'b')).ok());
    EXPECT_EQ((*store)->bytes(), 20);
    // Replacing a file frees its old bytes: 20 - 10 + 15 = 25 fits exactly.
    ASSERT_TRUE((*store)->Put(a, std::string(15, 'a')).ok());
    EXPECT_EQ((*store)->bytes(), 25);
    const absl::Status full = (*store)->Put(b, std::string(11, 'b'));
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(full.message().find("max_store_bytes = 25"), std::string::npos) << full;
    EXPECT_EQ(*(*store)->Get(b), std::string(10, 'b')) << "a refused put leaves the old file";
    EXPECT_EQ((*store)->CheckRoom(1).code(), absl::StatusCode::kResourceExhausted);
    // Shrinking is always allowed.
    ASSERT_TRUE((*store)->Put(b, std::string(5, 'b')).ok());
    EXPECT_EQ((*store)->bytes(), 20);
  }
  // The files already there count from the start.
  auto reopened = DiskStateStore::Open(dir_.string(), 25);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->bytes(), 20);
  EXPECT_TRUE((*reopened)->CheckRoom(5).ok());
  EXPECT_FALSE((*reopened)->CheckRoom(6).ok());
  ASSERT_TRUE((*reopened)->Delete(a).ok());
  EXPECT_EQ((*reopened)->bytes(), 5);
}

}  // namespace
}  // namespace linserve
