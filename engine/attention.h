#ifndef LINSERVE_ENGINE_ATTENTION_H_
#define LINSERVE_ENGINE_ATTENTION_H_

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "engine/attention_kernel.h"
#include "engine/model_config.h"

namespace linserve {

// Multi-head attention of one block: projections around the kind's kernel.
// Parameter names are the checkpoint keys (blocks.N.attn.*).
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);

  // x (B, T, D) from position 0 -> (B, T, D). Quadratic; tests and evaluation.
  torch::Tensor ForwardReference(const torch::Tensor& x);
  // x (B, T, D) for sessions at `start` -> (B, T, D), replacing `state`.
  torch::Tensor ForwardChunked(const torch::Tensor& x, int64_t start, LayerState& state);
  // x (B, D), one token per session at `positions` (B) -> (B, D); in place.
  torch::Tensor ForwardStep(const torch::Tensor& x, const torch::Tensor& positions,
                            LayerState& state);

  const AttentionKernel& kernel() const { return *kernel_; }

  torch::nn::Linear qkv{nullptr};        // D -> 3 H d, fused q, k, v
  torch::nn::Linear out{nullptr};        // H d -> D
  torch::nn::Linear slot_proj{nullptr};  // compressed: D -> H m slot weights
  torch::Tensor codebook;                // vq: (H, c, d)
  torch::Tensor window_bias;             // vq: (H, W) relative bias b_{i-j}

 private:
  AttentionInputs Project(const torch::Tensor& x) const;  // x (B, T, D)

  const ModelConfig config_;
  std::unique_ptr<AttentionKernel> kernel_;
};
TORCH_MODULE(Attention);

// x W^T without the weight repacking OpenBLAS's sgemm does for a single row.
torch::Tensor LinearNoBias(const torch::Tensor& x, const torch::Tensor& weight);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ATTENTION_H_
