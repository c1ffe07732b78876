// KeepFreedMemory: the bounds it refuses, and what it changes: a freed
// 8 MiB block stays in the heap for the next one, where glibc's own bounds
// map a fresh one (whose pages fault in again) the first time; and a thread
// of its own allocates from that same heap.

#include "engine/base/malloc_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define LINSERVE_SANITIZER_ALLOCATOR 1
#endif
#endif

namespace linserve {
namespace {

TEST(MallocTuningTest, RefusesBoundsMallocCannotTakeAndNamesThem) {
  const absl::Status negative = KeepFreedMemory(-1);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("-1 bytes"), std::string::npos) << negative.message();
  const absl::Status huge = KeepFreedMemory(int64_t{1} << 31);
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("2147483647"), std::string::npos) << huge.message();
  EXPECT_TRUE(KeepFreedMemory(0).ok());
}

// Bytes malloc holds in mapped blocks of their own (each given back when freed).
size_t MappedBytes() { return mallinfo2().hblkhd; }

TEST(MallocTuningTest, AFreedBlockIsKeptForTheNextOne) {
#ifdef LINSERVE_SANITIZER_ALLOCATOR
  GTEST_SKIP() << "a sanitizer's allocator stands in for glibc's malloc";
#endif
  constexpr size_t kBlock = size_t{8} << 20;
  // glibc's own bounds: the first block this size is mapped on its own.
  const size_t before = MappedBytes();
  char* first = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(first, nullptr);
  std::memset(first, 1, kBlock);
  EXPECT_GE(MappedBytes(), before + kBlock);
  std::free(first);

  ASSERT_TRUE(KeepFreedMemory(int64_t{1} << 30).ok());
  const size_t mapped = MappedBytes();
  char* second = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(second, nullptr);
  std::memset(second, 2, kBlock);
  EXPECT_EQ(MappedBytes(), mapped) << "an 8 MiB block was mapped on its own";
  std::free(second);
  // Freed, it stays: the heap keeps at least its size free for reuse.
  EXPECT_GE(mallinfo2().fordblks, kBlock);
}

// The server's engine runs on a thread of its own. glibc would give that
// thread an arena of its own, made of mapped heaps of at most 64 MiB that it
// unmaps as they empty, so the kept bound above never applied to the
// engine's tensors.
TEST(MallocTuningTest, AThreadOfItsOwnAllocatesFromTheMainHeap) {
#ifdef LINSERVE_SANITIZER_ALLOCATOR
  GTEST_SKIP() << "a sanitizer's allocator stands in for glibc's malloc";
#endif
  ASSERT_TRUE(KeepFreedMemory(int64_t{1} << 30).ok());
  constexpr size_t kBlock = size_t{8} << 20;
  uintptr_t block = 0, program_break = 0;
  std::thread([&] {
    void* p = std::malloc(kBlock);
    block = reinterpret_cast<uintptr_t>(p);
    program_break = reinterpret_cast<uintptr_t>(sbrk(0));
    std::free(p);
  }).join();
  ASSERT_NE(block, 0u);
  // The main heap grows by moving the program break; another arena's heap
  // is mapped apart from it, above it.
  EXPECT_LT(block, program_break) << "the thread's block came from an arena of its own";
}

}  // namespace
}  // namespace linserve
