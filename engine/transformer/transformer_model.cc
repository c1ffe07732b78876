#include "engine/transformer/transformer_model.h"

#include <filesystem>

#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/fingerprint.h"
#include "engine/formats/safetensors.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr char kConfigFile[] = "config.json";
constexpr char kWeightsFile[] = "model.safetensors";

}  // namespace

TransformerModel::TransformerModel(const ModelConfig& config, Transformer module)
    : config_(config),
      module_(std::move(module)),
      tokenizer_(config),
      state_layout_{module_->kernel().StateSpec(), config.n_layers} {
  module_->eval();
}

std::unique_ptr<TransformerModel> TransformerModel::Create(const ModelConfig& config,
                                                           uint64_t seed,
                                                           const torch::Device& device) {
  torch::manual_seed(seed);
  Transformer module(config);
  module->to(device);
  return std::unique_ptr<TransformerModel>(new TransformerModel(config, std::move(module)));
}

absl::StatusOr<std::unique_ptr<TransformerModel>> TransformerModel::Load(
    const std::string& dir, const LoadOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(ModelConfig config,
                            ReadModelConfig((std::filesystem::path(dir) / kConfigFile).string()));
  return Load(dir, config, options);
}

absl::StatusOr<std::unique_ptr<TransformerModel>> TransformerModel::Load(
    const std::string& dir, const ModelConfig& config, const LoadOptions& options) {
  if (options.dtype.has_value() && *options.dtype != torch::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype ", ComputeDtypeName(*options.dtype),
        ": the transformer architecture computes in float32 only"));
  }
  const torch::Device& device = options.device;
  LINSERVE_RETURN_IF_ERROR(CheckQuantizationOptions(options));
  LINSERVE_ASSIGN_OR_RETURN(
      SafetensorsContents weights,
      ReadSafetensorsFile((std::filesystem::path(dir) / kWeightsFile).string()));
  try {
    Transformer module(config);
    std::map<std::string, TensorSpec> expected;
    for (const auto& item : module->named_parameters()) {
      expected[item.key()] = {item.value().sizes().vec(), item.value().scalar_type()};
    }
    LINSERVE_RETURN_IF_ERROR(CheckTensors(weights.tensors, expected));
    torch::NoGradGuard no_grad;
    for (auto& item : module->named_parameters()) {
      item.value().copy_(weights.tensors.at(item.key()));
    }
    module->to(device);
    std::unique_ptr<TransformerModel> model(new TransformerModel(config, std::move(module)));
    if (options.quantization != WeightQuantization::kNone) {
      model->quantization_ = options.quantization;
      model->module_->Quantize(options.quantization,
                               options.quantization_group != 0
                                   ? options.quantization_group
                                   : DefaultQuantizationGroup(options.quantization));
    }
    return model;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("loading ", dir, ": ", e.what_without_backtrace()));
  }
}

absl::Status TransformerModel::Save(const std::string& dir) const {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  LINSERVE_RETURN_IF_ERROR(
      WriteSafetensorsFile((std::filesystem::path(dir) / kWeightsFile).string(), Weights()));
  return WriteModelConfig(config_, (std::filesystem::path(dir) / kConfigFile).string());
}

TensorMap TransformerModel::Weights() const {
  TensorMap tensors;
  for (const auto& item : module_->named_parameters()) {
    tensors[item.key()] = item.value().detach().cpu();
  }
  return tensors;
}

std::string TransformerModel::Fingerprint() const { return ModelFingerprint(config_, Weights()); }

std::string TransformerModel::attention_kind() const {
  return AttentionKindName(config_.attention.kind);
}

nlohmann::json TransformerModel::ConfigJson() const { return ModelConfigToJson(config_); }

torch::Tensor TransformerModel::ForwardPrefill(const torch::Tensor& tokens, State& state) {
  return module_->ForwardChunked(tokens, state).select(1, -1);  // (B, V)
}

torch::Tensor TransformerModel::ForwardDecode(const torch::Tensor& tokens, State& state) {
  return module_->ForwardStep(tokens, state);
}

}  // namespace linserve
