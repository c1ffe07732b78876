#include "bench/malloc_flag.h"

#include <cstdint>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "engine/base/malloc_tuning.h"

ABSL_FLAG(int32_t, malloc_keep_mb, 1024,
          "freed memory malloc keeps for reuse, in MiB, as the server's flag of that name "
          "(0: glibc's own bounds)");

namespace linserve {

bool KeepFreedMemoryAsFlagged() {
  const absl::Status kept = KeepFreedMemory(int64_t{absl::GetFlag(FLAGS_malloc_keep_mb)} << 20);
  if (!kept.ok()) std::cerr << "--malloc_keep_mb: " << kept.message() << "\n";
  return kept.ok();
}

}  // namespace linserve
