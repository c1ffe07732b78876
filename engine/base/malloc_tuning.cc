#include "engine/base/malloc_tuning.h"

#include <malloc.h>

#include <limits>

#include "absl/strings/str_cat.h"

namespace linserve {

absl::Status KeepFreedMemory(int64_t keep_bytes) {
  // glibc refuses an mmap threshold above 32 MiB on 64-bit machines
  // (HEAP_MAX_SIZE / 2); a block larger than that is mapped and unmapped
  // whatever is set.
  constexpr int kLargestHeapBlock = 32 << 20;
  if (keep_bytes == 0) return absl::OkStatus();
  if (keep_bytes < 0 || keep_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the freed memory to keep is ", keep_bytes, " bytes; it must be in [0, ",
        std::numeric_limits<int>::max(), "]"));
  }
  // Setting either turns glibc's adaptive bounds off. A malloc that is not
  // glibc's (a sanitizer's) refuses them: it keeps its own ways, and so does
  // the process.
  mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_bytes));
  // Every thread allocates from the main arena. A thread of its own (the
  // server's engine thread) would otherwise get an arena of heaps of at most
  // 64 MiB, which glibc unmaps as they empty whatever the bound above, so
  // its tensors faulted their pages in anew: the same closed loop ran
  // 10-18% slower on a thread than on main, and as fast with one arena
  // (bench/RESULTS.md). Small blocks come from each thread's cache, so the
  // arena's lock is rarely shared.
  mallopt(M_ARENA_MAX, 1);
  return absl::OkStatus();
}

}  // namespace linserve
