#ifndef LINSERVE_ENGINE_HUGE_PAGE_BLOCKS_H_
#define LINSERVE_ENGINE_HUGE_PAGE_BLOCKS_H_

// Small CPU tensors carved out of 2 MiB huge pages, for the pieces of a
// session's state that every decode step reads from memory: the KV cache's
// blocks (128 KB each at Qwen3.5 0.8B's shape) and the recurrent layers'
// states. Each such tensor allocated alone lies in 4 KiB pages, where the
// hardware's prefetchers stop at every page and each page costs a TLB walk:
// reading a 0.8B session's float32 cache at context 4,096 (100 MB in 128 KB
// blocks) ran 10.8-13.3 GB/s so, against 20.1-24.4 from huge pages, side by side
// on one machine (bench/RESULTS.md). EmptyInHugePages serves the weights,
// a huge page or more each; this serves the states' smaller tensors, many
// to a page.
//
// A page is shared by pieces of one size. A piece goes back to its page
// when its tensor is freed, and a page whose pieces are all free goes back
// to the system (one per size is kept for the next piece). Pieces are taken
// from the fullest page that has room, so that pages empty as sessions end.
// Where the system declines huge pages (transparent_hugepage "never") the
// pages are ordinary ones, and nothing else changes.

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace linserve {

// An uninitialised contiguous CPU tensor, a piece of a huge page when it is
// at most half of one, else in whole pages of its own. Thread-safe.
torch::Tensor EmptyInSharedHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype);

// What the pages hold now, for tests and metrics.
struct SharedHugePageUse {
  int64_t pages = 0;        // 2 MiB pages held, the spares included
  int64_t pieces_used = 0;  // pieces handed out and not yet freed
};
SharedHugePageUse SharedHugePagesInUse();

}  // namespace linserve

#endif  // LINSERVE_ENGINE_HUGE_PAGE_BLOCKS_H_
