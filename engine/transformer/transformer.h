#ifndef LINSERVE_ENGINE_TRANSFORMER_H_
#define LINSERVE_ENGINE_TRANSFORMER_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "engine/transformer/attention.h"
#include "engine/base/model_config.h"
#include "engine/model/state.h"

namespace linserve {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (D) gain
 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // proj(gelu(fc(x)))
  // As AttentionImpl::Quantize.
  void Quantize(WeightQuantization kind, int64_t group);

  torch::nn::Linear fc{nullptr};    // D -> hidden
  torch::nn::Linear proj{nullptr};  // hidden -> D

 private:
  QuantizedWeight quantized_fc_, quantized_proj_;
};
TORCH_MODULE(Mlp);

// Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x)).
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor ForwardReference(const torch::Tensor& x);
  torch::Tensor ForwardChunked(const torch::Tensor& x, int64_t start, LayerState& state);
  torch::Tensor ForwardStep(const torch::Tensor& x, const torch::Tensor& positions,
                            LayerState& state);

  RMSNorm attn_norm{nullptr};
  Attention attn{nullptr};
  RMSNorm mlp_norm{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

// The decoder-only model (docs/DESIGN.md, "The model") with a tied output head.
// Not thread-safe: one thread owns a model and the states it advances.
class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& config);

  // tokens (B, T) from position 0 -> logits (B, T, V), quadratic forms.
  torch::Tensor ForwardReference(const torch::Tensor& tokens);
  // tokens (B, T) for sessions that all stand at the same position -> logits
  // (B, T, V); `state` advances by T.
  torch::Tensor ForwardChunked(const torch::Tensor& tokens, State& state);
  // tokens (B), one per session at its own position -> logits (B, V).
  torch::Tensor ForwardStep(const torch::Tensor& tokens, State& state);

  // vq training: the sum over layers of AttentionImpl::TakeCommitmentLoss,
  // and UpdateCodebook on every layer (no-ops for other kinds).
  torch::Tensor TakeCommitmentLoss();
  void UpdateCodebooks(double decay);

  // Inference in 8 or 4 bits on the CPU from then on: every projection,
  // and the tied embedding (the head's product, and rows dequantized on
  // lookup); the float weights stay for Weights() and the fingerprint.
  void Quantize(WeightQuantization kind, int64_t group);

  // A fresh batch of states on the model's device.
  State NewState(int64_t batch = 1) const;
  const ModelConfig& config() const { return config_; }
  const AttentionKernel& kernel() const;
  torch::Device device() const;

  torch::nn::Embedding embed{nullptr};  // (V, D), also the output head
  torch::nn::ModuleList blocks{nullptr};
  RMSNorm norm{nullptr};

 private:
  torch::Tensor Logits(const torch::Tensor& x);
  // The embedding's rows for `tokens`: (..., D).
  torch::Tensor Embed(const torch::Tensor& tokens);

  const ModelConfig config_;
  QuantizedWeight quantized_embed_;
};
TORCH_MODULE(Transformer);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TRANSFORMER_H_
