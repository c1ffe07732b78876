#ifndef LINSERVE_ENGINE_MODEL_WEIGHT_MATRIX_H_
#define LINSERVE_ENGINE_MODEL_WEIGHT_MATRIX_H_

// The big weight matrices of the CPU-first architectures (RWKV-7, Qwen3.5):
// one module that holds a matrix in the form the CPU multiplies fastest
// (packed bfloat16, fixed-order float32, or 8 and 4 bits) and applies it.

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "engine/cpu/huge_page_tensor.h"
#include "engine/cpu/quantized_linear.h"

namespace linserve {

// True when the bfloat16 matrix `m`, read as (out, in) (`transposed`: as
// (in, out)), can take the packed bfloat16 product's layout on this CPU.
bool CanPackForCpu(const torch::Tensor& m, bool transposed);

// A weight matrix applied as W x (the checkpoint's "<name>.weight"), in the
// compute dtype; inputs and outputs float32. No initialisation: weights are
// always loaded.
class WeightMatrixImpl : public torch::nn::Module {
 public:
  WeightMatrixImpl(int64_t in, int64_t out, torch::ScalarType dtype);
  torch::Tensor forward(const torch::Tensor& x);  // (..., in) -> (..., out)
  // relu(forward(x))^2, the activation fused into a packed product.
  torch::Tensor ReluSquared(const torch::Tensor& x);
  // On the CPU: the weight moves into a piece of `arena` (huge pages), laid
  // out for the packed bfloat16 product where the CPU has one, else for the
  // fixed-order product; CpuBytes() is the piece's size. A packed matrix can
  // neither load weights nor move.
  int64_t CpuBytes() const;
  void PackForCpu(HugePageArena& arena);
  int64_t in_features() const { return in_; }

  torch::Tensor weight;  // (out, in), or packed for the CPU's product: bfloat16
                         // (engine/cpu/cpu_bf16_product.h) or fixed-order
                         // (engine/cpu/fixed_order_product.h); empty when quantized
  QuantizedWeight quantized;  // defined when the matrix is stored in 8 or 4 bits

 private:
  int64_t in_;
  int64_t out_;  // outputs: the fixed-order layout pads them to a multiple of 16
};
TORCH_MODULE(WeightMatrix);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_MODEL_WEIGHT_MATRIX_H_
