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
  return absl::OkStatus();
}

}  // namespace linserve
