#include "engine/transformer/rope.h"

#include <torch/types.h>

namespace linserve {

RopeTables MakeRopeTables(const torch::Tensor& positions, int64_t dim, double theta,
                          torch::ScalarType dtype) {
  const int64_t half = dim / 2;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(positions.device());
  // inv_freq_i = theta^(-2i/dim)
  torch::Tensor inv_freq = torch::pow(theta, -torch::arange(0, half, f64) * 2.0 / dim);
  torch::Tensor angles = positions.to(torch::kFloat64).unsqueeze(-1) * inv_freq;  // (..., half)
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

torch::Tensor ApplyRope(const torch::Tensor& x, const RopeTables& tables) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half);
  torch::Tensor x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * tables.cos - x2 * tables.sin, x2 * tables.cos + x1 * tables.sin}, -1);
}

}  // namespace linserve
