#ifndef LINSERVE_ENGINE_RWKV7_H_
#define LINSERVE_ENGINE_RWKV7_H_

// RWKV-7 ("Goose") in LibTorch: the fast forms. The math is the fixtures'
// README (one token through one block); engine/rwkv7/rwkv7_reference.h states it
// token by token in float64 and the tests hold these forms to it.
//
// Precision: the weights and the matrix products in the compute dtype
// (float32, bfloat16 or float16); the residual stream, norms, gates, decays
// and the recurrent state in float32.
//
// State per layer and session (Rwkv7StateSpec below): the token-shift vectors
// of time mixing and channel mixing, (B, C) each, and the WKV matrices
// (B, H, N, N), rows indexed by value, columns by key.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "engine/cpu/huge_page_tensor.h"
#include "engine/cpu/quantized_linear.h"
#include "engine/model/weight_matrix.h"
#include "engine/rwkv7/rwkv7_config.h"
#include "engine/formats/safetensors.h"
#include "engine/model/state.h"

namespace linserve {

struct Rwkv7Options {
  // Weights and matrix products: float32, bfloat16 or float16.
  torch::ScalarType dtype = torch::kFloat32;
  // L of the chunked prefill's recurrence. The decay ratios inside a chunk
  // reach e^(0.61 L) (each token's decay is at least e^-0.61), so L <= 64
  // keeps them well inside float32.
  int64_t chunk_size = 32;
  // The big matrices (projections, channel mixing, head, embedding) in 8 or
  // 4 bits on the CPU (engine/cpu/quantized_linear.h), `dtype` then being the
  // low-rank matrices'; groups of `quantization_group` inputs per scale.
  WeightQuantization quantization = WeightQuantization::kNone;
  int64_t quantization_group = 32;
};

// Names of the per-layer state tensors, in order.
inline constexpr const char* kRwkv7AttShift = "att_shift";  // (C)
inline constexpr const char* kRwkv7FfnShift = "ffn_shift";  // (C)
inline constexpr const char* kRwkv7Wkv = "wkv";             // (H, N, N)

// One layer's state tensors, per session.
std::vector<StateTensorSpec> Rwkv7StateSpec(const Rwkv7Config& config);


// Time mixing ("att"): projections of the token-shifted input, gates, the WKV
// recurrence.
class Rwkv7TimeMixImpl : public torch::nn::Module {
 public:
  Rwkv7TimeMixImpl(const Rwkv7Config& config, int64_t layer, torch::ScalarType dtype);

  // mixed (6, B, T, C): the token-shift mixes of the LayerNorm'd x for r,
  // w, k, v, a and g, in the order of Mixes(). `v_first` is block 0's value
  // (B, T, C): set by block 0, read by the others. `wkv` (B, H, N, N) is
  // replaced by its value after the last token. `chunk` 0: the recurrent
  // step, token by token; otherwise the chunked form with chunks of `chunk`.
  torch::Tensor forward(const torch::Tensor& mixed, torch::Tensor& v_first, torch::Tensor& wkv,
                        int64_t chunk);
  // x_r, x_w, x_k, x_v, x_a, x_g.
  std::vector<torch::Tensor> Mixes() const;
  // The four C x C projections.
  std::vector<WeightMatrixImpl*> Linears();
  // See Rwkv7Impl::PackForCpu: the low-rank matrices, packed in place.
  void PackLowRankForCpu();

  torch::Tensor x_r, x_w, x_k, x_v, x_a, x_g;  // (C) token-shift mixes
  WeightMatrix receptance{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};  // (C, C)
  torch::Tensor w0, w1, w2;  // decay: (C), (C, Dw), (Dw, C)
  torch::Tensor a0, a1, a2;  // in-context learning rate: (C), (C, Da), (Da, C)
  torch::Tensor v0, v1, v2;  // value residual, blocks 1..: (C), (C, Dv), (Dv, C)
  torch::Tensor g1, g2;      // output gate: (C, Dg), (Dg, C)
  torch::Tensor k_k;         // (C) scales the removal key kk
  torch::Tensor k_a;         // (C) how far the rate a scales k
  torch::Tensor r_k;         // (H, N) the current token's bonus r.k
  torch::nn::GroupNorm ln_x{nullptr};  // H groups, eps 64e-5

 private:
  // What the low-rank products and gates make of a token, (B, T, C) each.
  struct Gates {
    torch::Tensor w;   // the log-decay, or the decay itself for the recurrent step
    torch::Tensor a;   // in-context learning rate
    torch::Tensor g;   // output gate
    torch::Tensor kk;  // removal key, normalised per head
  };
  // The gates from the mixes; k and v (B, T, C) become the adjusted key and
  // (blocks 1..) the value mixed with `v_first`, which block 0 sets to v.
  // `decay`: gates.w is the decay rather than its log.
  Gates ComputeGates(const torch::Tensor& xw, const torch::Tensor& xa, const torch::Tensor& xv,
                     const torch::Tensor& xg, torch::Tensor& k, torch::Tensor& v,
                     torch::Tensor& v_first, bool decay);

