// compressed: m memory slots per head pool the keys and values they are fed,
// k̄_s = sum_j e^{w_js} k_j / sum_j e^{w_js} (v̄_s likewise, j <= i), with slot
// weights w_j = W_c x_j learned per position; each query then attends over the
// slots: o_i = sum_s softmax_s(s q_i . k̄_s) v̄_s. The state is the three
// weighted sums per slot, kept relative to a running max of w per slot: every
// weight is at most e^0 = 1, so the sums grow at most linearly with the
// position. They are float64 (kSumDtype), so that a token still adds its
// weight to them after 2^24 tokens, and are read back as float32.

#include <limits>

#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/kernel_util.h"
#include "engine/transformer/kernels.h"

namespace linserve {
namespace {

class CompressedKernel : public AttentionKernel {
 public:
  explicit CompressedKernel(const ModelConfig& config)
      : config_(config.attention),
        heads_(config.n_heads),
        head_dim_(config.head_dim),
        slots_(config.attention.slots) {}

  std::vector<StateTensorSpec> StateSpec() const override {
    return {{"sum_k", {heads_, slots_, head_dim_}, kSumDtype},
            {"sum_v", {heads_, slots_, head_dim_}, kSumDtype},
            {"sum_w", {heads_, slots_}, kSumDtype},
            {"max_w", {heads_, slots_}, torch::kFloat32}};
  }

  LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const override {
    const torch::TensorOptions sums = options.dtype(kSumDtype);
    return {torch::zeros({batch, heads_, slots_, head_dim_}, sums),
            torch::zeros({batch, heads_, slots_, head_dim_}, sums),
            torch::zeros({batch, heads_, slots_}, sums),
            torch::full({batch, heads_, slots_}, kRunningMaxFloor, options.dtype(torch::kFloat32))};
  }

  torch::Tensor Reference(const AttentionInputs& in) const override {
    const int64_t t = in.q.size(2);
    torch::Tensor w = in.slot_logits.permute({0, 1, 3, 2});            // (B, H, m, T)
    torch::Tensor running_max = std::get<0>(torch::cummax(w, -1));     // (B, H, m, T)
    // weights[i][j] = e^{w_j - M_i} for j <= i.
    torch::Tensor weights = torch::exp(
        (w.unsqueeze(-2) - running_max.unsqueeze(-1))
            .masked_fill(CausalMask(t, t, 0, w.device()).logical_not(),
                         -std::numeric_limits<float>::infinity()));  // (B, H, m, T, T)
    torch::Tensor total = weights.sum(-1).unsqueeze(-1) + kAttentionEps;   // (B, H, m, T, 1)
    torch::Tensor pooled_k = torch::matmul(weights, in.k.unsqueeze(2)) / total;  // (B, H, m, T, d)
    torch::Tensor pooled_v = torch::matmul(weights, in.v.unsqueeze(2)) / total;
    return AttendSlots(in.q, pooled_k, pooled_v, PositionRange(0, t, in.q.device()).view({t, 1}));
  }

  torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                        LayerState& state) const override {
    return ForEachChunk(in, config_.chunk_size, start, [&](const AttentionInputs& c, int64_t at) {
      return ChunkStep(c.q, c.k, c.v, c.slot_logits, at, state);
    });
  }

  torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                     LayerState& state) const override {
    const int64_t batch = in.q.size(0);
    torch::Tensor w = in.slot_logits.squeeze(2);              // (B, H, m)
    torch::Tensor new_max = torch::maximum(state[3], w);
    torch::Tensor decay = torch::exp(state[3] - new_max);
    torch::Tensor e = torch::exp(w - new_max);               // <= 1
    // sum <- sum * decay + e * x, for keys and values (B, H, m, d).
    state[0].mul_(decay.unsqueeze(-1)).addcmul_(e.unsqueeze(-1), in.k);
    state[1].mul_(decay.unsqueeze(-1)).addcmul_(e.unsqueeze(-1), in.v);
    state[2].mul_(decay).add_(e);
    state[3].copy_(new_max);
    const torch::ScalarType dtype = in.q.scalar_type();
    torch::Tensor total = state[2].unsqueeze(-1) + kAttentionEps;         // (B, H, m, 1)
    torch::Tensor pooled_k = (state[0] / total).to(dtype).unsqueeze(-2);  // (B, H, m, 1, d)
    torch::Tensor pooled_v = (state[1] / total).to(dtype).unsqueeze(-2);
    return AttendSlots(in.q, pooled_k, pooled_v, positions.view({batch, 1, 1, 1}));
  }

