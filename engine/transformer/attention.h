#ifndef LINSERVE_ENGINE_ATTENTION_H_
#define LINSERVE_ENGINE_ATTENTION_H_

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "engine/cpu/quantized_linear.h"
#include "engine/transformer/attention_kernel.h"
#include "engine/base/model_config.h"

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

  // vq training (Transformer-VQ): in training mode with gradients on,
  // ForwardReference records each key's nearest code; this returns the
  // commitment loss mean_k |k - sg(C_z)|^2 of the passes since the last call
  // (a zero scalar for other kinds or when nothing was recorded).
  torch::Tensor TakeCommitmentLoss();
  // vq training, after an optimizer step: every code moves to the moving
  // average (decay `decay`) of the keys recorded for it; clears the record.
  void UpdateCodebook(double decay);

  // Inference in 8 or 4 bits on the CPU: quantized copies of the
  // projections (q, k and v each, as token shift multiplies them apart),
  // used from then on in place of the float ones, which stay.
  void Quantize(WeightQuantization kind, int64_t group);

  torch::nn::Linear qkv{nullptr};        // D -> 3 H d, fused q, k, v
  torch::nn::Linear out{nullptr};        // H d -> D
  torch::nn::Linear slot_proj{nullptr};  // compressed: D -> H m slot weights
  torch::Tensor codebook;                // vq: (H, c, d)
  torch::Tensor window_bias;             // vq: (H, W) relative bias b_{i-j}
  torch::Tensor shift_mix;               // token_shift: (3, D) weight of the previous
                                         // input in q's, k's and v's input
  torch::Tensor ema_count;               // vq training buffer: keys per code (H, c)
  torch::Tensor ema_sum;                 // vq training buffer: their sum (H, c, d)

 private:
  // x (B, T, D); `previous` (B, T, D) is the input one position earlier,
  // used (and required) with token_shift only.
  AttentionInputs Project(const torch::Tensor& x, const torch::Tensor& previous) const;
  void RecordCodes(const torch::Tensor& k);               // k (B, H, T, d)

  const ModelConfig config_;
  std::unique_ptr<AttentionKernel> kernel_;
  // Quantize's copies: qkv whole and its q, k and v rows, out, slot_proj.
  QuantizedWeight quantized_qkv_, quantized_qkv_rows_[3], quantized_out_, quantized_slot_proj_;
  // vq training: what RecordCodes saw since the last take or update.
  torch::Tensor commitment_;     // sum of the recorded passes' losses
  torch::Tensor recorded_count_;  // (H, c)
  torch::Tensor recorded_sum_;    // (H, c, d)
};
TORCH_MODULE(Attention);

// x W^T. Inference on the CPU goes through the fixed-order product, whose
// rows' bits do not depend on the rows around them
// (engine/cpu/fixed_order_product.h); training through LibTorch's.
torch::Tensor LinearNoBias(const torch::Tensor& x, const torch::Tensor& weight);
// The same through `quantized`, the weight in 8 or 4 bits, when it is defined.
torch::Tensor LinearNoBias(const torch::Tensor& x, const torch::Tensor& weight,
                           const QuantizedWeight& quantized);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ATTENTION_H_
