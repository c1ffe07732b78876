// libFuzzer target: the engine's safetensors reader, ParseSafetensors, on
// arbitrary bytes (model files and every session's state payload pass
// through it). A refusal must be DATA_LOSS, the code the reader promises for
// bytes that are not a valid file. A file it accepts must survive a round
// trip: serialized again and parsed again, the same names, dtypes, shapes,
// bytes and metadata. Read in place, the same verdict and the same bytes.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/formats/safetensors.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_safetensors: broken promise: %s\n", what);
  std::abort();
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (!a.is_contiguous() || !b.is_contiguous()) return false;
  const size_t bytes = a.numel() * a.element_size();
  return bytes == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<linserve::SafetensorsContents> parsed = linserve::ParseSafetensors(bytes);
  // Read in place (views where aligned): the same verdict and the same tensors.
  absl::StatusOr<linserve::SafetensorsContents> in_place = linserve::ParseSafetensorsInPlace(bytes);
  Require(in_place.status() == parsed.status(), "reading in place gave another verdict");
  if (parsed.ok()) {
    for (const auto& [name, tensor] : parsed->tensors) {
      Require(SameBytes(tensor, in_place->tensors.at(name)), "a tensor read in place differs");
    }
  }
  if (!parsed.ok()) {
    Require(parsed.status().code() == absl::StatusCode::kDataLoss, "a refusal that is not DATA_LOSS");
    Require(!parsed.status().message().empty(), "a refusal without a message");
    return 0;
  }
  for (const auto& [name, tensor] : parsed->tensors) {
    Require(tensor.device().is_cpu() && tensor.is_contiguous(), "a tensor not contiguous on the CPU");
  }
  const std::string again = linserve::SerializeSafetensors(parsed->tensors, parsed->metadata);
  absl::StatusOr<linserve::SafetensorsContents> reparsed = linserve::ParseSafetensors(again);
  Require(reparsed.ok(), "its own output does not parse");
  Require(reparsed->metadata == parsed->metadata, "metadata changed in a round trip");
  Require(reparsed->tensors.size() == parsed->tensors.size(), "tensors lost in a round trip");
  for (const auto& [name, tensor] : parsed->tensors) {
    auto it = reparsed->tensors.find(name);
    Require(it != reparsed->tensors.end(), "a tensor name lost in a round trip");
    Require(SameBytes(tensor, it->second), "a tensor changed in a round trip");
  }
  return 0;
}
