// libFuzzer target: the readers of files quantized beforehand, RWKV-7's
// (engine/rwkv7/rwkv7_quantized_file.h) and Qwen3.5's
// (engine/qwen35/qwen35_quantized_file.h, for the directory shape
// fuzz_qwen35_shape.h), on arbitrary bytes: the metadata's format picks the
// reader (RWKV-7's for anything else). Twice: as they come, and, when they
// parse as safetensors, sealed again with the data_sha256 of their tensors. A mutation rarely
// survives the hash, so the second pass is what takes mutated metadata, configs, shapes, codes and
// scales through every check behind it and into the model they build.
//
// Promises checked: a refusal is DATA_LOSS or INVALID_ARGUMENT, with a
// message; a model it builds takes a prefill and a step, and writes back
// the tensors it was read from, bit for bit, with the same metadata.

#include <torch/types.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_quantized_file.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/rwkv7/rwkv7_quantized_file.h"
#include "fuzz/fuzz_qwen35_shape.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_quantized_model: broken promise: %s\n", what);
  std::abort();
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t bytes = ca.numel() * ca.element_size();
  return bytes == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), bytes) == 0;
}

bool IsQwen35(std::string_view bytes) {
  absl::StatusOr<linserve::SafetensorsContents> contents = linserve::ParseSafetensors(bytes);
  if (!contents.ok()) return false;
  auto format = contents->metadata.find("format");
  return format != contents->metadata.end() && format->second == linserve::kQuantizedQwen35Format;
}

// The model the bytes make, and the file it writes back.
struct Loaded {
  std::unique_ptr<linserve::LanguageModel> model;
  absl::StatusOr<std::string> written;
};

template <typename Model>
absl::StatusOr<Loaded> Built(absl::StatusOr<std::unique_ptr<Model>> model,
                             absl::StatusOr<std::string> (*serialize)(const Model&)) {
  if (!model.ok()) return model.status();
  Loaded loaded;
  loaded.written = serialize(**model);
  loaded.model = std::move(*model);
  return loaded;
}

absl::StatusOr<Loaded> Read(std::string_view bytes) {
  if (IsQwen35(bytes)) {
    const linserve::Qwen35Config shape = linserve::FuzzQwen35Shape();
    return Built(
        linserve::ParseQuantizedQwen35(bytes, shape, linserve::Tokenizer::Bytes(shape.vocab_size),
                                       linserve::LoadOptions(), "fuzz"),
        &linserve::SerializeQuantizedQwen35);
  }
  return Built(linserve::ParseQuantizedRwkv7(bytes, nlohmann::json::object(),
                                             linserve::LoadOptions(), "fuzz"),
               &linserve::SerializeQuantizedRwkv7);
}

void Load(std::string_view bytes) {
  absl::StatusOr<Loaded> loaded = Read(bytes);
  if (!loaded.ok()) {
    const absl::StatusCode code = loaded.status().code();
    Require(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument,
            "a refusal that is neither DATA_LOSS nor INVALID_ARGUMENT");
    Require(!loaded.status().message().empty(), "a refusal without a message");
    return;
  }
  linserve::LanguageModel& m = *loaded->model;
  linserve::State state = m.NewState();
  Require(m.Prefill(state, {0, m.vocab_size() - 1}).ok(), "a prefill of the model it built");
  Require(m.Step(state, {0}).ok(), "a step of the model it built");

  absl::StatusOr<linserve::SafetensorsContents> read = linserve::ParseSafetensors(bytes);
  Require(read.ok(), "a file it loaded does not parse");
  const absl::StatusOr<std::string>& written = loaded->written;
  Require(written.ok(), "the model it built cannot be written");
  absl::StatusOr<linserve::SafetensorsContents> again = linserve::ParseSafetensors(*written);
  Require(again.ok(), "its own file does not parse");
  Require(again->tensors.size() == read->tensors.size(), "tensors lost in a round trip");
  for (const auto& [name, tensor] : read->tensors) {
    auto it = again->tensors.find(name);
    Require(it != again->tensors.end(), "a tensor lost in a round trip");
    Require(SameBytes(tensor, it->second), "a tensor changed in a round trip");
  }
  Require(again->metadata.size() == read->metadata.size(), "metadata keys lost in a round trip");
  for (const auto& [key, value] : read->metadata) {
    auto it = again->metadata.find(key);
    Require(it != again->metadata.end(), "a metadata key lost in a round trip");
    if (key == "config") {  // the same JSON, perhaps spelled otherwise
      Require(nlohmann::json::parse(value) == nlohmann::json::parse(it->second),
              "the config changed in a round trip");
    } else {
      Require(value == it->second, "metadata changed in a round trip");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Load(bytes);
  // Sealed again: past the hash, into the checks behind it.
  absl::StatusOr<linserve::SafetensorsContents> contents = linserve::ParseSafetensors(bytes);
  if (!contents.ok()) return 0;
  contents->metadata["data_sha256"] = linserve::QuantizedFileDataSha256(contents->tensors);
  const std::string sealed = linserve::SerializeSafetensors(contents->tensors, contents->metadata);
  if (sealed != bytes) Load(sealed);
  return 0;
}
