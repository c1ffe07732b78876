#ifndef LINSERVE_ENGINE_ROPE_H_
#define LINSERVE_ENGINE_ROPE_H_

#include <torch/types.h>

namespace linserve {

// Rotary position tables for absolute positions `positions` (any shape, int64).
// Angles are computed in float64 so that positions in the millions keep their
// precision; the tables come back in `dtype` with shape positions.shape + (dim/2).
struct RopeTables {
  torch::Tensor cos;
  torch::Tensor sin;
};
RopeTables MakeRopeTables(const torch::Tensor& positions, int64_t dim, double theta,
                          torch::ScalarType dtype);

// Rotates the last dimension of x (..., dim) pairwise as (x[:d/2], x[d/2:]),
// the "rotate half" convention. cos/sin broadcast against x[..., :dim/2].
torch::Tensor ApplyRope(const torch::Tensor& x, const RopeTables& tables);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ROPE_H_