  const int64_t layer_;
  const int64_t n_heads_;
  const int64_t head_size_;
};
TORCH_MODULE(Rwkv7TimeMix);

// Channel mixing ("ffn"): value(relu(key(token-shifted x))^2).
class Rwkv7ChannelMixImpl : public torch::nn::Module {
 public:
  Rwkv7ChannelMixImpl(const Rwkv7Config& config, torch::ScalarType dtype);
  // xk (B, T, C): the token-shift mix of the LayerNorm'd x with x_k.
  torch::Tensor forward(const torch::Tensor& xk);

  torch::Tensor x_k;                          // (C) token-shift mix
  WeightMatrix key{nullptr}, value{nullptr};   // (F, C), (C, F)
};
TORCH_MODULE(Rwkv7ChannelMix);

class Rwkv7BlockImpl : public torch::nn::Module {
 public:
  Rwkv7BlockImpl(const Rwkv7Config& config, int64_t layer, torch::ScalarType dtype);
  // x (B, T, C) -> (B, T, C); `state` is this layer's (att_shift, ffn_shift, wkv).
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor& v_first, LayerState& state,
                        int64_t chunk);

  torch::nn::LayerNorm ln0{nullptr};  // block 0 only: the embedding's norm
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  Rwkv7TimeMix att{nullptr};
  Rwkv7ChannelMix ffn{nullptr};
};
TORCH_MODULE(Rwkv7Block);

// The whole model. Parameter names are the canonical checkpoint keys
// (engine/rwkv7/rwkv7_config.h). Not thread-safe: one thread owns a model and the
// states it advances.
class Rwkv7Impl : public torch::nn::Module {
 public:
  Rwkv7Impl(const Rwkv7Config& config, const Rwkv7Options& options);

  // Copies canonical weights (any float dtype) in, converting each to its
  // parameter's dtype; with options().quantization, the big matrices are
  // quantized from the given tensors instead (in one buffer in huge pages)
  // and their parameters left empty. Throws c10::Error on a missing name or
  // wrong shape.
  void LoadWeights(const TensorMap& weights);
  // The same for a file quantized beforehand: `quantized` holds every big
  // matrix by its weight's name (QuantizedMatrixNames), in the format and
  // group of options(); `weights` the rest. Throws c10::Error on a missing
  // or misfit matrix.
  void LoadWeights(const TensorMap& weights,
                   const std::map<std::string, QuantizedWeight>& quantized);
  // The weight names of the matrices options().quantization stores in 8 or
  // 4 bits: "emb.weight", every projection's and channel mixing's, "head.weight".
  std::vector<std::string> QuantizedMatrixNames() const;
  // Those matrices as they are held, by name (after LoadWeights with a
  // quantization; empty otherwise): what linserve-quantize writes.
  std::map<std::string, QuantizedWeight> QuantizedMatrices() const;

  // On a CPU with AVX-512 BF16, lays every bfloat16 weight matrix but the
  // embedding out for engine/cpu/cpu_bf16_product.h (replacing it: no second
  // copy), whose products then replace oneDNN's. On any CPU, the big
  // matrices (projections, channel mixing, head) move into one buffer in
  // huge pages where the system grants them (engine/cpu/huge_page_tensor.h).
  // Does nothing off the CPU. Call it once, after LoadWeights and on the device the module
  // will stay on: a packed module can neither load weights nor move.
  void PackForCpu();

  // Fresh states (zeros) for `batch` sessions on the model's device.
  State NewState(int64_t batch = 1) const;

  // tokens (B) int64, one per session at its own position -> logits (B, V)
  // float32; `state` advances by one.
  torch::Tensor ForwardStep(const torch::Tensor& tokens, State& state);
  // tokens (B, T), every session at the same position -> the logits after
  // each row's last token (B, V) float32; `state` advances by T. The state
  // tensors are replaced, never written in place.
  torch::Tensor ForwardPrefill(const torch::Tensor& tokens, State& state);

  const Rwkv7Config& config() const { return config_; }
  const Rwkv7Options& options() const { return options_; }
  torch::Device device() const { return emb->weight.device(); }

  torch::nn::Embedding emb{nullptr};  // (V, C); empty when quantized
  QuantizedWeight emb_quantized;      // the embedding, quantized: rows dequantized on lookup
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_out{nullptr};
  WeightMatrix head{nullptr};  // (V, C), not tied to emb

 private:
  // tokens (B, T) through every block; `chunk` as Rwkv7TimeMix. Returns the
  // logits after the last token.
  torch::Tensor Forward(const torch::Tensor& tokens, State& state, int64_t chunk);
  // The linear behind a name of QuantizedMatrixNames (nullptr: the embedding).
  std::map<std::string, WeightMatrixImpl*> QuantizableLinears();

  const Rwkv7Config config_;
  const Rwkv7Options options_;
};
TORCH_MODULE(Rwkv7);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_H_
