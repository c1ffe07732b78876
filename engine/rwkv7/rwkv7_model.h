#ifndef LINSERVE_ENGINE_RWKV7_MODEL_H_
#define LINSERVE_ENGINE_RWKV7_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/rwkv7/rwkv7_config.h"
#include "engine/formats/safetensors.h"
#include "engine/model/state.h"
#include "engine/text/tokenizer.h"

namespace linserve {

// RWKV-7 ("Goose") behind the model interface (engine/rwkv7/rwkv7.h holds the
// math). A model is a directory holding exactly one `*.pth` or a
// `model.safetensors` (BlinkDL's tensor names or the fla-hub renames), plus
// an optional config.json:
//   {"architecture": "rwkv7", "weights": "<file name>",
//    "tokenizer": {"type": "rwkv_world"} or {"type": "bytes"}}
// ("weights" and "tokenizer" optional). The path may also be the weights
// file itself. Without a tokenizer in config.json: the World tokenizer for a
// vocabulary of 65,536, bytes for 256, otherwise an error asking for one.
class Rwkv7Model : public LanguageModel {
 public:
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> Load(const std::string& path,
                                                          const LoadOptions& options);
  // The same with config.json already parsed (LanguageModel::Load reads it
  // once); an empty object stands for none.
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> Load(const std::string& path,
                                                          const nlohmann::json& config,
                                                          const LoadOptions& options);
  // Random weights of `shape` (RandomRwkv7Weights; tests and benchmarks),
  // the tokenizer chosen by the vocabulary as for a directory without one,
  // bytes when it is neither 65,536 nor 256.
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> Create(const Rwkv7Config& shape,
                                                            uint64_t seed,
                                                            const LoadOptions& options);
  // A checkpoint's tensors already in memory, with the tokenizer given.
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> FromTensors(const TensorMap& tensors,
                                                                 Tokenizer tokenizer,
                                                                 const LoadOptions& options);
  // A module whose weights are already in (the reader of files quantized
  // beforehand, engine/rwkv7/rwkv7_quantized_file.h), the tokenizer chosen
  // from `config` as Load chooses it, the fingerprint given: that of the
  // float weights the module came from.
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> FromLoadedModule(
      Rwkv7 module, const nlohmann::json& config, std::string fingerprint,
      const std::string& where);

  // The compute dtype when LoadOptions leaves it unset: bfloat16 on CUDA and
  // on CPUs with bfloat16 matrix instructions (avx512_bf16 or amx_bf16: there
  // it is about twice as fast as float32 in decode and prefill, see
  // bench/RESULTS.md), float32 elsewhere.
  static torch::ScalarType DefaultDtype(const torch::Device& device);

  std::string architecture() const override { return "rwkv7"; }
  std::string attention_kind() const override { return "rwkv7"; }
  // The inferred shape, plus "architecture", "tokenizer" and "dtype".
  nlohmann::json ConfigJson() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  torch::Device device() const override { return module_->device(); }
  torch::ScalarType compute_dtype() const override { return module_->options().dtype; }
  WeightQuantization weight_quantization() const override {
    return module_->options().quantization;
  }
  int64_t prefill_chunk_size() const override { return module_->options().chunk_size; }
  WeightFootprint weight_footprint() const override { return FootprintOf(*module_); }
  // SHA-256 over the architecture's config JSON and the weights as float32
  // in name order, so that every file of the same weights (.pth in float32
  // or bfloat16, safetensors, either naming) and every compute dtype give
  // one fingerprint. The weights never change, so it is computed at load.
  std::string Fingerprint() const override { return fingerprint_; }
  const StateLayout& state_layout() const override { return state_layout_; }
  State NewState(int64_t batch = 1) const override { return module_->NewState(batch); }
  absl::StatusOr<State> StateFromTuningFile(std::string_view bytes) const override;

  const Rwkv7Config& config() const { return config_; }
  Rwkv7& module() { return module_; }
  const Rwkv7& module() const { return module_; }

 protected:
  torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state) override;
  torch::Tensor ForwardDecode(const torch::Tensor& tokens, State& state) override;

 private:
  Rwkv7Model(const Rwkv7Config& config, Rwkv7 module, Tokenizer tokenizer,
             std::string fingerprint);
  static absl::StatusOr<std::unique_ptr<Rwkv7Model>> Build(const Rwkv7Checkpoint& checkpoint,
                                                           Tokenizer tokenizer,
                                                           const LoadOptions& options);

  const Rwkv7Config config_;
  Rwkv7 module_;
  const Tokenizer tokenizer_;
  const StateLayout state_layout_;
  const std::string fingerprint_;
};

// The fingerprint Rwkv7Model::Fingerprint reports for canonical weights.
std::string Rwkv7Fingerprint(const Rwkv7Config& config, const TensorMap& weights);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_MODEL_H_
