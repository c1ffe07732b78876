// libFuzzer target: Qwen3.5's config.json parser and checkpoint checks on
// arbitrary bytes. The input is config.json's text, a NUL byte, then a
// safetensors file (its header and data), as one shard of a model directory.
// Promises:
//  - a config.json refused is InvalidArgument naming config.json; one
//    accepted has heads that divide, an even rotary width inside the head,
//    a layer kind per layer, and survives Qwen35ConfigToJson and back;
//  - a shard the safetensors reader accepts is then either refused with
//    InvalidArgument naming a tensor, or gives exactly the canonical tensors
//    of the config, with their shapes, in BF16, F16 or F32.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_checkpoint.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/text/hf_json.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_qwen35_checkpoint: broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t split = bytes.find('\0');
  const std::string_view config_text = bytes.substr(0, split);
  absl::StatusOr<nlohmann::json> json = linserve::ParseHfJson(config_text, "config.json", 64);
  if (!json.ok()) return 0;
  absl::StatusOr<linserve::Qwen35Config> config = linserve::Qwen35ConfigFromJson(*json);
  if (!config.ok()) {
    Require(config.status().code() == absl::StatusCode::kInvalidArgument,
            "a config refusal that is not INVALID_ARGUMENT");
    Require(config.status().message().substr(0, 13) == "config.json: ",
            "a config refusal that does not name config.json");
    return 0;
  }
  const linserve::Qwen35Config& c = *config;
  Require(c.num_attention_heads % c.num_key_value_heads == 0, "query heads do not divide");
  Require(c.linear_num_value_heads % c.linear_num_key_heads == 0, "value heads do not divide");
  Require(c.rotary_dim() >= 2 && c.rotary_dim() % 2 == 0 && c.rotary_dim() <= c.head_dim,
          "a rotary width that is odd or outside the head");
  Require(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
          "not one layer kind per layer");
  for (int64_t id : c.eos_token_ids) Require(id >= 0 && id < c.vocab_size, "an eos id outside V");
  absl::StatusOr<linserve::Qwen35Config> again =
      linserve::Qwen35ConfigFromJson(linserve::Qwen35ConfigToJson(c));
  Require(again.ok() && *again == c, "Qwen35ConfigToJson does not read back");

  if (split == std::string_view::npos) return 0;
  absl::StatusOr<linserve::SafetensorsContents> shard =
      linserve::ParseSafetensors(bytes.substr(split + 1));
  if (!shard.ok()) return 0;
  linserve::Qwen35Checkpoint checkpoint;
  checkpoint.config = c;
  std::map<std::string, std::string> files;
  for (const auto& [name, tensor] : shard->tensors) files[name] = "model.safetensors";
  const absl::Status checked =
      linserve::CheckQwen35Tensors(std::move(shard->tensors), files, &checkpoint);
  if (!checked.ok()) {
    Require(checked.code() == absl::StatusCode::kInvalidArgument,
            "a tensor refusal that is not INVALID_ARGUMENT");
    Require(checked.message().find("tensor '") != std::string_view::npos,
            "a tensor refusal that names no tensor");
    Require(checkpoint.weights.empty(), "weights kept after a refusal");
    return 0;
  }
  const auto shapes = linserve::Qwen35TensorShapes(c);
  Require(checkpoint.weights.size() == shapes.size(), "not the canonical tensors");
  for (const auto& [name, shape] : shapes) {
    auto it = checkpoint.weights.find(name);
    Require(it != checkpoint.weights.end(), "a canonical tensor missing");
    Require(it->second.sizes() == at::IntArrayRef(shape), "a tensor of another shape");
    const at::ScalarType dtype = it->second.scalar_type();
    Require(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
            "a tensor of another dtype");
  }
  return 0;
}
