#ifndef LINSERVE_ENGINE_RWKV7_FUSED_CPU_H_
#define LINSERVE_ENGINE_RWKV7_FUSED_CPU_H_

// RWKV-7's element-wise work around the matrix products, as plain loops for
// float32 tensors on the CPU. A batch-1 decode step of the 0.1B shape ran
// about forty small LibTorch operations per layer (norms, token shift,
// gates, decay, the removal key), each costing 1 to 7 us of dispatch and
// allocation: with 4-bit weights about a quarter of the step (bench/RESULTS.md,
// "8- and 4-bit weights: where a batch-1 step goes"). Each function here is
// one pass over the rows instead.
//
// Every row is computed alone, by the same code, whichever thread takes it;
// each sum over a row has one fixed order (8 running partial sums, then
// those in order) and no vectorised transcendental is used, so a row's bits
// do not depend on the batch, its offset in it, the thread count or how a
// prefill is cut (docs/DESIGN.md, "What is bit-identical"). Thread-safe (no
// shared state).

#include <torch/types.h>

#include <vector>

namespace linserve {

// What NormShiftCpu returns.
struct NormShifted {
  torch::Tensor residual;  // (B, T, C): x + add, or x itself without `add`
  torch::Tensor mixed;     // (K, B, T, C): each row's K token-shift mixes
  torch::Tensor last;      // (B, C): the last row's LayerNorm, the next call's `shift`
};

// The residual x + add (x alone when `add` is undefined), its LayerNorm per
// row n (`weight`, `bias`, `eps`), and the token-shift mixes
// n + (p - n) * mixes[k], p the previous row's LayerNorm (`shift` for a
// session's first row). x, add (B, T, C); shift (B, C); weight, bias and
// each of the K mixes (C); all float32 on the CPU.
NormShifted NormShiftCpu(const torch::Tensor& x, const torch::Tensor& add,
                         const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                         const torch::Tensor& shift, const std::vector<torch::Tensor>& mixes);

// Time mixing's parameters for TimeMixGatesCpu, each (C) float32; v0
// undefined in block 0, which has no value residual.
struct TimeMixGateParams {
  torch::Tensor w0, a0, v0, k_k, k_a;
  int64_t head_size = 0;
};

// Time mixing between its products and the WKV recurrence, per row of C
// channels (heads of p.head_size), in place:
//   w   <- -e^-0.5 sigmoid(w + w0), the log-decay, or its exp with `decay`
//   a   <- sigmoid(a + a0)
//   v   <- lerp(v, v_first, sigmoid(v_lr + v0))   (when p.v0 is defined)
//   k   <- k (1 + (a - 1) k_a)
// and returns kk = normalize(k k_k) per head (from k before it changed).
// w, a, k, v (..., C) contiguous, replaced; v_lr, v_first the same shape
// (ignored when p.v0 is undefined); all float32 on the CPU.
torch::Tensor TimeMixGatesCpu(torch::Tensor& w, torch::Tensor& a, torch::Tensor& k,
                              torch::Tensor& v, const torch::Tensor& v_lr,
                              const torch::Tensor& v_first, const TimeMixGateParams& p, bool decay);

// t <- tanh(t) or sigmoid(t), in place, for the low-rank products' inner
// activations; t contiguous float32 on the CPU.
enum class Activation { kTanh, kSigmoid };
void ActivateInPlaceCpu(torch::Tensor& t, Activation activation);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_FUSED_CPU_H_
