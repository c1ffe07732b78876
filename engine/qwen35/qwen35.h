#ifndef LINSERVE_ENGINE_QWEN35_H_
#define LINSERVE_ENGINE_QWEN35_H_

// Qwen3.5's dense text models in LibTorch: the fast CPU forms. The math is
// ../shared/qwen35/SPEC.md's, section 3 (one token through one layer);
// engine/qwen35/qwen35_reference.h states it token by token in float64 and
// the tests hold these forms to it.
//
// Precision: the big matrices and their products in the compute dtype
// (float32 or bfloat16) or in 8 or 4 bits; the residual stream, the norms,
// the gates, the convolution and the recurrent state in float32 (the state
// never in bfloat16: SPEC.md pitfall P6); the KV cache in float32 (or
// bfloat16 with Qwen35Options::kv_dtype).
//
// State per layer and session (Qwen35StateSpecs):
//   linear_attention layers: "conv" (K-1, conv_dim), the last K-1 raw
//     in_proj_qkv rows, oldest first; "recurrent" (Hv, d_v, d_k), each value
//     head's delta-rule state, rows indexed by value (vLLM's and MLX's
//     layout; Hugging Face's is its transpose, SPEC.md P7)
//   full_attention layers: "keys", "values" (nKV, T, D): the KV cache, keys
//     after their norm and RoPE; T grows with the position. Kept in blocks
//     of Qwen35Options::kv_block_tokens positions (State::tables); the state
//     file holds them whole.
//
// Every pass between the products is engine/qwen35/qwen35_cpu.h's, whose
// rows are independent of the rows around them: a session gives the same
// bits alone or in a batch, and a prompt cut anywhere gives the bits of one
// call. CPU only.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "engine/cpu/quantized_linear.h"
#include "engine/formats/safetensors.h"
#include "engine/model/state.h"
#include "engine/model/weight_matrix.h"
#include "engine/qwen35/qwen35_config.h"

namespace linserve {

struct Qwen35Options {
  // Weights and matrix products: float32 or bfloat16.
  torch::ScalarType dtype = torch::kFloat32;
  // The attention layers' KV cache: float32 or bfloat16.
  torch::ScalarType kv_dtype = torch::kFloat32;
  // The big matrices (projections, MLP, embedding, head) in 8 or 4 bits,
  // groups of `quantization_group` inputs per scale.
  WeightQuantization quantization = WeightQuantization::kNone;
  int64_t quantization_group = 32;
  // The KV cache's block: positions per block (State::tables). Forks and
  // snapshots share whole blocks, and a session that writes into a shared
  // block copies that one.
  int64_t kv_block_tokens = 64;
};

// Names of the per-layer state tensors.
inline constexpr const char* kQwen35Conv = "conv";
inline constexpr const char* kQwen35Recurrent = "recurrent";
inline constexpr const char* kQwen35Keys = "keys";
inline constexpr const char* kQwen35Values = "values";

// Each layer's state tensors, per session.
std::vector<std::vector<StateTensorSpec>> Qwen35StateSpecs(const Qwen35Config& config,
                                                           torch::ScalarType kv_dtype);

// One attention layer's KV cache for a batch: each session's blocks, which
// hold every position the step writes and are its own there.
struct Qwen35LayerCache {
  std::vector<TensorBlocks*> keys, values;
  int64_t block_tokens = 0;
};

// One vector parameter named "weight" (a norm's, the convolution's): the
// checkpoint's "<name>.weight".
class Qwen35VectorImpl : public torch::nn::Module {
 public:
  explicit Qwen35VectorImpl(std::vector<int64_t> shape);
  torch::Tensor weight;  // float32
};
TORCH_MODULE(Qwen35Vector);

// The Gated DeltaNet layer ("linear_attn").
class Qwen35GatedDeltaNetImpl : public torch::nn::Module {
 public:
  Qwen35GatedDeltaNetImpl(const Qwen35Config& config, torch::ScalarType dtype);
  // xn (N, H), N = B T rows session-major; `state` this layer's (conv,
  // recurrent), updated in place. Returns (N, H).
  torch::Tensor forward(const torch::Tensor& xn, LayerState& state, int64_t T);

  WeightMatrix in_proj_qkv{nullptr};  // (conv_dim, H)
  WeightMatrix in_proj_z{nullptr};    // (value_dim, H)
  WeightMatrix in_proj_b{nullptr};    // (Hv, H)
  WeightMatrix in_proj_a{nullptr};    // (Hv, H)
  Qwen35Vector conv1d{nullptr};       // (conv_dim, 1, K)
  torch::Tensor dt_bias;              // (Hv)
  torch::Tensor A_log;                // (Hv)
  Qwen35Vector norm{nullptr};         // (d_v), not zero-centred
  WeightMatrix out_proj{nullptr};     // (H, value_dim)

