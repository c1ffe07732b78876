#include "engine/cpu/huge_page_tensor.h"

#include <sys/mman.h>

#include <cstdlib>

#include <torch/types.h>

namespace linserve {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

torch::Tensor EmptyInHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(shape)) * c10::elementSize(dtype);
  if (bytes < kHugePage) return torch::empty(shape, dtype);
  return EmptyInWholeHugePages(shape, dtype);
}

torch::Tensor EmptyInWholeHugePages(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(shape)) * c10::elementSize(dtype);
  if (bytes == 0) return torch::empty(shape, dtype);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = std::aligned_alloc(kHugePage, rounded);
  if (memory == nullptr) return torch::empty(shape, dtype);
  // Advice only: where the kernel declines, the pages are ordinary ones.
  madvise(memory, rounded, MADV_HUGEPAGE);
  return torch::from_blob(
      memory, shape, [](void* p) { std::free(p); }, torch::TensorOptions(dtype));
}

HugePageArena::HugePageArena(const std::vector<int64_t>& piece_bytes) {
  int64_t total = 0;
  for (int64_t bytes : piece_bytes) total += Rounded(bytes);
  buffer_ = EmptyInHugePages({total}, torch::kUInt8);
}

torch::Tensor HugePageArena::Take(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const int64_t bytes =
      c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(dtype));
  TORCH_CHECK(used_ + Rounded(bytes) <= buffer_.numel(), "HugePageArena: ", bytes,
              " bytes asked with ", buffer_.numel() - used_, " left");
  torch::Tensor piece = buffer_.narrow(0, used_, bytes).view(dtype).view(shape);
  used_ += Rounded(bytes);
  return piece;
}

}  // namespace linserve
