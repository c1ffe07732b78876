#include "server/scheduling/prefill_pieces.h"

#include <algorithm>

namespace linserve {

int64_t NextPieceLength(int64_t done, int64_t total, int64_t stop, int64_t budget,
                        int64_t chunk, bool first) {
  if (done >= total) return 0;
  const int64_t last_boundary = total / chunk * chunk;
  // Whole chunks first, then the partial one on its own.
  int64_t end = done < last_boundary ? last_boundary : total;
  if (stop > done) end = std::min(end, stop);
  if (end - done <= budget) return end - done;
  const int64_t within_budget = (done + budget) / chunk * chunk;
  if (within_budget > done) return within_budget - done;
  if (!first) return 0;
  return std::min(end, (done / chunk + 1) * chunk) - done;
}

}  // namespace linserve
