#include "engine/cpu/huge_page_blocks.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <torch/types.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/cpu/huge_page_tensor.h"

namespace linserve {
namespace {

constexpr uintptr_t kPage = uintptr_t{2} << 20;

// One 2 MiB page cut into pieces of one size.
struct Page {
  int64_t piece_bytes = 0;
  std::vector<int32_t> free;  // indices of the free pieces
  int32_t pieces = 0;         // how many the page holds
};

class Pages {
 public:
  void* Take(int64_t piece_bytes) {
    absl::MutexLock lock(&mutex_);
    std::vector<uintptr_t>& room = with_room_[piece_bytes];
    if (room.empty()) {
      void* memory = std::aligned_alloc(kPage, kPage);
      if (memory == nullptr) return nullptr;
      // Advice only: where the kernel declines, the page is 4 KiB pages.
      madvise(memory, kPage, MADV_HUGEPAGE);
      Page page;
      page.piece_bytes = piece_bytes;
      page.pieces = static_cast<int32_t>(kPage / piece_bytes);
      for (int32_t i = page.pieces - 1; i >= 0; --i) page.free.push_back(i);
      const uintptr_t base = reinterpret_cast<uintptr_t>(memory);
      pages_.emplace(base, std::move(page));
      room.push_back(base);
    }
    // The fullest page with room, so that the emptier ones drain.
    size_t best = 0;
    for (size_t i = 1; i < room.size(); ++i) {
      if (pages_.at(room[i]).free.size() < pages_.at(room[best]).free.size()) best = i;
    }
    const uintptr_t base = room[best];
    Page& page = pages_.at(base);
    const int32_t index = page.free.back();
    page.free.pop_back();
    if (page.free.empty()) room.erase(room.begin() + static_cast<int64_t>(best));
    ++pieces_used_;
    return reinterpret_cast<void*>(base + static_cast<uintptr_t>(index) * piece_bytes);
  }

  void Give(void* piece) {
    absl::MutexLock lock(&mutex_);
    const uintptr_t address = reinterpret_cast<uintptr_t>(piece), base = address & ~(kPage - 1);
    Page& page = pages_.at(base);
    std::vector<uintptr_t>& room = with_room_[page.piece_bytes];
    if (page.free.empty()) room.push_back(base);
    page.free.push_back(static_cast<int32_t>((address - base) / page.piece_bytes));
    --pieces_used_;
    if (static_cast<int32_t>(page.free.size()) < page.pieces) return;
    // All free: back to the system unless it is this size's only page with
    // room (the spare that saves the next piece a fresh page's faults).
    if (room.size() == 1) return;
    room.erase(std::find(room.begin(), room.end(), base));
    pages_.erase(base);
    std::free(reinterpret_cast<void*>(base));
  }

  SharedHugePageUse Use() {
    absl::MutexLock lock(&mutex_);
    return {static_cast<int64_t>(pages_.size()), pieces_used_};
  }

 private:
  absl::Mutex mutex_;
  absl::flat_hash_map<uintptr_t, Page> pages_ ABSL_GUARDED_BY(mutex_);  // by base address
  // Per piece size, the pages with a free piece.
  absl::flat_hash_map<int64_t, std::vector<uintptr_t>> with_room_ ABSL_GUARDED_BY(mutex_);
  int64_t pieces_used_ ABSL_GUARDED_BY(mutex_) = 0;
};

// Never destroyed: a tensor freed during exit still gives its piece back.
Pages& ThePages() {
  static Pages* pages = new Pages;
  return *pages;
}

}  // namespace

torch::Tensor EmptyInSharedHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const int64_t bytes =
      c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(dtype));
  // Pieces of 64-byte multiples, so that every piece starts on a cache line.
  const int64_t piece_bytes = (bytes + 63) / 64 * 64;
  if (piece_bytes == 0 || piece_bytes > static_cast<int64_t>(kPage) / 2) {
    return EmptyInWholeHugePages(shape, dtype);
  }
  void* piece = ThePages().Take(piece_bytes);
  if (piece == nullptr) return torch::empty(shape, dtype);
  return torch::from_blob(
      piece, shape, [](void* p) { ThePages().Give(p); }, torch::TensorOptions(dtype));
}

SharedHugePageUse SharedHugePagesInUse() { return ThePages().Use(); }

}  // namespace linserve
