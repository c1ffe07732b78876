#include "engine/qwen35/qwen35_model.h"

#include <filesystem>
#include <utility>

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/model/fingerprint.h"
#include "engine/qwen35/qwen35_checkpoint.h"
#include "engine/qwen35/qwen35_quantized_file.h"
#include "engine/text/hf_model_files.h"

namespace linserve {
namespace {

nlohmann::json ArchitectureJson(const Qwen35Config& config) {
  nlohmann::json json = Qwen35ConfigToJson(config);
  json["architecture"] = "qwen3_5";
  return json;
}

}  // namespace

std::string Qwen35Fingerprint(const Qwen35Config& config, const TensorMap& weights) {
  return FloatWeightsFingerprint(ArchitectureJson(config), weights);
}

torch::ScalarType Qwen35Model::DefaultDtype() {
  static const bool fast_bfloat16 = HasCpuBf16Product();
  return fast_bfloat16 ? torch::kBFloat16 : torch::kFloat32;
}

Qwen35Model::Qwen35Model(const Qwen35Config& config, Qwen35 module, Tokenizer tokenizer,
                         std::string fingerprint)
    : config_(config),
      module_(std::move(module)),
      tokenizer_(std::move(tokenizer)),
      state_layout_(Qwen35StateSpecs(config, module_->options().kv_dtype),
                    module_->options().kv_block_tokens),
      fingerprint_(std::move(fingerprint)) {
  module_->eval();
}

absl::StatusOr<Qwen35Options> Qwen35ModuleOptions(const LoadOptions& options) {
  if (!options.device.is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("qwen3_5: runs on the CPU only for now, not on ", options.device.str()));
  }
  Qwen35Options module_options;
  module_options.dtype = options.dtype.value_or(Qwen35Model::DefaultDtype());
  if (module_options.dtype != torch::kFloat32 && module_options.dtype != torch::kBFloat16) {
    return absl::InvalidArgumentError(absl::StrCat("qwen3_5: --dtype ",
                                                   ComputeDtypeName(module_options.dtype),
                                                   " is not float32, bfloat16, int8 or int4"));
  }
  if (options.kv_dtype != torch::kFloat32 && options.kv_dtype != torch::kBFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qwen3_5: --kv_dtype ", ComputeDtypeName(options.kv_dtype), " is not float32 or bfloat16"));
  }
  module_options.kv_dtype = options.kv_dtype;
  if (options.kv_block_tokens <= 0 || options.kv_block_tokens % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qwen3_5: --kv_block_tokens = ", options.kv_block_tokens,
        ": a KV block holds a positive multiple of 16 positions (the attention reads rows 16 at "
        "a time)"));
  }
  module_options.kv_block_tokens = options.kv_block_tokens;
  LINSERVE_RETURN_IF_ERROR(CheckQuantizationOptions(options));
  module_options.quantization = options.quantization;
  module_options.quantization_group = options.quantization_group != 0
                                          ? options.quantization_group
                                          : DefaultQuantizationGroup(options.quantization);
  return module_options;
}

std::unique_ptr<Qwen35Model> Qwen35Model::FromLoadedModule(const Qwen35Config& config,
                                                           Qwen35 module, Tokenizer tokenizer,
                                                           std::string fingerprint) {
  return std::unique_ptr<Qwen35Model>(
      new Qwen35Model(config, std::move(module), std::move(tokenizer), std::move(fingerprint)));
}

absl::StatusOr<std::unique_ptr<Qwen35Model>> Qwen35Model::FromTensors(const Qwen35Config& config,
                                                                      const TensorMap& weights,
                                                                      Tokenizer tokenizer,
                                                                      const LoadOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(const Qwen35Options module_options, Qwen35ModuleOptions(options));
  try {
    Qwen35 module(config, module_options);
    module->LoadWeights(weights);
    module->PackForCpu();
    return FromLoadedModule(config, std::move(module), std::move(tokenizer),
                            Qwen35Fingerprint(config, weights));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("qwen3_5: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<Qwen35Model>> Qwen35Model::Load(const std::string& path,
                                                               const nlohmann::json& config,
                                                               const LoadOptions& options) {
  if (!HasHfTokenizer(path)) {
    return absl::NotFoundError(
        absl::StrCat("model '", path, "': a Qwen3.5 directory needs its tokenizer.json"));
  }
  // A directory quantized beforehand is served as it is.
  if (IsQuantizedQwen35Directory(path)) {
    LINSERVE_ASSIGN_OR_RETURN(const Qwen35Config shape, ReadQwen35DirectoryConfig(path, config));
    LINSERVE_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                              LoadHfTokenizerDirectory(path, shape.vocab_size, options.tokenizer));
    return LoadQuantizedQwen35File((std::filesystem::path(path) / "model.safetensors").string(),
                                   shape, std::move(tokenizer), options);
  }
  LINSERVE_ASSIGN_OR_RETURN(Qwen35Checkpoint checkpoint, ReadQwen35Checkpoint(path, config));
  LINSERVE_ASSIGN_OR_RETURN(
      Tokenizer tokenizer,
      LoadHfTokenizerDirectory(path, checkpoint.config.vocab_size, options.tokenizer));
  return FromTensors(checkpoint.config, checkpoint.weights, std::move(tokenizer), options);
}

WeightFootprint Qwen35Model::weight_footprint() const { return FootprintOf(*module_); }

nlohmann::json Qwen35Model::ConfigJson() const {
  nlohmann::json json = ArchitectureJson(config_);
  json["tokenizer"] = {{"type", tokenizer_.name()}};
  json["dtype"] = ComputeDtypeName(compute_dtype());
  json["kv_dtype"] = ComputeDtypeName(module_->options().kv_dtype);
  if (weight_quantization() != WeightQuantization::kNone) {
    json["weight_format"] = WeightQuantizationName(weight_quantization());
    json["quantization_group"] = module_->options().quantization_group;
  }
  return json;
}

torch::Tensor Qwen35Model::ForwardPrefill(const torch::Tensor& tokens, State& state) {
  return module_->ForwardPrefill(tokens, state);
}

torch::Tensor Qwen35Model::ForwardDecode(const torch::Tensor& tokens, State& state) {
  return module_->ForwardStep(tokens, state);
}

}  // namespace linserve
