#include "engine/transformer/vq_codebook.h"

#include <torch/types.h>

#include "engine/cpu/fixed_order_product.h"

namespace linserve {

torch::Tensor CodeProducts(const torch::Tensor& x, const torch::Tensor& codebook) {
  const int64_t batch = x.size(0), heads = x.size(1), t = x.size(2), dim = x.size(3);
  torch::Tensor rows = x.transpose(0, 1).reshape({heads, batch * t, dim});  // (H, B T, d)
  // The nearest code must not depend on the other sessions or tokens in the
  // call: on the CPU, a product with a fixed order per output.
  const torch::Tensor products = CanUseFixedOrder(rows, codebook)
                                     ? FixedOrderGroupLinear(rows, codebook).to(rows.scalar_type())
                                     : torch::matmul(rows, codebook.transpose(-1, -2));
  return products                                                          // (H, B T, c)
      .view({heads, batch, t, codebook.size(1)})
      .transpose(0, 1);
}

torch::Tensor NearestCodes(const torch::Tensor& keys, const torch::Tensor& codebook) {
  torch::Tensor distance = codebook.square().sum(-1).unsqueeze(1) -  // (H, 1, c)
                           2 * CodeProducts(keys, codebook);         // (B, H, T, c)
  return distance.argmin(-1);
}

torch::Tensor CodeVectors(const torch::Tensor& codes, const torch::Tensor& codebook) {
  const int64_t batch = codes.size(0), heads = codes.size(1), t = codes.size(2);
  return codebook.unsqueeze(0)
      .expand({batch, heads, codebook.size(1), codebook.size(2)})
      .gather(2, codes.unsqueeze(-1).expand({batch, heads, t, codebook.size(2)}));
}

}  // namespace linserve
