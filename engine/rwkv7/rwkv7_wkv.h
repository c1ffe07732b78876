#ifndef LINSERVE_ENGINE_RWKV7_WKV_H_
#define LINSERVE_ENGINE_RWKV7_WKV_H_

// RWKV-7's WKV recurrence in whole-tensor operations: the recurrent step (on
// the CPU it hands over to engine/rwkv7/rwkv7_wkv_cpu.h) and the chunked form
// the prefill uses on every device. Thread-safe (no shared state).

#include <torch/types.h>

#include <cstdint>

namespace linserve {

// The recurrent form, one token for each of B sessions; every input (B, H, N).
// S (B, H, N, N) <- S diag(w) - (S kk)(kk a)^T + v k^T, the S on the right all
// the previous one; returns y = S r with the new S, (B, H, N).
// Products and sums rather than matmul: LibTorch's CPU bmm makes one BLAS
// call per session and head for these matrix-vector products, which took
// about a third of a batch-32 decode step (bench/RESULTS.md, RWKV-7). On the
// CPU the same step runs as one loop over the state (engine/rwkv7/rwkv7_wkv_cpu.h).
torch::Tensor WkvStep(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                      const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                      torch::Tensor& S);

// The chunked form of the same recurrence (a generalised delta rule; WY/UT
// representation). Inside a chunk of L tokens starting from S0, with
// g_t = w_1 ... w_t per channel and b = kk a, the state divided by the decay,
// S_t diag(1/g_t), is S0 plus sum_j v_j (k_j/g_j)^T - u_j (b_j/g_j)^T, where
// u_j = S_{j-1} kk_j. So, with x_j = g_{j-1} kk_j, q_t = g_t r_t:
//   (I + Mb) U = X S0^T + Mk V     Mk_ji = x_j.(k_i/g_i), Mb_ji = x_j.(b_i/g_i), i < j
//   Y = Q S0^T + Rk V - Rb U       Rk_tj = q_t.(k_j/g_j), Rb_tj = q_t.(b_j/g_j), j <= t
//   S_L = S0 diag(g_L) + V^T Kbar - U^T Bbar   Kbar_j = k_j g_L/g_j, Bbar likewise
// Solving once for [W | Uv] = (I + Mb)^-1 [X | Mk V] makes U = Uv + W S0^T
// and everything but S0 known for all chunks at once:
//   Y = (Q - Rb W) S0^T + (Rk V - Rb Uv),  S_L = S0 (diag(g_L) - W^T Bbar) + (V^T Kbar - Uv^T Bbar)
// and the sequential part is one matrix product per chunk. Each factor g
// and 1/g is exact to float32 rounding (log-decays summed in float64) and at
// most e^(0.61 L); every ratio that survives the masks is at most 1.
// Inputs (B, T, H, N), `log_w` the log-decays; returns y (B, T, H, N).
// S is replaced, never written.
torch::Tensor WkvChunked(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S, int64_t L);

// The same tokens one WkvStep at a time (on the CPU, WkvStepsCpu: every token
// in one call, one pass over each session's and head's state per token, the
// bits of WkvStepCpu's). S is replaced, never written. Same inputs and result
// as WkvChunked.
torch::Tensor WkvSteps(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                       const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                       torch::Tensor& S);

// A prompt's WKV: stepped on the CPU, chunked elsewhere. On the CPU the
// chunked form lost to stepping at every length measured (0.1B shape,
// bfloat16, one session, whole prefill, bench/RESULTS.md): a chunk's algebra
// (twenty-odd LibTorch operations, float64 exponentials, a triangular
// solve) costs about as much for 1 token as for 32, which made a 16-token
// prompt's prefill 3.6 times a decode step, while the fused step is one pass
// over 16 KiB per head and token. Stepping also gives a prompt the same bits
// however it is cut into pieces. A device that runs the chunk's products in
// parallel is where the chunked form pays.
torch::Tensor WkvPrefill(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S, int64_t L);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_WKV_H_
