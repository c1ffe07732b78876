#ifndef LINSERVE_ENGINE_HUGE_PAGE_TENSOR_H_
#define LINSERVE_ENGINE_HUGE_PAGE_TENSOR_H_

// CPU tensors in 2 MiB pages, for weights that every decode step streams
// from memory. The hardware prefetchers stop at each 4 KiB page and every
// page costs a TLB walk: reading the 0.1B RWKV-7 shape's bfloat16 weights
// (270 MB) once per step through the packed product ran 17.1 ms in
// transparent huge pages against 21.5 ms in 4 KiB pages, side by side on a
// busy machine; float32 batch-1 decode of that shape went from about 27 to
// about 21 ms on an idle one (bench/RESULTS.md).
// Linux only grants them to memory advised so before it is first touched
// (transparent_hugepage "madvise", the common default) or to all memory
// ("always"); elsewhere this is an ordinary allocation.

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace linserve {

// An uninitialised contiguous CPU tensor whose memory is advised for huge
// pages when it spans at least one; freed with the tensor.
torch::Tensor EmptyInHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype);

// The same in whole huge pages whatever its size, the last one's rest
// unused: for a tensor that is read every step but is smaller than a page
// (engine/cpu/huge_page_blocks.h shares pages among the smallest ones).
torch::Tensor EmptyInWholeHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype);

// One such allocation handed out in pieces, so that matrices smaller than a
// huge page (the 0.1B shape's 768 x 768 bfloat16 ones, 1.2 MB) get huge
// pages too. Each piece is a view that keeps the whole buffer alive.
class HugePageArena {
 public:
  // Room for pieces of these sizes in bytes (each rounded up to 64).
  explicit HugePageArena(const std::vector<int64_t>& piece_bytes);
  static int64_t Rounded(int64_t bytes) { return (bytes + 63) / 64 * 64; }

  // The next piece: an uninitialised contiguous tensor. Throws c10::Error
  // past the room asked for.
  torch::Tensor Take(const std::vector<int64_t>& shape, torch::ScalarType dtype);

 private:
  torch::Tensor buffer_;  // bytes
  int64_t used_ = 0;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_HUGE_PAGE_TENSOR_H_
