#include "engine/rwkv7/rwkv7_tuned_state.h"

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "engine/formats/pth_reader.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7.h"

namespace linserve {
namespace {

constexpr absl::string_view kPrefix = "blocks.";
constexpr absl::string_view kSuffix = ".att.time_state";

std::string LayerName(int64_t layer) { return absl::StrCat(kPrefix, layer, kSuffix); }

// The layer a tensor name is the time_state of; -1 for any other name.
int64_t LayerOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) return -1;
  int64_t layer = -1;
  if (name.empty() || name.size() > 6 || !absl::SimpleAtoi(name, &layer)) return -1;
  return layer;
}

std::string Shape(const torch::Tensor& t) { return absl::StrCat("(", absl::StrJoin(t.sizes(), ", "), ")"); }

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("state-tuning file: ", message));
}

}  // namespace

std::string TunedStateLayoutName(TunedStateLayout layout) {
  return layout == TunedStateLayout::kValueByKey ? "RWKV-PEFT .pth (value by key)"
                                                 : "ai00 safetensors (key by value)";
}

absl::StatusOr<TunedState> ParseRwkv7TunedState(std::string_view bytes,
                                                const Rwkv7Config& config) {
  TunedState state;
  TensorMap tensors;
  if (bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4)) {
    state.layout = TunedStateLayout::kValueByKey;
    absl::StatusOr<TensorMap> parsed = ParsePth(bytes);
    if (!parsed.ok()) return parsed.status();
    tensors = *std::move(parsed);
  } else if (bytes.size() > 8 && bytes[8] == '{') {
    state.layout = TunedStateLayout::kKeyByValue;
    absl::StatusOr<SafetensorsContents> parsed = ParseSafetensors(bytes);
    if (!parsed.ok()) return parsed.status();
    tensors = std::move(parsed->tensors);
  } else {
    return Invalid("neither a .pth (zip) nor a safetensors file");
  }

  const std::vector<int64_t> expected = {config.n_heads, config.head_size, config.head_size};
  state.wkv.resize(config.n_layers);
  for (auto& [name, tensor] : tensors) {
    const int64_t layer = LayerOf(name);
    if (layer < 0) {
      return Invalid(absl::StrCat("tensor '", name, "' is not a layer's time_state (",
                                  LayerName(0), " ...)"));
    }
    if (layer >= config.n_layers) {
      return Invalid(absl::StrCat("tensor '", name, "' names layer ", layer, "; the model has ",
                                  config.n_layers, " layers"));
    }
    if (tensor.sizes() != torch::IntArrayRef(expected)) {
      return Invalid(absl::StrCat("tensor '", name, "' has shape ", Shape(tensor),
                                  "; the model's state is (", config.n_heads, ", ",
                                  config.head_size, ", ", config.head_size, ") (H, N, N)"));
    }
    const torch::ScalarType dtype = tensor.scalar_type();
    if (dtype != torch::kFloat32 && dtype != torch::kBFloat16 && dtype != torch::kFloat16) {
      return Invalid(absl::StrCat("tensor '", name, "' is ", c10::toString(dtype),
                                  ", not float32, bfloat16 or float16"));
    }
    torch::Tensor values = tensor.to(torch::kFloat32);
    if (!torch::isfinite(values).all().item<bool>()) {
      return Invalid(absl::StrCat("tensor '", name, "' holds a NaN or infinite value"));
    }
    if (state.layout == TunedStateLayout::kKeyByValue) values = values.transpose(1, 2);
    state.wkv[layer] = values.contiguous();
  }
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    if (!state.wkv[layer].defined()) {
      return Invalid(absl::StrCat("no tensor '", LayerName(layer), "': the model has ",
                                  config.n_layers, " layers"));
    }
  }
  return state;
}

absl::StatusOr<State> TunedStateToState(const TunedState& tuned, const LanguageModel& model) {
  const StateLayout& layout = model.state_layout();
  int64_t wkv = -1;
  for (size_t i = 0; i < layout.layer(0).size(); ++i) {
    if (layout.layer(0)[i].name == kRwkv7Wkv) wkv = static_cast<int64_t>(i);
  }
  if (model.architecture() != "rwkv7" || wkv < 0 ||
      layout.n_layers() != static_cast<int64_t>(tuned.wkv.size())) {
    return Invalid(absl::StrCat("a tuned state of ", tuned.wkv.size(),
                                " RWKV-7 layers for a model of ", layout.n_layers(), " ",
                                model.architecture(), " layers"));
  }
  State state = model.NewState(1);
  for (int64_t layer = 0; layer < layout.n_layers(); ++layer) {
    torch::Tensor& target = state.layers[layer][wkv];
    if (target.sizes().slice(1) != tuned.wkv[layer].sizes()) {
      return Invalid(absl::StrCat("layer ", layer, "'s tuned state is ", Shape(tuned.wkv[layer]),
                                  ", the model's ", Shape(target[0])));
    }
    target = tuned.wkv[layer].unsqueeze(0).to(target.device()).clone();
  }
  return state;
}

}  // namespace linserve
