#include "engine/model/weight_matrix.h"

#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/fixed_order_product.h"

namespace linserve {

bool CanPackForCpu(const torch::Tensor& m, bool transposed) {
  if (!m.defined() || !m.is_cpu() || m.dim() != 2 || m.scalar_type() != torch::kBFloat16 ||
      !HasCpuBf16Product()) {
    return false;
  }
  return transposed ? CanPackBf16(m.size(1), m.size(0)) : CanPackBf16(m.size(0), m.size(1));
}

WeightMatrixImpl::WeightMatrixImpl(int64_t in, int64_t out, torch::ScalarType dtype)
    : in_(in), out_(out) {
  // Uninitialised: LoadWeights fills it, or, for 8- and 4-bit weights,
  // drops it untouched (no page of it is ever resident).
  weight = register_parameter("weight", torch::empty({out, in}, dtype), /*requires_grad=*/false);
}

int64_t WeightMatrixImpl::CpuBytes() const {
  if (quantized.defined()) return 0;  // in the quantized matrices' own buffer
  if (CanPackForCpu(weight, /*transposed=*/false) ||
      (weight.scalar_type() != torch::kFloat32 && weight.scalar_type() != torch::kBFloat16)) {
    return weight.numel() * static_cast<int64_t>(weight.element_size());
  }
  int64_t values = 1;
  for (int64_t size : PackedFixedOrderShape(weight.size(0), weight.size(1))) values *= size;
  return values * static_cast<int64_t>(weight.element_size());
}

void WeightMatrixImpl::PackForCpu(HugePageArena& arena) {
  torch::NoGradGuard no_grad;
  if (quantized.defined() || !weight.is_cpu() || weight.dim() != 2) return;
  if (CanPackForCpu(weight, /*transposed=*/false)) {
    weight.set_data(PackBf16(
        weight, arena.Take(PackedBf16Shape(weight.size(0), weight.size(1)), torch::kBFloat16)));
  } else if (weight.scalar_type() == torch::kFloat32 ||
             weight.scalar_type() == torch::kBFloat16) {
    weight.set_data(PackFixedOrder(
        weight, arena.Take(PackedFixedOrderShape(weight.size(0), weight.size(1)),
                           weight.scalar_type())));
  } else {
    weight.set_data(arena.Take(weight.sizes().vec(), weight.scalar_type()).copy_(weight));
  }
}

torch::Tensor WeightMatrixImpl::ReluSquared(const torch::Tensor& x) {
  if (quantized.defined()) return QuantizedLinear(x, quantized, QuantizedEpilogue::kReluSquared);
  if (IsPackedBf16(weight)) return PackedBf16Product(weight, x, Bf16Epilogue::kReluSquared);
  return torch::relu(forward(x)).square();
}

torch::Tensor WeightMatrixImpl::forward(const torch::Tensor& x) {
  if (quantized.defined()) return QuantizedLinear(x, quantized);
  if (IsPackedBf16(weight)) return PackedBf16Product(weight, x);
  // On the CPU every row count, from batch-1 decode to a long prefill, goes
  // through one product with a fixed order per output: a row's bits never
  // depend on the rows around it, and a one-row call reads the weight once
  // rather than repacking it for the BLAS (engine/cpu/fixed_order_product.h).
  if (CanUseFixedOrder(x, weight)) {
    if (IsPackedFixedOrder(weight)) return FixedOrderPackedLinear(x, weight, out_);
    return FixedOrderLinear(x, weight);
  }
  return torch::linear(x.to(weight.scalar_type()), weight).to(torch::kFloat32);
}

}  // namespace linserve
