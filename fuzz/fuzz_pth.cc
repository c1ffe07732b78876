// libFuzzer target: the PyTorch checkpoint reader, ParsePth, on arbitrary
// bytes (the zip archive, the pickle and the tensor views all come from the
// file). A refusal must be DATA_LOSS or INVALID_ARGUMENT, the codes the
// reader promises for bytes it cannot read. A checkpoint it accepts must be
// CPU tensors, contiguous, of a dtype it reads, and survive a round trip:
// written again with SerializePth and read again, the same names, dtypes,
// shapes and bytes.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/formats/pth_reader.h"
#include "engine/formats/pth_writer.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_pth: broken promise: %s\n", what);
  std::abort();
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const size_t bytes = a.numel() * a.element_size();
  return bytes == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<linserve::TensorMap> parsed = linserve::ParsePth(bytes);
  if (!parsed.ok()) {
    const absl::StatusCode code = parsed.status().code();
    Require(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument,
            "a refusal that is neither DATA_LOSS nor INVALID_ARGUMENT");
    Require(parsed.status().message().rfind("pth: ", 0) == 0, "a refusal without its prefix");
    return 0;
  }
  for (const auto& [name, tensor] : *parsed) {
    Require(tensor.device().is_cpu() && tensor.is_contiguous(),
            "a tensor not contiguous on the CPU");
    const c10::ScalarType type = tensor.scalar_type();
    Require(type == c10::ScalarType::Float || type == c10::ScalarType::BFloat16 ||
                type == c10::ScalarType::Half,
            "a dtype the reader does not promise");
  }
  absl::StatusOr<linserve::TensorMap> again = linserve::ParsePth(linserve::SerializePth(*parsed));
  Require(again.ok(), "its own output does not parse");
  Require(again->size() == parsed->size(), "tensors lost in a round trip");
  for (const auto& [name, tensor] : *parsed) {
    auto it = again->find(name);
    Require(it != again->end(), "a tensor name lost in a round trip");
    Require(SameBytes(tensor, it->second), "a tensor changed in a round trip");
  }
  return 0;
}
