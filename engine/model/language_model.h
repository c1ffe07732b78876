#ifndef LINSERVE_ENGINE_LANGUAGE_MODEL_H_
#define LINSERVE_ENGINE_LANGUAGE_MODEL_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/quantized_kernel.h"
#include "engine/model/state.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace linserve {

// "cpu", "cuda" or "cuda:N"; CUDA only when the LibTorch at hand has it.
absl::StatusOr<torch::Device> ParseDevice(const std::string& name);

// "float32", "bfloat16" or "float16".
absl::StatusOr<torch::ScalarType> ParseComputeDtype(const std::string& name);
const char* ComputeDtypeName(torch::ScalarType dtype);

struct LoadOptions;

// The server's --dtype: a compute dtype (ParseComputeDtype) or a weight
// format, "int8" or "int4" (the big matrices quantized, the rest in the
// architecture's default dtype), written into `options`.
absl::Status ApplyDtypeFlag(const std::string& name, LoadOptions& options);

struct LoadOptions {
  torch::Device device = torch::kCPU;
  // Precision of the weights and the matrix products (the recurrent state is
  // float32 whatever this says). Unset: the architecture's default for the
  // device. An architecture that supports only float32 refuses the others.
  std::optional<torch::ScalarType> dtype;
  // The big weight matrices stored in 8 or 4 bits (engine/cpu/quantized_kernel.h),
  // quantized at load from whatever dtype the file holds; CPU only. The
  // dtype above is then that of the small matrices.
  WeightQuantization quantization = WeightQuantization::kNone;
  // Inputs per scale, 32 or 64; 0 picks the format's default
  // (DefaultQuantizationGroup).
  int64_t quantization_group = 0;
  // The KV cache of the architectures that keep one beside their recurrent
  // state (Qwen3.5's attention layers): float32, or bfloat16 for half the
  // bytes. The state file records it, so a state moves only between servers
  // of the same KV dtype.
  torch::ScalarType kv_dtype = torch::kFloat32;
  // Positions per block of that KV cache: states made from one another (a
  // fork, a prefix-cache snapshot, a kept or named state) share whole blocks.
  int64_t kv_block_tokens = 64;
  // A Hugging Face tokenizer's bounds: its regexes' match and depth limits,
  // tokenizer.json's nesting, the pre-token cache (the server's flags).
  HfTokenizerOptions tokenizer;
};

// OK when `options` asks no quantization, or one on the CPU in groups of
// 0 (the default), 32 or 64; otherwise InvalidArgument saying which.
absl::Status CheckQuantizationOptions(const LoadOptions& options);

// The group size a format gets when LoadOptions leaves it 0 (the choice and
// its figures: docs/DESIGN.md, "8-bit and 4-bit weights").
int64_t DefaultQuantizationGroup(WeightQuantization kind);

// The engine's public face, whatever the architecture behind it: tokens and a
// state in, logits out, plus the state's layout so that the state file, the
// session pool and the scheduler never learn which architecture they serve
// (docs/DESIGN.md, "The model interface"). Each architecture is one subclass
// in its own files (transformer_model.h, rwkv7_model.h); `Load` picks it
// from the model directory.
//
// LibTorch exceptions stop here and come back as absl::Status.
// Not thread-safe: one thread owns the model and the states it advances.
}  // namespace linserve

namespace torch::nn {
class Module;
}

namespace linserve {

struct WeightFootprint {
  int64_t elements = 0;  // the tensors' elements: the parameter count of float weights
  int64_t bytes = 0;
};

// The parameters and buffers of `module` and its submodules.
WeightFootprint FootprintOf(const torch::nn::Module& module);

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // `path` is a model directory or, for formats that allow it, a weights
  // file. A directory whose config.json names no "architecture" is a
  // transformer; see docs/DESIGN.md for how each architecture is recognised.
  static absl::StatusOr<std::unique_ptr<LanguageModel>> Load(const std::string& path,
                                                             const LoadOptions& options);

