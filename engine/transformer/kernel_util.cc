#include "engine/transformer/kernel_util.h"

#include <cmath>

#include <torch/types.h>

namespace linserve {

torch::Tensor CausalMask(int64_t tq, int64_t tk, int64_t offset, const torch::Device& device) {
  auto options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  torch::Tensor i = torch::arange(tq, options).unsqueeze(1);
  torch::Tensor j = torch::arange(tk, options).unsqueeze(0);
  return j <= i + offset;
}

torch::Tensor SoftmaxScale(const AttentionConfig& config, int64_t head_dim,
                           const torch::Tensor& positions) {
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(head_dim));
  if (config.scale == AttentionScale::kDefault) {
    return torch::full(positions.sizes(), inv_sqrt_d,
                       torch::TensorOptions().dtype(torch::kFloat32).device(positions.device()));
  }
  // log_512(n) with n = position + 1 attended positions.
  return (torch::log(positions.to(torch::kFloat64) + 1.0) * (inv_sqrt_d / std::log(512.0)))
      .to(torch::kFloat32);
}

torch::Tensor ForEachChunk(
    const AttentionInputs& in, int64_t chunk, int64_t start,
    const std::function<torch::Tensor(const AttentionInputs&, int64_t)>& chunk_step) {
  auto slice = [](const torch::Tensor& x, int64_t t0, int64_t len) {
    return x.defined() ? x.narrow(2, t0, len) : x;
  };
  const int64_t t = in.q.size(2);
  std::vector<torch::Tensor> outputs;
  for (int64_t t0 = 0; t0 < t; t0 += chunk) {
    const int64_t len = std::min(chunk, t - t0);
    AttentionInputs piece{slice(in.q, t0, len), slice(in.k, t0, len), slice(in.v, t0, len),
                          slice(in.slot_logits, t0, len)};
    outputs.push_back(chunk_step(piece, start + t0));
  }
  return torch::cat(outputs, 2);
}

torch::Tensor PositionRange(int64_t start, int64_t length, const torch::Device& device) {
  return torch::arange(start, start + length,
                       torch::TensorOptions().dtype(torch::kInt64).device(device));
}

}  // namespace linserve
