#ifndef LINSERVE_ENGINE_TOKEN_SHIFT_H_
#define LINSERVE_ENGINE_TOKEN_SHIFT_H_

// Token shift (as in RWKV): each of q, k and v is projected from a per-channel
// mix of the layer's input at this position and at the previous one, which
// gives every kind exact local order (byte-level text needs it; none of the
// linear kinds has positions otherwise). The carried state is one vector per
// layer: the previous position's input.

#include <memory>

#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"

namespace linserve {

// Wraps a kind's kernel so that its state carries one more tensor, "shift"
// (d_model), last in the layer's list. The wrapper only keeps it in the state;
// the attention module reads and replaces it.
std::unique_ptr<AttentionKernel> WithTokenShiftState(std::unique_ptr<AttentionKernel> inner,
                                                     int64_t d_model);

// x (B, T, D) and the input before it, last (B, D) -> (B, T, D): x shifted
// one position later, starting with `last`.
torch::Tensor PreviousInputs(const torch::Tensor& x, const torch::Tensor& last);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TOKEN_SHIFT_H_
