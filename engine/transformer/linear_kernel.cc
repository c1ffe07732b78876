// The linear_* kinds: o_i = phi(q_i)^T S_i / phi(q_i)^T z_i with
// S_i = sum_{j<=i} phi(k_j) v_j^T and z_i = sum_{j<=i} phi(k_j).
//
// linear_softmax uses phi(k) = e^k, which needs running maxima: the state keeps
// S and z relative to a per-feature maximum m_f, and every form measures its
// numerator and denominator relative to M_i = max_{j<=i, f} k_jf, so that the
// epsilon means the same thing in all three forms. Within a sequence the
// identity e^{k_jf - M_i} = e^{k_jf - M_j} * e^{M_j - M_i} (both factors <= 1
// for j <= i) keeps the quadratic part a pair of matrix products.
//
// rope rotates phi(q) and phi(k) in the numerator only, so the denominator
// stays positive; S then holds rotated features while z holds plain ones.
//
// S and z are sums over every position, so they are kept in float64
// (kSumDtype): in float32 a token's term falls below half the sum's ulp from
// about 2^24 tokens on and the state stops changing. Their size is no concern:
// each term is at most |phi(k)| |v| (at most e^0 = 1 times |v| for
// linear_softmax), so after n tokens they are at most n times that.

#include <torch/nn/functional.h>
#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/kernel_util.h"
#include "engine/transformer/kernels.h"
#include "engine/transformer/rope.h"

namespace linserve {
namespace {

namespace F = torch::nn::functional;

class LinearKernel : public AttentionKernel {
 public:
  explicit LinearKernel(const ModelConfig& config)
      : kind_(config.attention.kind),
        rope_(config.attention.rope),
        rope_theta_(config.attention.rope_theta),
        heads_(config.n_heads),
        head_dim_(config.head_dim),
        features_(kind_ == AttentionKind::kLinearCosine ? head_dim_ + 1 : head_dim_),
        chunk_(config.attention.chunk_size),
        track_max_(kind_ == AttentionKind::kLinearSoftmax) {}

  std::vector<StateTensorSpec> StateSpec() const override {
    std::vector<StateTensorSpec> spec = {{"S", {heads_, features_, head_dim_}, kSumDtype},
                                         {"z", {heads_, features_}, kSumDtype}};
    if (track_max_) spec.push_back({"m", {heads_, features_}, torch::kFloat32});
    return spec;
  }

  LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const override {
    LayerState state = {
        torch::zeros({batch, heads_, features_, head_dim_}, options.dtype(kSumDtype)),
        torch::zeros({batch, heads_, features_}, options.dtype(kSumDtype))};
    if (track_max_) {
      state.push_back(torch::full({batch, heads_, features_}, kRunningMaxFloor,
                                  options.dtype(torch::kFloat32)));
    }
    return state;
  }

  torch::Tensor Reference(const AttentionInputs& in) const override {
    const int64_t t = in.q.size(2);
    const torch::Tensor positions = PositionRange(0, t, in.q.device());
    const RopeTables rope = Tables(positions);
    const torch::Tensor causal = CausalMask(t, t, 0, in.q.device());
    torch::Tensor fq = FeatureQ(in.q);  // (B, H, T, F)
    torch::Tensor num_weights, den_weights;  // (B, H, T, T)
    if (!track_max_) {
      torch::Tensor fk = FeatureK(in.k);
      const torch::Tensor mask = causal.to(fq.dtype());
      num_weights = torch::matmul(Rotate(fq, rope), Rotate(fk, rope).transpose(-1, -2)) * mask;
      den_weights = torch::matmul(fq, fk.transpose(-1, -2)) * mask;
    } else {
      // M_i = max over j <= i and all features of k_jf.
      torch::Tensor running_max = std::get<0>(torch::cummax(in.k.amax(-1), -1));  // (B, H, T)
      torch::Tensor kappa = torch::exp(in.k - running_max.unsqueeze(-1));        // (B, H, T, F)
      torch::Tensor decay = PairwiseDecay(running_max, causal);                  // (B, H, T, T)
      num_weights = torch::matmul(Rotate(fq, rope), Rotate(kappa, rope).transpose(-1, -2)) * decay;
      den_weights = torch::matmul(fq, kappa.transpose(-1, -2)) * decay;
    }
    return torch::matmul(num_weights, in.v) / (den_weights.sum(-1, true) + kAttentionEps);
  }

  torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                        LayerState& state) const override {
    return ForEachChunk(in, chunk_, start, [&](const AttentionInputs& c, int64_t at) {
      return ChunkStep(c.q, c.k, c.v, at, state);
    });
  }

  // Broadcast multiplies and sums rather than bmm: LibTorch's CPU bmm without
  // MKL runs one small GEMM per (session, head), and at decode shapes those
  // calls cost more than the arithmetic.
  torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                     LayerState& state) const override {
    const int64_t batch = in.q.size(0);
    const RopeTables rope = Tables(positions.view({batch, 1, 1}));  // (B, 1, 1, F/2)
    const torch::Tensor& v = in.v;                                   // (B, H, 1, dv)
    torch::Tensor& s = state[0];                                     // (B, H, F, dv) float64
    torch::Tensor& z = state[1];                                     // (B, H, F) float64
    torch::Tensor fq = FeatureQ(in.q);                               // (B, H, 1, F)
    torch::Tensor query_weights;                                     // (B, H, 1, F)
    if (!track_max_) {
      torch::Tensor fk = FeatureK(in.k);
      s.addcmul_(Rotate(fk, rope).transpose(-1, -2), v);  // += phi(k) v^T
      z.add_(fk.squeeze(2));
      query_weights = fq;
    } else {
      torch::Tensor& m = state[2];                                   // (B, H, F)
      torch::Tensor k_row = in.k.squeeze(2);                         // (B, H, F)
      torch::Tensor new_max = torch::maximum(m, PairMax(k_row));
      torch::Tensor decay = torch::exp(m - new_max);
      torch::Tensor w = torch::exp(k_row - new_max);                 // <= 1
      s.mul_(decay.unsqueeze(-1)).addcmul_(Rotate(w.unsqueeze(2), rope).transpose(-1, -2), v);
      z.mul_(decay).add_(w);
      m.copy_(new_max);
      // Fold e^{m_f - M} into phi(q)_f, M = max_f m_f.
      query_weights = fq * torch::exp(m - m.amax(-1, true)).unsqueeze(2);
    }
    const torch::ScalarType dtype = in.q.scalar_type();
    torch::Tensor num = (Rotate(query_weights, rope).transpose(-1, -2) * s.to(dtype)).sum(-2, true);
    torch::Tensor den = (query_weights * z.to(dtype).unsqueeze(2)).sum(-1, true);  // (B, H, 1, 1)
    return num / (den + kAttentionEps);                                            // (B, H, 1, dv)
  }

 private:
  // One chunk of the chunked form: the quadratic part inside the chunk plus
  // the carried state; returns (B, H, Tc, dv) and replaces `state`.
  torch::Tensor ChunkStep(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          int64_t start, LayerState& state) const {
    const int64_t t = q.size(2);
    const RopeTables rope = Tables(PositionRange(start, t, q.device()));
    const torch::Tensor& s = state[0];             // (B, H, F, dv) float64
    const torch::Tensor& z = state[1];             // (B, H, F) float64
    const torch::Tensor s_read = s.to(q.dtype());  // float32 for the products
    const torch::Tensor z_read = z.to(q.dtype());
    torch::Tensor fq = FeatureQ(q);  // (B, H, Tc, F)
    torch::Tensor rq = Rotate(fq, rope);
    if (!track_max_) {
      torch::Tensor fk = FeatureK(k);
      torch::Tensor rk = Rotate(fk, rope);
      torch::Tensor intra = torch::matmul(torch::matmul(rq, rk.transpose(-1, -2)).tril(), v);
      torch::Tensor num = torch::matmul(rq, s_read) + intra;
      torch::Tensor den = (fq * (z_read.unsqueeze(2) + fk.cumsum(2))).sum(-1, true);
      state[0] = s + torch::matmul(rk.transpose(-1, -2), v);
      state[1] = z + fk.sum(2);
      return num / (den + kAttentionEps);
    }
    const torch::Tensor& m = state[2];  // (B, H, F)
    const torch::Tensor causal = CausalMask(t, t, 0, q.device());
    // M_i: the running maximum over the carried state and the chunk so far.
    torch::Tensor running_max = torch::maximum(std::get<0>(torch::cummax(k.amax(-1), -1)),
                                               m.amax(-1, true));  // (B, H, Tc)
    torch::Tensor kappa = torch::exp(k - running_max.unsqueeze(-1));  // (B, H, Tc, F)
    torch::Tensor decay = PairwiseDecay(running_max, causal);         // (B, H, Tc, Tc)
    torch::Tensor intra_num =
        torch::matmul(torch::matmul(rq, Rotate(kappa, rope).transpose(-1, -2)) * decay, v);
    torch::Tensor intra_den = (torch::matmul(fq, kappa.transpose(-1, -2)) * decay).sum(-1, true);
    // The carried state is relative to m_f <= M_i.
    torch::Tensor query_weights = fq * torch::exp(m.unsqueeze(2) - running_max.unsqueeze(-1));
    torch::Tensor num = torch::matmul(Rotate(query_weights, rope), s_read) + intra_num;
    torch::Tensor den = (query_weights * z_read.unsqueeze(2)).sum(-1, true) + intra_den;

    torch::Tensor new_max = torch::maximum(m, PairMax(k).amax(2));  // (B, H, F)
    torch::Tensor state_decay = torch::exp(m - new_max);
    torch::Tensor w = torch::exp(k - new_max.unsqueeze(2));          // (B, H, Tc, F), <= 1
    state[0] = s * state_decay.unsqueeze(-1) + torch::matmul(Rotate(w, rope).transpose(-1, -2), v);
    state[1] = z * state_decay + w.sum(2);
    state[2] = new_max;
    return num / (den + kAttentionEps);
  }