 private:
  torch::Tensor ChunkStep(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& slot_logits, int64_t start,
                          LayerState& state) const {
    const int64_t t = q.size(2);
    torch::Tensor w = slot_logits.permute({0, 1, 3, 2});  // (B, H, m, Tc)
    const torch::Tensor& max_w = state[3];                // (B, H, m)
    torch::Tensor running_max =
        torch::maximum(std::get<0>(torch::cummax(w, -1)), max_w.unsqueeze(-1));  // (B, H, m, Tc)
    torch::Tensor weights = torch::exp(
        (w.unsqueeze(-2) - running_max.unsqueeze(-1))
            .masked_fill(CausalMask(t, t, 0, w.device()).logical_not(),
                         -std::numeric_limits<float>::infinity()));  // (B, H, m, Tc, Tc)
    torch::Tensor carry = torch::exp(max_w.unsqueeze(-1) - running_max);  // (B, H, m, Tc)
    // Summed in float64 (the carried sum is float64), then read as float32.
    torch::Tensor total =
        (carry * state[2].unsqueeze(-1) + weights.sum(-1)).to(q.dtype()) + kAttentionEps;
    // The pooled keys and values k̄_{i,s} = (carry Σk_s + Σ_j w_sij k_j) / total_si
    // differ per query and slot: (B, H, m, Tc, d) each. Only their products
    // with q_i and with the slot probabilities are needed, so distribute those
    // over the sums instead and never form them: O(m Tc^2) work, not O(m Tc^2 d).
    torch::Tensor carried_scores =
        torch::matmul(state[0].to(q.dtype()), q.transpose(-1, -2));         // (B, H, m, Tc)
    torch::Tensor qk = torch::matmul(q, k.transpose(-1, -2)).unsqueeze(2);  // (B, H, 1, Tc, Tc)
    torch::Tensor scores = (carry * carried_scores + (weights * qk).sum(-1)) / total;
    torch::Tensor scale = SoftmaxScale(config_, head_dim_, PositionRange(start, t, q.device()));
    torch::Tensor per_pooled = torch::softmax(scores * scale, 2) / total;  // p_si / total_si
    torch::Tensor mix = (per_pooled.unsqueeze(-1) * weights).sum(2);      // (B, H, Tc, Tc)
    torch::Tensor out =
        torch::matmul(mix, v) +
        torch::matmul((per_pooled * carry).transpose(-1, -2), state[1].to(q.dtype()));

    torch::Tensor new_max = torch::maximum(max_w, w.amax(-1));      // (B, H, m)
    torch::Tensor decay = torch::exp(max_w - new_max);
    torch::Tensor e = torch::exp(w - new_max.unsqueeze(-1));        // (B, H, m, Tc)
    state[0] = state[0] * decay.unsqueeze(-1) + torch::matmul(e, k);
    state[1] = state[1] * decay.unsqueeze(-1) + torch::matmul(e, v);
    state[2] = state[2] * decay + e.sum(-1);
    state[3] = new_max;
    return out;
  }

  // softmax over slots of s q_i . k̄_{i,s}, then the weighted v̄:
  // q (B, H, T, d), pooled (B, H, m, T, d), positions broadcastable to (B, H, T, 1).
  torch::Tensor AttendSlots(const torch::Tensor& q, const torch::Tensor& pooled_k,
                            const torch::Tensor& pooled_v, const torch::Tensor& positions) const {
    torch::Tensor scale = SoftmaxScale(config_, head_dim_, positions);
    torch::Tensor scores = (q.unsqueeze(2) * pooled_k).sum(-1);                // (B, H, m, T)
    torch::Tensor probs = torch::softmax(scores * scale.squeeze(-1).unsqueeze(-2), 2);
    return (probs.unsqueeze(-1) * pooled_v).sum(2);                             // (B, H, T, d)
  }

  const AttentionConfig config_;
  const int64_t heads_;
  const int64_t head_dim_;
  const int64_t slots_;
};

}  // namespace

std::unique_ptr<AttentionKernel> MakeCompressedKernel(const ModelConfig& config) {
  return std::make_unique<CompressedKernel>(config);
}

}  // namespace linserve