 private:
  const Qwen35Config config_;
};
TORCH_MODULE(Qwen35GatedDeltaNet);

// The gated full-attention layer ("self_attn").
class Qwen35AttentionImpl : public torch::nn::Module {
 public:
  Qwen35AttentionImpl(const Qwen35Config& config, torch::ScalarType dtype);
  // xn (N, H); `cache` this layer's, with room for every session's new
  // tokens (Qwen35Impl makes it); `positions` each session's first new
  // position. Returns (N, H).
  torch::Tensor forward(const torch::Tensor& xn, const Qwen35LayerCache& cache,
                        const std::vector<int64_t>& positions, int64_t T);

  WeightMatrix q_proj{nullptr};  // (2 nH D, H): per head, query then gate
  WeightMatrix k_proj{nullptr};  // (nKV D, H)
  WeightMatrix v_proj{nullptr};  // (nKV D, H)
  WeightMatrix o_proj{nullptr};  // (H, nH D)
  Qwen35Vector q_norm{nullptr};  // (D), zero-centred
  Qwen35Vector k_norm{nullptr};  // (D), zero-centred

 private:
  const Qwen35Config config_;
};
TORCH_MODULE(Qwen35Attention);

class Qwen35MlpImpl : public torch::nn::Module {
 public:
  Qwen35MlpImpl(const Qwen35Config& config, torch::ScalarType dtype);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) * up(x))

  WeightMatrix gate_proj{nullptr}, up_proj{nullptr};  // (I, H)
  WeightMatrix down_proj{nullptr};                    // (H, I)
};
TORCH_MODULE(Qwen35Mlp);

class Qwen35LayerImpl : public torch::nn::Module {
 public:
  Qwen35LayerImpl(const Qwen35Config& config, int64_t layer, torch::ScalarType dtype);
  // x (N, H) -> (N, H). `state` is a linear_attention layer's (conv,
  // recurrent), `cache` a full_attention layer's.
  torch::Tensor forward(const torch::Tensor& x, LayerState& state, const Qwen35LayerCache& cache,
                        const std::vector<int64_t>& positions, int64_t T);

  Qwen35Vector input_layernorm{nullptr}, post_attention_layernorm{nullptr};  // (H)
  Qwen35GatedDeltaNet linear_attn{nullptr};  // linear_attention layers
  Qwen35Attention self_attn{nullptr};        // full_attention layers
  Qwen35Mlp mlp{nullptr};

 private:
  const double eps_;
};
TORCH_MODULE(Qwen35Layer);

// The whole model. Parameter names are the canonical checkpoint keys
// (qwen35_config.h), plus "lm_head.weight" when the head is tied (a copy of
// the embedding, which the packed product cannot share). Not thread-safe.
class Qwen35Impl : public torch::nn::Module {
 public:
  Qwen35Impl(const Qwen35Config& config, const Qwen35Options& options);

  // Copies canonical weights (any float dtype) in, converting each to its
  // parameter's dtype; with options().quantization, the big matrices are
  // quantized from the given tensors (a tied head shares the embedding's
  // codes). Throws c10::Error naming a missing or misfit tensor.
  void LoadWeights(const TensorMap& weights);
  // The same with the big matrices already quantized (a file quantized
  // beforehand): `quantized` holds every QuantizedMatrixNames() entry (a
  // tied head may be left out: it takes the embedding's), `plain` the rest.
  void LoadWeights(const TensorMap& plain, const std::map<std::string, QuantizedWeight>& quantized);
  // Lays the big matrices out for the CPU's products, in huge pages. Once,
  // after LoadWeights.
  void PackForCpu();

  State NewState(int64_t batch = 1) const;
  // tokens (B) int64, one per session at its own position -> logits (B, V)
  // float32; `state` advances by one (in place).
  torch::Tensor ForwardStep(const torch::Tensor& tokens, State& state);
  // tokens (B, T), every session at the same position -> the logits after
  // each row's last token (B, V); `state`'s tensors are replaced.
  torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state);

  const Qwen35Config& config() const { return config_; }
  const Qwen35Options& options() const { return options_; }
  // The matrices options().quantization stores in 8 or 4 bits, by name.
  std::vector<std::string> QuantizedMatrixNames() const;
  // Those matrices as they are held, by name.
  std::map<std::string, QuantizedWeight> QuantizedMatrices() const;

  Qwen35Vector embed_tokens{nullptr};  // (V, H) in the compute dtype; empty when quantized
  QuantizedWeight embed_quantized;     // the embedding, quantized: rows dequantized on lookup
  torch::nn::ModuleList layers{nullptr};
  Qwen35Vector norm{nullptr};          // (H), zero-centred
  WeightMatrix lm_head{nullptr};       // (V, H)

 private:
  // tokens (B, T) through every layer from `positions`; the logits after
  // each session's last token.
  torch::Tensor Forward(const torch::Tensor& tokens, State& state, bool in_place);
  std::map<std::string, WeightMatrixImpl*> Matrices();

  const Qwen35Config config_;
  const Qwen35Options options_;
};
TORCH_MODULE(Qwen35);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_H_