  // e^{M_j - M_i} for j <= i, else 0: (B, H, T, T) from running maxima (B, H, T).
  static torch::Tensor PairwiseDecay(const torch::Tensor& running_max, const torch::Tensor& causal) {
    torch::Tensor diff = running_max.unsqueeze(-2) - running_max.unsqueeze(-1);  // [i][j] = M_j - M_i
    return torch::exp(diff.masked_fill(causal.logical_not(), -std::numeric_limits<float>::infinity()));
  }

  torch::Tensor FeatureQ(const torch::Tensor& q) const {
    switch (kind_) {
      case AttentionKind::kLinearElu:
        return F::elu(q) + 1;
      case AttentionKind::kLinearSoftmax:
        return torch::softmax(q, -1);
      default:
        return CosineFeature(q);
    }
  }

  // linear_softmax returns k itself: its exponent is taken against a running max.
  torch::Tensor FeatureK(const torch::Tensor& k) const {
    return kind_ == AttentionKind::kLinearSoftmax ? k : FeatureQ(k);
  }

  // [1, x / |x|]: 1 + cos(q, k) as a dot product of features.
  static torch::Tensor CosineFeature(const torch::Tensor& x) {
    torch::Tensor unit = x * torch::rsqrt(x.square().sum(-1, true) + kAttentionEps);
    return torch::cat({torch::ones_like(unit.narrow(-1, 0, 1)), unit}, -1);
  }

  // Rotary tables for features: the cosine kind rotates x/|x|, not the constant 1.
  RopeTables Tables(const torch::Tensor& positions) const {
    if (!rope_) return {};
    return MakeRopeTables(positions, head_dim_, rope_theta_, torch::kFloat32);
  }

  torch::Tensor Rotate(const torch::Tensor& features, const RopeTables& tables) const {
    if (!rope_) return features;
    if (kind_ != AttentionKind::kLinearCosine) return ApplyRope(features, tables);
    return torch::cat({features.narrow(-1, 0, 1),
                       ApplyRope(features.narrow(-1, 1, head_dim_), tables)},
                      -1);
  }

  // With rope, rotated feature pairs (f, f + d/2) must share one running max,
  // or the rotation would mix numbers kept at different scales.
  torch::Tensor PairMax(const torch::Tensor& k) const {
    if (!rope_) return k;
    const int64_t half = head_dim_ / 2;
    torch::Tensor pair = torch::maximum(k.narrow(-1, 0, half), k.narrow(-1, half, half));
    return torch::cat({pair, pair}, -1);
  }

  const AttentionKind kind_;
  const bool rope_;
  const double rope_theta_;
  const int64_t heads_;
  const int64_t head_dim_;
  const int64_t features_;  // F: d, or d + 1 for cosine
  const int64_t chunk_;
  const bool track_max_;    // linear_softmax
};

}  // namespace

std::unique_ptr<AttentionKernel> MakeLinearKernel(const ModelConfig& config) {
  return std::make_unique<LinearKernel>(config);
}

}  // namespace linserve
