// vq (Transformer-VQ): keys are quantised to a learned codebook C (c x d) per
// head. Each query attends exactly, with a learned relative bias b_{i-j}, to
// the last W positions, and to every older position through the codebook:
// sum_{j <= i-W} e^{s q.C_{z_j}} v_j = sum_c e^{s q.C_c} U_c with
// U_c = sum of the values whose key has code c and N_c their count. So the
// state is U (c x dv), N (c) and a ring of the last W codes and values.
// Positions fill the ring at slot position % W. U and N are float64
// (kSumDtype): N counts exactly to 2^53 (float32 stops at 2^24) and U takes
// in every value however many precede it; both are read back as float32.

#include <limits>

#include <torch/types.h>

#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/kernel_util.h"
#include "engine/transformer/kernels.h"
#include "engine/transformer/vq_codebook.h"

namespace linserve {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class VqKernel : public AttentionKernel {
 public:
  VqKernel(const ModelConfig& config, const AttentionParams& params)
      : config_(config.attention),
        heads_(config.n_heads),
        head_dim_(config.head_dim),
        codes_(config.attention.codebook_size),
        window_(config.attention.window),
        codebook_(params.codebook),
        window_bias_(params.window_bias) {}

  std::vector<StateTensorSpec> StateSpec() const override {
    return {{"U", {heads_, codes_, head_dim_}, kSumDtype},
            {"N", {heads_, codes_}, kSumDtype},
            {"ring_code", {heads_, window_}, torch::kInt64},
            {"ring_value", {heads_, window_, head_dim_}, torch::kFloat32}};
  }

  LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const override {
    return {torch::zeros({batch, heads_, codes_, head_dim_}, options.dtype(kSumDtype)),
            torch::zeros({batch, heads_, codes_}, options.dtype(kSumDtype)),
            torch::zeros({batch, heads_, window_}, options.dtype(torch::kInt64)),
            torch::zeros({batch, heads_, window_, head_dim_}, options.dtype(torch::kFloat32))};
  }

  torch::Tensor Reference(const AttentionInputs& in) const override {
    const int64_t t = in.q.size(2);
    const torch::Tensor positions = PositionRange(0, t, in.q.device());
    // Straight-through keys: the value of the code, the gradient of the key
    // (the codebook itself learns by moving averages, not by gradient).
    torch::Tensor keys = in.k + (CodeVectors(Quantize(in.k), codebook_) - in.k).detach();
    torch::Tensor scores = torch::matmul(in.q, keys.transpose(-1, -2)) *  // (B, H, T, T)
                           SoftmaxScale(config_, head_dim_, positions).unsqueeze(-1);
    scores = scores + WindowBias(positions, positions);
    return torch::matmul(torch::softmax(scores, -1), in.v);
  }

  torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                        LayerState& state) const override {
    return ForEachChunk(in, config_.chunk_size, start, [&](const AttentionInputs& c, int64_t at) {
      return ChunkStep(c.q, c.k, c.v, at, state);
    });
  }

  torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                     LayerState& state) const override {
    const int64_t batch = in.q.size(0);
    torch::Tensor& sum_values = state[0];  // U (B, H, c, dv) float64
    torch::Tensor& counts = state[1];      // N (B, H, c) float64
    torch::Tensor& ring_code = state[2];   // (B, H, W)
    torch::Tensor& ring_value = state[3];  // (B, H, W, dv)
    torch::Tensor slot = torch::remainder(positions, window_).view({batch, 1, 1});
    torch::Tensor slot3 = slot.expand({batch, heads_, 1});
    torch::Tensor slot4 = slot.unsqueeze(-1).expand({batch, heads_, 1, head_dim_});

    // The position leaving the window (position - W) moves into U and N.
    torch::Tensor leaving = (positions >= window_).to(counts.dtype()).view({batch, 1, 1});
    torch::Tensor old_code = ring_code.gather(2, slot3);  // (B, H, 1)
    torch::Tensor old_value = ring_value.gather(2, slot4).to(kSumDtype) * leaving.unsqueeze(-1);
    sum_values.scatter_add_(2, old_code.unsqueeze(-1).expand({batch, heads_, 1, head_dim_}),
                            old_value);
    counts.scatter_add_(2, old_code, leaving.expand({batch, heads_, 1}));
    ring_code.scatter_(2, slot3, Quantize(in.k));
    ring_value.scatter_(2, slot4, in.v);

    // Window: slot r holds position p - ((p - r) mod W) when that is >= 0.
    torch::Tensor slots = torch::arange(window_, positions.options()).view({1, window_});
    torch::Tensor distance = torch::remainder(positions.view({batch, 1}) - slots, window_);
    torch::Tensor scale = SoftmaxScale(config_, head_dim_, positions).view({batch, 1, 1, 1});
    // A quantised key's score is its code's: q . C_{z_j} = (q C^T)[z_j].
    torch::Tensor query_codes = CodeProducts(in.q);  // (B, H, 1, c)
    torch::Tensor window_scores = query_codes.gather(-1, ring_code.unsqueeze(2)) * scale;
    torch::Tensor bias = window_bias_.index_select(1, distance.flatten())
                             .view({heads_, batch, 1, window_})
                             .permute({1, 0, 2, 3});  // (B, H, 1, W)
    window_scores = (window_scores + bias).masked_fill(
        (distance > positions.view({batch, 1})).view({batch, 1, 1, window_}), kNegInf);
    torch::Tensor code_scores = CodeScores(query_codes, scale, counts.unsqueeze(2));  // (B, H, 1, c)
    return Combine(window_scores, ring_value, code_scores, state);
  }

 private:
  // One chunk: the chunk's queries see the ring (positions start - W ..
  // start - 1) and the chunk exactly, and everything older through U and N.
  torch::Tensor ChunkStep(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          int64_t start, LayerState& state) const {
    const int64_t t = q.size(2);
    const int64_t carried = std::min(window_, start);
    const torch::Device device = q.device();
    torch::Tensor ring_slots = torch::remainder(PositionRange(start - carried, carried, device),
                                                window_);
    torch::Tensor codes = torch::cat({state[2].index_select(2, ring_slots), Quantize(k)}, 2);
    torch::Tensor values = torch::cat({state[3].index_select(2, ring_slots), v}, 2);
    torch::Tensor query_positions = PositionRange(start, t, device);
    torch::Tensor key_positions = PositionRange(start - carried, carried + t, device);
    torch::Tensor scale = SoftmaxScale(config_, head_dim_, query_positions).view({t, 1});
    torch::Tensor query_codes = CodeProducts(q);  // (B, H, T, c)
    torch::Tensor scores =                        // (B, H, T, E)
        query_codes.gather(-1, codes.unsqueeze(2).expand({-1, -1, t, -1})) * scale +
        WindowBias(query_positions, key_positions);
    torch::Tensor code_scores = CodeScores(query_codes, scale, state[1].unsqueeze(2));
    torch::Tensor out = Combine(scores, values, code_scores, state);

    // Positions that leave the window go into U and N; the rest is the ring.
    const int64_t kept = std::min(window_, start + t);
    const int64_t leaving = carried + t - kept;
    torch::Tensor leaving_codes = codes.narrow(2, 0, leaving);
    state[0] = state[0].scatter_add(2, leaving_codes.unsqueeze(-1).expand({-1, -1, -1, head_dim_}),
                                    values.narrow(2, 0, leaving).to(kSumDtype));
    state[1] = state[1].scatter_add(2, leaving_codes, torch::ones_like(leaving_codes, state[1].options()));
    torch::Tensor kept_slots = torch::remainder(key_positions.narrow(0, leaving, kept), window_);
    state[2] = state[2].index_copy(2, kept_slots, codes.narrow(2, leaving, kept));
    state[3] = state[3].index_copy(2, kept_slots, values.narrow(2, leaving, kept));
    return out;
  }

  torch::Tensor Quantize(const torch::Tensor& k) const { return NearestCodes(k, codebook_); }
  torch::Tensor CodeProducts(const torch::Tensor& x) const {
    return linserve::CodeProducts(x, codebook_);
  }

  // Bias b_{i-j} inside the window, 0 for older keys, -inf for future keys:
  // (H, Tq, Tk) for absolute query and key positions.
  torch::Tensor WindowBias(const torch::Tensor& query_positions,
                           const torch::Tensor& key_positions) const {
    torch::Tensor distance = query_positions.unsqueeze(1) - key_positions.unsqueeze(0);
    torch::Tensor in_window = (distance >= 0) & (distance < window_);
    torch::Tensor bias = window_bias_.index_select(1, distance.clamp(0, window_ - 1).flatten())
                             .view({heads_, distance.size(0), distance.size(1)});
    return (bias * in_window).masked_fill(distance < 0, kNegInf);
  }

  // s q . C_c, given query_codes = q . C_c, for the codes that hold at least
  // one position (others -inf).
  torch::Tensor CodeScores(const torch::Tensor& query_codes, const torch::Tensor& scale,
                           const torch::Tensor& counts) const {
    return (query_codes * scale).masked_fill(counts <= 0, kNegInf);
  }

  // a (B, H, T, n) times b (B, H, n, dv). A decode step (T = 1) multiplies
  // and sums instead: LibTorch's CPU bmm without MKL runs one small GEMM per
  // (session, head), which costs more than the arithmetic at that size.
  static torch::Tensor RowsTimes(const torch::Tensor& a, const torch::Tensor& b) {
    if (a.size(2) != 1) return torch::matmul(a, b);
    return (a.transpose(-1, -2) * b).sum(-2, true);
  }

  // Softmax over exact keys (scores (B, H, T, E), values (B, H, E, dv)) and
  // codes (code_scores (B, H, T, c), weighted by U and N from `state`).
  static torch::Tensor Combine(const torch::Tensor& scores, const torch::Tensor& values,
                               const torch::Tensor& code_scores, const LayerState& state) {
    const torch::Tensor sum_values = state[0].to(values.scalar_type());
    const torch::Tensor counts = state[1].to(values.scalar_type());
    torch::Tensor top = torch::maximum(scores.amax(-1, true), code_scores.amax(-1, true));
    torch::Tensor key_weights = torch::exp(scores - top);
    torch::Tensor code_weights = torch::exp(code_scores - top);
    torch::Tensor num = RowsTimes(key_weights, values) + RowsTimes(code_weights, sum_values);
    torch::Tensor den =
        key_weights.sum(-1, true) + (code_weights * counts.unsqueeze(2)).sum(-1, true);
    return num / (den + kAttentionEps);
  }

  const AttentionConfig config_;
  const int64_t heads_;
  const int64_t head_dim_;
  const int64_t codes_;
  const int64_t window_;
  const torch::Tensor codebook_;     // (H, c, d)
  const torch::Tensor window_bias_;  // (H, W)
};

}  // namespace

std::unique_ptr<AttentionKernel> MakeVqKernel(const ModelConfig& config,
                                              const AttentionParams& params) {
  return std::make_unique<VqKernel>(config, params);
}

}  // namespace linserve
