#ifndef LINSERVE_ENGINE_QWEN35_CPU_H_
#define LINSERVE_ENGINE_QWEN35_CPU_H_

// Qwen3.5's passes between the matrix products, as plain loops over float32
// CPU tensors: the norms, the Gated DeltaNet layer's convolution, gates and
// delta-rule recurrence, the attention layer's norms, RoPE and its attention
// over the KV cache, the MLP's activation.
//
// Every output is computed from its own row's inputs (and, for the
// recurrences and the attention, its session's state) in one fixed order,
// whatever the rows around it: a session gives the same bits alone or in a
// batch, and a prompt cut anywhere gives the bits of one call (the prefix
// cache and the decode batch rely on it; docs/DESIGN.md, "What is
// bit-identical"). The order depends only on the kernel family in force
// (engine/cpu/cpu_kernels.h): AVX-512 where the CPU has it, else plain loops.
// Thread-safe (no shared state).

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "engine/model/state.h"

namespace linserve {

// x (N, H) float32 -> x / sqrt(mean(x^2) + eps) * (1 + w) per row
// (`zero_centred`), or * w; w (H) float32.
torch::Tensor Qwen35RmsNormCpu(const torch::Tensor& x, const torch::Tensor& w, double eps,
                               bool zero_centred);

// silu(gate) * up, elementwise; both float32 of one shape.
torch::Tensor SiluGateCpu(const torch::Tensor& gate, const torch::Tensor& up);

struct GatedDeltaNetDims {
  int64_t key_heads = 0;    // Hk
  int64_t value_heads = 0;  // Hv, a multiple of Hk: value head h reads key head h / (Hv / Hk)
  int64_t key_dim = 0;      // d_k
  int64_t value_dim = 0;    // d_v
  int64_t kernel = 4;       // K of the causal convolution
  double eps = 1e-6;        // the gated output norm's
};

// The Gated DeltaNet layer after its four projections, for B sessions of T
// new tokens each (rows session-major: row b T + t).
//   qkv (B T, 2 Hk d_k + Hv d_v): in_proj_qkv's raw output, [q | k | v]
//   z (B T, Hv d_v), beta_logit (B T, Hv) = in_proj_b, a (B T, Hv) = in_proj_a
//   conv_weight (C, K), A_log, dt_bias (Hv), norm_weight (d_v): float32
//   conv_state (B, K-1, C): the last K-1 raw qkv rows, oldest first
//   S (B, Hv, d_v, d_k): each value head's state, rows indexed by value
// conv_state and S are updated in place through the T tokens. Per token and
// value head: the causal convolution and SiLU over q, k, v; q and k
// L2-normalised (eps 1e-6 inside the sum), q / sqrt(d_k); beta = sigmoid(b);
// g = -exp(A_log) softplus(a + dt_bias); S *= exp(g) first, then the delta
// rule S += (beta (v - S k)) k^T, o = S q; then RMSNorm(o) * w * silu(z).
// Returns o (B T, Hv d_v).
torch::Tensor GatedDeltaNetCpu(const torch::Tensor& qkv, const torch::Tensor& z,
                               const torch::Tensor& beta_logit, const torch::Tensor& a,
                               const torch::Tensor& conv_weight, const torch::Tensor& A_log,
                               const torch::Tensor& dt_bias, const torch::Tensor& norm_weight,
                               torch::Tensor& conv_state, torch::Tensor& S, int64_t T,
                               const GatedDeltaNetDims& dims);

struct GatedAttentionDims {
  int64_t heads = 0;     // nH
  int64_t kv_heads = 0;  // nKV; query head h reads key/value head h / (nH / nKV)
  int64_t head_dim = 0;  // D
  int64_t rotary_dim = 0;  // the first dims of each head that RoPE turns (NEOX halves)
  double rope_theta = 1e7;
  double eps = 1e-6;     // the q and k norms'
};

// The gated attention layer after its three projections, for B sessions of
// T new tokens each (rows session-major), session b's tokens at positions
// positions[b] .. positions[b] + T - 1.
//   qg (B T, nH 2 D): per head the query then its gate (interleaved per head)
//   k, v (B T, nKV D); q_norm, k_norm (D) float32, zero-centred
//   keys[b], values[b]: session b's cache in blocks (engine/model/state.h's
//   TensorBlocks), as the model keeps it: block j holds positions
//   [j block_tokens, (j + 1) block_tokens), (nKV, block_tokens, D)
//   contiguous, float32 or bfloat16 (rounded to nearest even as they are
//   written), one dtype, with blocks for every position up to
//   positions[b] + T. Each new token's k (normalised, turned) and v are
//   written at its position, so the blocks the new tokens go into must be
//   the caller's own (WritableBlocks); the earlier ones are read.
// Returns (B T, nH D): causal softmax attention (scale 1/sqrt(D)) of the
// normalised, turned queries over the cache, times sigmoid(gate). The bits
// are those of one contiguous cache: only where a row is read from changes.
torch::Tensor GatedAttentionCpu(const torch::Tensor& qg, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& q_norm,
                                const torch::Tensor& k_norm,
                                const std::vector<TensorBlocks*>& keys,
                                const std::vector<TensorBlocks*>& values, int64_t block_tokens,
                                const std::vector<int64_t>& positions, int64_t T,
                                const GatedAttentionDims& dims);
// The same over one contiguous cache per session (B, nKV, capacity, D).
torch::Tensor GatedAttentionCpu(const torch::Tensor& qg, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& q_norm,
                                const torch::Tensor& k_norm, torch::Tensor& keys,
                                torch::Tensor& values, const std::vector<int64_t>& positions,
                                int64_t T, const GatedAttentionDims& dims);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_CPU_H_
