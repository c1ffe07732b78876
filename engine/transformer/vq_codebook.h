#ifndef LINSERVE_ENGINE_VQ_CODEBOOK_H_
#define LINSERVE_ENGINE_VQ_CODEBOOK_H_

// The codebook arithmetic of the vq kind, shared by its kernel (inference)
// and its attention module (training).

#include <torch/types.h>

namespace linserve {

// x . C_c for every code of the head: x (B, H, T, d), codebook (H, c, d) ->
// (B, H, T, c). One matrix product per head over all sessions and positions;
// a broadcast matmul would expand the codebook to B x H small products.
torch::Tensor CodeProducts(const torch::Tensor& x, const torch::Tensor& codebook);

// The nearest code of each key, argmin_c |k - C_c|^2: (B, H, T, d) -> (B, H, T).
torch::Tensor NearestCodes(const torch::Tensor& keys, const torch::Tensor& codebook);

// C_{codes}: (B, H, T) -> (B, H, T, d).
torch::Tensor CodeVectors(const torch::Tensor& codes, const torch::Tensor& codebook);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_VQ_CODEBOOK_H_
