#include "engine/kernel_util.h"

#include <cmath>

#include <torch/torch.h>

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

torch::Tensor PositionRange(int64_t start, int64_t length, const torch::Device& device) {
  return torch::arange(start, start + length,
                       torch::TensorOptions().dtype(torch::kInt64).device(device));
}

}  // namespace linserve
