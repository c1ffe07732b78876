#ifndef LINSERVE_ENGINE_QWEN35_MODEL_H_
#define LINSERVE_ENGINE_QWEN35_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/model/state.h"
#include "engine/qwen35/qwen35.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/text/tokenizer.h"

namespace linserve {

// Qwen3.5's dense text models behind the model interface
// (engine/qwen35/qwen35.h holds the math). A model is a Hugging Face
// directory: config.json (the multimodal wrapper or a flat text config),
// the safetensors shards, tokenizer.json (engine/qwen35/qwen35_checkpoint.h
// reads them). CPU only.
class Qwen35Model : public LanguageModel {
 public:
  // `config` is the directory's config.json, already parsed.
  static absl::StatusOr<std::unique_ptr<Qwen35Model>> Load(const std::string& path,
                                                           const nlohmann::json& config,
                                                           const LoadOptions& options);
  // Canonical weights already in memory, with the tokenizer given.
  static absl::StatusOr<std::unique_ptr<Qwen35Model>> FromTensors(const Qwen35Config& config,
                                                                  const TensorMap& weights,
                                                                  Tokenizer tokenizer,
                                                                  const LoadOptions& options);

  // A module built and loaded elsewhere (a file quantized beforehand), with
  // the float weights' fingerprint.
  static std::unique_ptr<Qwen35Model> FromLoadedModule(const Qwen35Config& config, Qwen35 module,
                                                       Tokenizer tokenizer,
                                                       std::string fingerprint);

  // bfloat16 where the CPU has the packed bfloat16 product, else float32
  // (as RWKV-7's).
  static torch::ScalarType DefaultDtype();

  std::string architecture() const override { return "qwen3_5"; }
  std::string attention_kind() const override { return "gated_deltanet_hybrid"; }
  nlohmann::json ConfigJson() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  torch::Device device() const override { return torch::kCPU; }
  torch::ScalarType compute_dtype() const override { return module_->options().dtype; }
  WeightQuantization weight_quantization() const override {
    return module_->options().quantization;
  }
  WeightFootprint weight_footprint() const override;
  int64_t prefill_chunk_size() const override { return kPrefillChunk; }
  std::string Fingerprint() const override { return fingerprint_; }
  const StateLayout& state_layout() const override { return state_layout_; }
  State NewState(int64_t batch = 1) const override { return module_->NewState(batch); }

  const Qwen35Config& config() const { return config_; }
  Qwen35& module() { return module_; }
  const Qwen35& module() const { return module_; }

 protected:
  torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state) override;
  torch::Tensor ForwardDecode(const torch::Tensor& tokens, State& state) override;

 private:
  // Prompts are cut at multiples of this (the prefix cache's snapshots);
  // any cut gives the same bits.
  static constexpr int64_t kPrefillChunk = 64;

  Qwen35Model(const Qwen35Config& config, Qwen35 module, Tokenizer tokenizer,
              std::string fingerprint);

  const Qwen35Config config_;
  Qwen35 module_;
  const Tokenizer tokenizer_;
  const StateLayout state_layout_;
  const std::string fingerprint_;
};

// The module's options for a load's: the dtype (or the default), the KV
// cache's dtype and block, the quantization and its group, each checked
// (InvalidArgument naming the flag).
absl::StatusOr<Qwen35Options> Qwen35ModuleOptions(const LoadOptions& options);

// The fingerprint Qwen35Model::Fingerprint reports for canonical weights.
std::string Qwen35Fingerprint(const Qwen35Config& config, const TensorMap& weights);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_MODEL_H_
