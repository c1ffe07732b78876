#include "engine/transformer/attention.h"

#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/fixed_order_product.h"
#include "engine/transformer/kernels.h"
#include "engine/transformer/token_shift.h"
#include "engine/transformer/vq_codebook.h"

namespace linserve {

std::unique_ptr<AttentionKernel> MakeAttentionKernel(const ModelConfig& config,
                                                     const AttentionParams& params) {
  switch (config.attention.kind) {
    case AttentionKind::kSoftmax:
      return MakeSoftmaxKernel(config);
    case AttentionKind::kVq:
      return MakeVqKernel(config, params);
    case AttentionKind::kCompressed:
      return MakeCompressedKernel(config);
    default:
      return MakeLinearKernel(config);
  }
}

torch::Tensor LinearNoBias(const torch::Tensor& x, const torch::Tensor& weight,
                           const QuantizedWeight& quantized) {
  if (quantized.defined()) return QuantizedLinear(x, quantized).to(x.scalar_type());
  return LinearNoBias(x, weight);
}

torch::Tensor LinearNoBias(const torch::Tensor& x, const torch::Tensor& weight) {
  // Inference on the CPU: a row's bits must not depend on how many rows the
  // call has (prefill pieces, the decode batch), which the BLAS does not
  // promise (engine/cpu/fixed_order_product.h).
  if (CanUseFixedOrder(x, weight)) return FixedOrderCachedLinear(x, weight).to(x.scalar_type());
  // A one-row product through sgemm repacks the whole weight on every call;
  // a matrix-vector product reads it once.
  if (x.numel() == x.size(-1)) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return torch::mv(weight, x.reshape({x.size(-1)})).view(shape);
  }
  return torch::matmul(x, weight.t());
}

AttentionImpl::AttentionImpl(const ModelConfig& config) : config_(config) {
  const int64_t heads = config.n_heads, head_dim = config.head_dim, d_model = config.d_model;
  qkv = register_module(
      "qkv", torch::nn::Linear(torch::nn::LinearOptions(d_model, 3 * heads * head_dim).bias(false)));
  out = register_module(
      "out", torch::nn::Linear(torch::nn::LinearOptions(heads * head_dim, d_model).bias(false)));
  AttentionParams params;
  if (config.attention.kind == AttentionKind::kVq) {
    codebook = register_parameter(
        "codebook", torch::randn({heads, config.attention.codebook_size, head_dim}));
    window_bias = register_parameter("window_bias", torch::zeros({heads, config.attention.window}));
    // All zero until the first UpdateCodebook starts them from the codebook
    // (which a loaded model only has by then).
    ema_count = register_buffer("ema_count", torch::zeros({heads, config.attention.codebook_size}));
    ema_sum = register_buffer("ema_sum", torch::zeros_like(codebook));
    params = {codebook, window_bias};
  }
  if (config.attention.kind == AttentionKind::kCompressed) {
    slot_proj = register_module(
        "slot_proj",
        torch::nn::Linear(torch::nn::LinearOptions(d_model, heads * config.attention.slots).bias(false)));
  }
  kernel_ = MakeAttentionKernel(config, params);
  if (config.attention.token_shift) {
    // Channels start spread from "this position only" to "previous only",
    // so some of each kind of mix is there from the first step.
    shift_mix = register_parameter(
        "shift_mix", torch::linspace(0.0, 1.0, d_model).unsqueeze(0).repeat({3, 1}));
    kernel_ = WithTokenShiftState(std::move(kernel_), d_model);
  }
}

AttentionInputs AttentionImpl::Project(const torch::Tensor& x,
                                       const torch::Tensor& previous) const {
  const int64_t batch = x.size(0), t = x.size(1);
  const int64_t heads = config_.n_heads, head_dim = config_.head_dim;
  AttentionInputs in;
  if (shift_mix.defined()) {
    // Three inputs, so three products with the q, k and v rows of the weight.
    const torch::Tensor delta = previous - x;
    auto project = [&](int64_t i) {
      torch::Tensor mixed = x + delta * shift_mix[i];
      return LinearNoBias(mixed, qkv->weight.narrow(0, i * heads * head_dim, heads * head_dim),
                          quantized_qkv_rows_[i])
          .view({batch, t, heads, head_dim})
          .transpose(1, 2);
    };
    in.q = project(0);
    in.k = project(1);
    in.v = project(2);
  } else {
    // (B, T, 3, H, d) -> three (B, H, T, d)
    torch::Tensor fused =
        LinearNoBias(x, qkv->weight, quantized_qkv_).view({batch, t, 3, heads, head_dim});
    in.q = fused.select(2, 0).transpose(1, 2);
    in.k = fused.select(2, 1).transpose(1, 2);
    in.v = fused.select(2, 2).transpose(1, 2);
  }
  if (slot_proj) {
    in.slot_logits = LinearNoBias(x, slot_proj->weight, quantized_slot_proj_)
                         .view({batch, t, heads, config_.attention.slots})
                         .transpose(1, 2);  // (B, H, T, m)
  }
  return in;
}