  // "transformer" or "rwkv7".
  virtual std::string architecture() const = 0;
  // The transformer's attention kind, or the architecture's name.
  virtual std::string attention_kind() const = 0;
  // The configuration as GetModelInfo reports it (given or inferred).
  virtual nlohmann::json ConfigJson() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // Rows of the logits (may exceed the tokenizer's pieces).
  virtual int64_t vocab_size() const = 0;
  virtual torch::Device device() const = 0;
  // Precision of the weights and the matrix products.
  virtual torch::ScalarType compute_dtype() const = 0;
  // How the big weight matrices are stored: kNone (in compute_dtype), int8
  // or int4.
  virtual WeightQuantization weight_quantization() const { return WeightQuantization::kNone; }
  // "int8", "int4", or compute_dtype's name: what GetModelInfo reports.
  std::string WeightFormatName() const;
  // The weights as held in memory (quantized ones as stored), for the
  // server's start-up banner.
  virtual WeightFootprint weight_footprint() const = 0;
  // L of the chunked prefill: a Prefill call splits its tokens into chunks
  // of L from the call's first token (server/scheduling/prefill_pieces.h relies on it).
  virtual int64_t prefill_chunk_size() const = 0;
  // Identifies the weights (not the compute dtype): every saved state carries
  // it. Computed on every call; callers keep the value they need.
  virtual std::string Fingerprint() const = 0;

  // The state's tensors, per layer and session.
  virtual const StateLayout& state_layout() const = 0;
  // A batch of fresh states (position 0) on the model's device.
  virtual State NewState(int64_t batch = 1) const = 0;

  // Bytes of one session's state at `position` (constant unless it grows).
  int64_t StateBytes(int64_t position) const;
  bool StateGrowsWithPosition() const { return state_layout().Grows(); }

  // Chunked prefill of one session; returns the logits after the last token.
  absl::StatusOr<std::vector<float>> Prefill(State& state, absl::Span<const int64_t> tokens);
  // Chunked prefill of B sessions at once: `tokens` is B rows of equal length
  // (row-major) and every session stands at the same position. Returns the
  // logits after each row's last token, (B, V) float32 on CPU. On failure
  // `batch` is left as it was.
  absl::StatusOr<torch::Tensor> PrefillBatch(State& batch, absl::Span<const int64_t> tokens);
  // One decode step for every session of `batch`; logits (B, V), float32 on CPU.
  absl::StatusOr<torch::Tensor> Step(State& batch, absl::Span<const int64_t> tokens);

  // A one-session state read from a state-tuning file (an initial state
  // trained instead of the weights), for architectures that have them:
  // RWKV-7 reads RWKV-PEFT's .pth and ai00's safetensors (see
  // engine/rwkv7/rwkv7_tuned_state.h). UNIMPLEMENTED elsewhere.
  virtual absl::StatusOr<State> StateFromTuningFile(std::string_view bytes) const;

  std::vector<State> SplitState(const State& batch) const;
  std::string SerializeState(const State& state) const;
  absl::StatusOr<State> DeserializeState(std::string_view bytes) const;
  // DeserializeState's checks alone, reading `bytes` in place: the state's
  // position when DeserializeState would succeed.
  absl::StatusOr<int64_t> CheckSerializedState(std::string_view bytes) const;

 protected:
  // tokens (B, T) int64 on device(), every session at the same position;
  // advances `state` and its positions by T and returns the logits after each
  // row's last token, (B, V) in any dtype on any device. May throw c10::Error.
  // Must not modify the tensors of `state` in place (the caller keeps the
  // old ones to restore on failure); replacing them is fine.
  virtual torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state) = 0;
  // tokens (B) int64 on device(), one per session at its own position;
  // advances `state` by one (in place is fine) and returns logits (B, V).
  virtual torch::Tensor ForwardDecode(const torch::Tensor& tokens, State& state) = 0;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_LANGUAGE_MODEL_H_
