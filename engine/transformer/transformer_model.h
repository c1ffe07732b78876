#ifndef LINSERVE_ENGINE_TRANSFORMER_MODEL_H_
#define LINSERVE_ENGINE_TRANSFORMER_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/language_model.h"
#include "engine/base/model_config.h"
#include "engine/formats/safetensors.h"
#include "engine/model/state.h"
#include "engine/text/tokenizer.h"
#include "engine/transformer/transformer.h"

namespace linserve {

// The transformer architecture behind the model interface: a model directory
// (config.json + model.safetensors) of the decoder-only model in transformer.h
// with one of the attention kinds, always computed in float32. The trainer,
// evaluator and benchmarks use its extra members (the module, the config,
// Create and Save).
class TransformerModel : public LanguageModel {
 public:
  // `options.dtype` may only be float32 (or unset).
  static absl::StatusOr<std::unique_ptr<TransformerModel>> Load(const std::string& dir,
                                                                const LoadOptions& options);
  // The same with config.json already read (`dir` holds model.safetensors).
  static absl::StatusOr<std::unique_ptr<TransformerModel>> Load(const std::string& dir,
                                                                const ModelConfig& config,
                                                                const LoadOptions& options);
  // Random weights (tests, benchmarks, the start of training).
  static std::unique_ptr<TransformerModel> Create(const ModelConfig& config, uint64_t seed,
                                                  const torch::Device& device);
  absl::Status Save(const std::string& dir) const;

  // The weights by checkpoint key, on the CPU (what Save writes).
  TensorMap Weights() const;
  // ModelFingerprint of the current config and weights. Computed on every
  // call (tens of milliseconds for the default model), so it is never stale
  // while a trainer changes the weights: callers keep the value they need.
  std::string Fingerprint() const override;

  std::string architecture() const override { return "transformer"; }
  std::string attention_kind() const override;
  nlohmann::json ConfigJson() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  torch::Device device() const override { return module_->device(); }
  torch::ScalarType compute_dtype() const override { return torch::kFloat32; }
  WeightQuantization weight_quantization() const override { return quantization_; }
  int64_t prefill_chunk_size() const override { return config_.attention.chunk_size; }
  WeightFootprint weight_footprint() const override { return FootprintOf(*module_); }
  const StateLayout& state_layout() const override { return state_layout_; }
  State NewState(int64_t batch = 1) const override { return module_->NewState(batch); }

  const ModelConfig& config() const { return config_; }
  Transformer& module() { return module_; }
  const AttentionKernel& kernel() const { return module_->kernel(); }

 protected:
  torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state) override;
  torch::Tensor ForwardDecode(const torch::Tensor& tokens, State& state) override;

 private:
  TransformerModel(const ModelConfig& config, Transformer module);

  const ModelConfig config_;
  Transformer module_;
  WeightQuantization quantization_ = WeightQuantization::kNone;
  const Tokenizer tokenizer_;
  const StateLayout state_layout_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TRANSFORMER_MODEL_H_
