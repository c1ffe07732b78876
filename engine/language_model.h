#ifndef LINSERVE_ENGINE_LANGUAGE_MODEL_H_
#define LINSERVE_ENGINE_LANGUAGE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine/state.h"
#include "engine/transformer.h"

namespace linserve {

// "cpu", "cuda" or "cuda:N"; CUDA only when the LibTorch at hand has it.
absl::StatusOr<torch::Device> ParseDevice(const std::string& name);

// The engine's public face: a model directory (config.json +
// model.safetensors) loaded onto a device, with the prefill and decode forms.
// LibTorch exceptions stop here and come back as absl::Status.
// Not thread-safe: one thread owns the model and the states it advances.
class LanguageModel {
 public:
  static absl::StatusOr<std::unique_ptr<LanguageModel>> Load(const std::string& dir,
                                                             const torch::Device& device);
  // Random weights (tests, benchmarks, the start of training).
  static std::unique_ptr<LanguageModel> Create(const ModelConfig& config, uint64_t seed,
                                               const torch::Device& device);
  absl::Status Save(const std::string& dir) const;

  // The weights by checkpoint key, on the CPU (what Save writes).
  TensorMap Weights() const;
  // ModelFingerprint of the current config and weights. Computed on every
  // call (tens of milliseconds for the default model), so it is never stale
  // while a trainer changes the weights: callers keep the value they need.
  std::string Fingerprint() const;

  const ModelConfig& config() const { return config_; }
  Transformer& module() { return module_; }
  const AttentionKernel& kernel() const { return module_->kernel(); }
  torch::Device device() const { return module_->device(); }

  State NewState() const { return module_->NewState(1); }
  int64_t StateBytes(int64_t position) const;

  // Chunked prefill of one session; returns the logits after the last token.
  absl::StatusOr<std::vector<float>> Prefill(State& state, absl::Span<const int64_t> tokens);
  // Chunked prefill of B sessions at once: `tokens` is B rows of equal length
  // (row-major) and every session stands at the same position. Returns the
  // logits after each row's last token, (B, V) float32 on CPU.
  absl::StatusOr<torch::Tensor> PrefillBatch(State& batch, absl::Span<const int64_t> tokens);
  // One decode step for every session of `batch`; logits (B, V), float32 on CPU.
  absl::StatusOr<torch::Tensor> Step(State& batch, absl::Span<const int64_t> tokens);

  std::string SerializeState(const State& state) const;
  absl::StatusOr<State> DeserializeState(std::string_view bytes) const;

 private:
  LanguageModel(const ModelConfig& config, Transformer module);

  const ModelConfig config_;
  Transformer module_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_LANGUAGE_MODEL_H_
