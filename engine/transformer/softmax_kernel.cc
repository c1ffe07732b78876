// The softmax baseline: exact causal attention over a KV cache that grows
// with the position. Only here to be compared against.

#include <limits>

#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/kernel_util.h"
#include "engine/transformer/kernels.h"
#include "engine/transformer/rope.h"

namespace linserve {
namespace {

class SoftmaxKernel : public AttentionKernel {
 public:
  explicit SoftmaxKernel(const ModelConfig& config)
      : config_(config.attention), heads_(config.n_heads), head_dim_(config.head_dim) {}

  std::vector<StateTensorSpec> StateSpec() const override {
    return {{"k", {heads_, -1, head_dim_}, torch::kFloat32},
            {"v", {heads_, -1, head_dim_}, torch::kFloat32}};
  }

  LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const override {
    return {torch::zeros({batch, heads_, 0, head_dim_}, options),
            torch::zeros({batch, heads_, 0, head_dim_}, options)};
  }

  bool GrowsWithPosition() const override { return true; }

  torch::Tensor Reference(const AttentionInputs& in) const override {
    const int64_t t = in.q.size(2);
    const torch::Tensor positions = PositionRange(0, t, in.q.device());
    return Attend(Rotate(in.q, positions), Rotate(in.k, positions), in.v, positions,
                  CausalMask(t, t, 0, in.q.device()));
  }

  torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                        LayerState& state) const override {
    const int64_t t = in.q.size(2);
    const torch::Tensor positions = PositionRange(start, t, in.q.device());
    torch::Tensor keys = torch::cat({state[0].narrow(2, 0, start), Rotate(in.k, positions)}, 2);
    torch::Tensor values = torch::cat({state[1].narrow(2, 0, start), in.v}, 2);
    torch::Tensor q = Rotate(in.q, positions);
    // Queries a chunk at a time keep the score matrix at L x (start + T).
    std::vector<torch::Tensor> outputs;
    for (int64_t t0 = 0; t0 < t; t0 += config_.chunk_size) {
      const int64_t len = std::min(config_.chunk_size, t - t0);
      const int64_t visible = start + t0 + len;
      outputs.push_back(Attend(q.narrow(2, t0, len), keys.narrow(2, 0, visible),
                               values.narrow(2, 0, visible), positions.narrow(0, t0, len),
                               CausalMask(len, visible, start + t0, q.device())));
    }
    state = {keys, values};
    return torch::cat(outputs, 2);
  }

  torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                     LayerState& state) const override {
    const int64_t batch = in.q.size(0);
    const int64_t needed = positions.max().item<int64_t>() + 1;
    // Grow the cache geometrically so that decode appends stay amortised O(1).
    if (state[0].size(2) < needed) {
      const int64_t capacity = std::max<int64_t>({needed, 2 * state[0].size(2), 16});
      for (torch::Tensor& cache : state) {
        torch::Tensor grown = torch::zeros({batch, heads_, capacity, head_dim_}, cache.options());
        grown.narrow(2, 0, cache.size(2)).copy_(cache);
        cache = grown;
      }
    }
    torch::Tensor where = positions.view({batch, 1, 1, 1}).expand({batch, heads_, 1, head_dim_});
    state[0].scatter_(2, where, Rotate(in.k, positions.view({batch, 1, 1})));
    state[1].scatter_(2, where, in.v);
    const int64_t capacity = state[0].size(2);
    torch::Tensor key_index = torch::arange(capacity, positions.options()).view({1, 1, 1, capacity});
    torch::Tensor visible = key_index <= positions.view({batch, 1, 1, 1});  // (B, 1, 1, cap)
    return Attend(Rotate(in.q, positions.view({batch, 1, 1})), state[0], state[1],
                  positions.view({batch, 1, 1, 1}), visible);
  }

 private:
  // softmax(s_i q_i . k_j) v over the keys `visible` marks; `positions` are the
  // queries' absolute positions, broadcastable to the scores' leading dims.
  torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& positions, const torch::Tensor& visible) const {
    torch::Tensor scale = SoftmaxScale(config_, head_dim_, positions);
    if (scale.dim() == 1) scale = scale.unsqueeze(-1);               // (T, 1) against (.., T, Tk)
    torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
    scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1), v);
  }

  torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& positions) const {
    if (!config_.rope) return x;
    return ApplyRope(x, MakeRopeTables(positions, head_dim_, config_.rope_theta, x.scalar_type()));
  }

  const AttentionConfig config_;
  const int64_t heads_;
  const int64_t head_dim_;
};

}  // namespace

std::unique_ptr<AttentionKernel> MakeSoftmaxKernel(const ModelConfig& config) {
  return std::make_unique<SoftmaxKernel>(config);
}

}  // namespace linserve
