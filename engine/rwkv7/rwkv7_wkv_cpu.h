#ifndef LINSERVE_ENGINE_RWKV7_WKV_CPU_H_
#define LINSERVE_ENGINE_RWKV7_WKV_CPU_H_

// RWKV-7's recurrent WKV step as a plain loop, for float32 tensors on the
// CPU. Each session's and head's S (N x N floats, 16 KiB at N = 64) is read
// once and written once, in place, both matrix-vector products done in the
// same pass (a new tensor each step also cost the page faults of 75 MB at
// batch 32);
// the whole-tensor form in engine/rwkv7/rwkv7_wkv.cc passes over the batch's state
// about a dozen times, which at batch 32 of the 0.1B shape (75 MB of state,
// out of cache behind the weights) took about a third of a decode step
// (bench/RESULTS.md, RWKV-7). Thread-safe (no shared state).

#include <torch/types.h>

namespace linserve {

// Inputs (B, H, N) float32 on the CPU: receptance r, decay w, key k, value v,
// removal key kk, in-context rate a. S (B, H, N, N), rows indexed by value,
// columns by key, is updated in place (made contiguous first if it is not) to
//   S diag(w) - (S kk)(kk a)^T + v k^T      (every S on the right the old one)
// and y = S r, with the new S, is returned, (B, H, N).
torch::Tensor WkvStepCpu(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S);

// The same for T tokens in order: inputs (T, B, H, N), S updated through all
// of them; returns y (T, B, H, N). One call per layer for a whole prompt,
// where a call per token cost a dozen LibTorch operations (views, checks, an
// output) per token and layer; each token's bits are WkvStepCpu's.
torch::Tensor WkvStepsCpu(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                          const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                          torch::Tensor& S);

// What time mixing makes of the step's y for one token per session, in one
// pass instead of LibTorch's dozen operations over the batch: per head,
// GroupNorm of y (its N values; `eps`) with `weight` and `bias`, plus the
// current token's bonus (r . (k * r_k)) v, all times the gate g.
// y, r, k, v (B, H, N); r_k (H, N); g (B, H*N); weight, bias (H*N); all
// float32 on the CPU. Returns (B, H*N).
torch::Tensor WkvOutputCpu(const torch::Tensor& y, const torch::Tensor& r, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& r_k,
                           const torch::Tensor& g, const torch::Tensor& weight,
                           const torch::Tensor& bias, double eps);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_WKV_CPU_H_
