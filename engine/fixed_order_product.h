#ifndef LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_
#define LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_

// Matrix products on the CPU whose every output is summed in one fixed
// order, whatever the number of rows, the threads or the CPU's BLAS kernel
// (the order: engine/fixed_order_kernel.h). A row gets the same bits alone,
// in a prefill chunk, in a longer prefill call or in a decode batch of any
// size, which is what the prefix cache's "cold = warm" and a batch-invariant
// decode rest on (docs/DESIGN.md, "What is bit-identical"). The BLAS promises
// none of that: OpenBLAS's Haswell kernels sum a row differently with
// different row counts.
//
// Three families (engine/cpu_kernels.h): AVX-512 and AVX2 give the same
// bits, the portable one its own. The weight is read in place, (out, in)
// as stored, so every float32 or bfloat16 weight of a model can go through
// it with no copy made at load; each step multiplies 16 inputs of a row by
// 16 weights of an output row, so both are read in order.
//
// Cost against the BLAS it replaces: bench/RESULTS.md, "Fixed-order
// products". Thread-safe.

#include <torch/types.h>

namespace linserve {

// x (..., in) times weight^T: (..., out) float32. `weight` (out, in) on the
// CPU, float32 or bfloat16 (widened exactly); x any floating dtype on the
// CPU, taken as float32. A weight that is not contiguous is copied first.
torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight);

// The same for G independent groups: x (G, rows, in), weight (G, out, in)
// -> (G, rows, out).
torch::Tensor FixedOrderGroupLinear(const torch::Tensor& x, const torch::Tensor& weight);

// True when products of `x` and `weight` may go through FixedOrderLinear:
// both on the CPU, weight float32 or bfloat16, and no gradient asked for
// (training keeps LibTorch's differentiable products).
bool CanUseFixedOrder(const torch::Tensor& x, const torch::Tensor& weight);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_
