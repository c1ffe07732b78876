#ifndef LINSERVE_ENGINE_ATTENTION_KERNEL_H_
#define LINSERVE_ENGINE_ATTENTION_KERNEL_H_

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/base/model_config.h"
#include "engine/model/state.h"

namespace linserve {

// Per-head projections of one layer's input, shaped (B, H, T, d).
struct AttentionInputs {
  torch::Tensor q;
  torch::Tensor k;
  torch::Tensor v;
  torch::Tensor slot_logits;  // compressed only: (B, H, T, slots)
};

// The math of one attention kind in its three forms (docs/DESIGN.md, "The model").
// All forms take per-head inputs (B, H, T, d) and return outputs (B, H, T, dv).
// Kernels hold no mutable state of their own and are safe to share between
// threads; kind-specific parameters (codebook, window bias) are tensors shared
// with the owning module, so in-place training updates are seen here.
class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;

  virtual std::vector<StateTensorSpec> StateSpec() const = 0;

  // A batch of fresh states (position 0).
  virtual LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const = 0;

  // Quadratic masked form over whole sequences that start at position 0.
  // Written to be obviously right; used by tests and evaluation.
  virtual torch::Tensor Reference(const AttentionInputs& in) const = 0;

  // Chunked prefill: consumes T tokens of sessions that all stand at `start`,
  // chunk by chunk, replacing `state` (functional, so it is differentiable).
  virtual torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                                LayerState& state) const = 0;

  // One token (T = 1) for each of B sessions at their own `positions` (B,
  // int64, on the state's device), updating `state` in place.
  virtual torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                             LayerState& state) const = 0;

  // softmax only: the state's tensors grow along dimension 2 (B, H, T, d).
  virtual bool GrowsWithPosition() const { return false; }
};

// Kind-specific parameters, owned by the attention module.
struct AttentionParams {
  torch::Tensor codebook;     // vq: (H, codebook_size, d)
  torch::Tensor window_bias;  // vq: (H, window)
};

std::unique_ptr<AttentionKernel> MakeAttentionKernel(const ModelConfig& config,
                                                     const AttentionParams& params);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ATTENTION_KERNEL_H_