namespace {
// (B, H, T, d) -> (B, T, H d)
torch::Tensor MergeHeads(const torch::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}
}  // namespace

torch::Tensor AttentionImpl::ForwardReference(const torch::Tensor& x) {
  torch::Tensor previous;
  if (shift_mix.defined()) previous = PreviousInputs(x, torch::zeros_like(x.select(1, 0)));
  AttentionInputs in = Project(x, previous);
  if (codebook.defined() && is_training() && torch::GradMode::is_enabled()) RecordCodes(in.k);
  return LinearNoBias(MergeHeads(kernel_->Reference(in)), out->weight, quantized_out_);
}

void AttentionImpl::RecordCodes(const torch::Tensor& k) {
  const int64_t heads = k.size(1), dim = k.size(3), codes = codebook.size(1);
  torch::Tensor nearest = NearestCodes(k.detach(), codebook);        // (B, H, T)
  commitment_ = (commitment_.defined() ? commitment_ : torch::zeros({}, k.options())) +
                (k - CodeVectors(nearest, codebook).detach()).square().sum(-1).mean();
  torch::NoGradGuard no_grad;
  torch::Tensor one_hot =                                              // (H, c, B T)
      torch::one_hot(nearest, codes).to(k.scalar_type()).permute({1, 3, 0, 2}).reshape({heads, codes, -1});
  torch::Tensor keys = k.detach().transpose(0, 1).reshape({heads, -1, dim});  // (H, B T, d)
  torch::Tensor count = one_hot.sum(-1);
  torch::Tensor sum = torch::matmul(one_hot, keys);
  recorded_count_ = recorded_count_.defined() ? recorded_count_ + count : count;
  recorded_sum_ = recorded_sum_.defined() ? recorded_sum_ + sum : sum;
}

torch::Tensor AttentionImpl::TakeCommitmentLoss() {
  torch::Tensor loss = commitment_.defined() ? commitment_ : torch::zeros({}, out->weight.options());
  commitment_ = torch::Tensor();
  return loss;
}

void AttentionImpl::UpdateCodebook(double decay) {
  if (!recorded_count_.defined()) return;
  torch::NoGradGuard no_grad;
  if (ema_count.sum().item<double>() == 0) {  // first update: start from the codebook
    ema_count.fill_(1.0);
    ema_sum.copy_(codebook);
  }
  ema_count.mul_(decay).add_(recorded_count_, 1.0 - decay);
  ema_sum.mul_(decay).add_(recorded_sum_, 1.0 - decay);
  // Laplace smoothing keeps codes no key chose from dividing by ~0.
  constexpr double kSmoothing = 1e-5;
  const torch::Tensor total = ema_count.sum(-1, true);
  const torch::Tensor smoothed =
      (ema_count + kSmoothing) / (total + kSmoothing * ema_count.size(-1)) * total;
  codebook.copy_(ema_sum / smoothed.unsqueeze(-1));
  recorded_count_ = torch::Tensor();
  recorded_sum_ = torch::Tensor();
}

torch::Tensor AttentionImpl::ForwardChunked(const torch::Tensor& x, int64_t start,
                                            LayerState& state) {
  torch::Tensor previous;
  if (shift_mix.defined()) previous = PreviousInputs(x, state.back());
  torch::Tensor y = kernel_->Chunked(Project(x, previous), start, state);
  if (shift_mix.defined()) state.back() = x.select(1, x.size(1) - 1).clone();
  return LinearNoBias(MergeHeads(y), out->weight, quantized_out_);
}

torch::Tensor AttentionImpl::ForwardStep(const torch::Tensor& x, const torch::Tensor& positions,
                                         LayerState& state) {
  torch::Tensor previous;
  if (shift_mix.defined()) previous = state.back().unsqueeze(1);
  torch::Tensor y =
      kernel_->Step(Project(x.unsqueeze(1), previous), positions, state);  // (B, H, 1, d)
  if (shift_mix.defined()) state.back() = x;
  return LinearNoBias(MergeHeads(y).squeeze(1), out->weight, quantized_out_);
}

void AttentionImpl::Quantize(WeightQuantization kind, int64_t group) {
  torch::NoGradGuard no_grad;
  const int64_t rows = config_.n_heads * config_.head_dim;
  quantized_qkv_ = QuantizeWeight(qkv->weight, kind, group);
  for (int64_t i = 0; i < 3; ++i) {
    quantized_qkv_rows_[i] = QuantizeWeight(qkv->weight.narrow(0, i * rows, rows), kind, group);
  }
  quantized_out_ = QuantizeWeight(out->weight, kind, group);
  if (slot_proj) quantized_slot_proj_ = QuantizeWeight(slot_proj->weight, kind, group);
}

}  // namespace linserve
