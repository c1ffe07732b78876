// Atomic whole-file writes: the new bytes or the old ones, never a temporary
// left behind.

#include "server/store/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_atomic_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int FilesIn() const {
    return static_cast<int>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReplacesWholeFiles) {
  const std::string path = (dir_ / "session.state").string();
  ASSERT_TRUE(WriteFileAtomically(path, "first version").ok());
  EXPECT_EQ(*ReadFile(path), "first version");
  ASSERT_TRUE(WriteFileAtomically(path, std::string(100000, 'x')).ok());
  EXPECT_EQ(*ReadFile(path), std::string(100000, 'x'));
  EXPECT_EQ(FilesIn(), 1) << "no temporary left behind";
}

TEST_F(AtomicFileTest, FailedWriteLeavesTheOldFileAndNoTemporary) {
  const std::string path = (dir_ / "session.state").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  // Renaming onto a non-empty directory fails after the temporary is written.
  const std::string blocked = (dir_ / "blocked").string();
  fs::create_directories(fs::path(blocked) / "child");
  absl::Status status = WriteFileAtomically(blocked, "new");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rename"), std::string::npos) << status;
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(FilesIn(), 2) << "the old file and the directory, no temporary";
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = (dir_ / "absent" / "session.state").string();
  absl::Status status = WriteFileAtomically(path, "bytes");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("absent"), std::string::npos) << status;
}

TEST_F(AtomicFileTest, ReadingAMissingFileIsNotFound) {
  EXPECT_EQ(ReadFile((dir_ / "none").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AtomicFileTest, StaleTemporariesAreRemoved) {
  std::ofstream(dir_ / (std::string("a.state") + kTempSuffix + "123-0")) << "torn";
  std::ofstream(dir_ / (std::string("b.state") + kTempSuffix + "456-7")) << "torn";
  std::ofstream(dir_ / "c.state") << "kept";
  auto removed = RemoveStaleTempFiles(dir_.string());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(FilesIn(), 1);
}

}  // namespace
}  // namespace linserve
