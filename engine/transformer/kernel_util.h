#ifndef LINSERVE_ENGINE_KERNEL_UTIL_H_
#define LINSERVE_ENGINE_KERNEL_UTIL_H_

// Small tensor helpers shared by the attention kernels (engine-internal).

#include <functional>

#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"
#include "engine/base/model_config.h"

namespace linserve {

// Added to every denominator; the forms agree on it, so it only matters when a
// denominator would otherwise be zero.
constexpr double kAttentionEps = 1e-6;

// The dtype of every state tensor that sums over positions (linear_* S and z,
// compressed's weighted sums, vq's U and N). Each addition rounds the sum to
// its own precision, so a term under half the sum's ulp is lost: in float32,
// once n tokens have added terms of similar size, from about n = 2^24 on, a
// new token no longer changes the state (vq's counts stop at 2^24 exactly).
// In float64 a term keeps about 53 - log2(n) of its bits, so every token keeps
// its weight to 2^53 tokens, past any length a session reaches. No sum can
// overflow: a term is a product of float32 numbers (with factors of at most 1
// against the running maximum for the exponential kinds), under 10^77, so
// even 2^63 of them stay far below float64's 10^308. The sums are read back
// as float32; only their accumulation needs the wider type.
constexpr torch::ScalarType kSumDtype = torch::kFloat64;

// Initial value of running maxima: finite (states never hold Inf) and low
// enough that exp(kRunningMaxFloor - x) is 0 for any real logit x.
constexpr double kRunningMaxFloor = -1e30;

// Boolean (Tq, Tk) mask, true where key j may be seen by query i: j <= i + offset.
torch::Tensor CausalMask(int64_t tq, int64_t tk, int64_t offset, const torch::Device& device);

// Softmax temperature per query for the softmax-family kinds, given the
// absolute positions of the queries (int64, any shape): 1/sqrt(d), or
// log_512(position + 1)/sqrt(d) for the entropy-invariant scale. float32.
torch::Tensor SoftmaxScale(const AttentionConfig& config, int64_t head_dim,
                           const torch::Tensor& positions);

// The chunked form's outer loop: calls `chunk_step(slice, position)` on
// consecutive slices of at most `chunk` tokens of `in` (every defined input
// narrowed alike; `position` is the slice's first absolute position) and
// concatenates the outputs along time. `chunk_step` carries the state.
torch::Tensor ForEachChunk(
    const AttentionInputs& in, int64_t chunk, int64_t start,
    const std::function<torch::Tensor(const AttentionInputs&, int64_t)>& chunk_step);

// Absolute positions start, ..., start + length - 1 (int64).
torch::Tensor PositionRange(int64_t start, int64_t length, const torch::Device& device);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_KERNEL_UTIL_H_
