#ifndef LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_
#define LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_

// Matrix products on the CPU whose every output is summed in one fixed
// order, whatever the number of rows, the threads or the CPU's BLAS kernel
// (the order: engine/cpu/fixed_order_kernel.h). A row gets the same bits alone,
// in a prefill chunk, in a longer prefill call or in a decode batch of any
// size, which is what the prefix cache's "cold = warm" and a batch-invariant
// decode rest on (docs/DESIGN.md, "What is bit-identical"). The BLAS promises
// none of that: OpenBLAS's Haswell kernels sum a row differently with
// different row counts.
//
// Three families (engine/cpu/cpu_kernels.h): AVX-512 and AVX2 give the same
// bits, the portable one its own. The loop reads each weight value once per
// tile of rows and multiplies it by one input of each row, 16 outputs at a
// time, so it wants the weight as panels of 16 outputs: "packed", (out/16
// rounded up, in, 16), made once at load for a model's weights. An (in, out)
// matrix stored row by row (RWKV-7's low-rank ones) is already panels when
// out is a multiple of 16. Side by side with OpenBLAS: bench/RESULTS.md,
// "Fixed-order products". Thread-safe unless a class says otherwise.

#include <vector>

#include <torch/types.h>

namespace linserve {

// True when products of `x` and `weight` may go through the fixed-order
// product: both on the CPU, weight float32 or bfloat16, and no gradient
// asked for (training keeps LibTorch's differentiable products).
bool CanUseFixedOrder(const torch::Tensor& x, const torch::Tensor& weight);

// The packed shape of an (out, in) weight: (ceil(out / 16), in, 16).
std::vector<int64_t> PackedFixedOrderShape(int64_t out, int64_t in);

// (out, in) float32 or bfloat16 -> packed, in the same dtype, the outputs
// past `out` zero: written into `into` (contiguous, PackedFixedOrderShape)
// when given, else into a new tensor.
torch::Tensor PackFixedOrder(const torch::Tensor& weight, torch::Tensor into = {});

// True when `t` has the packed layout's shape and dtype (3-D, (.., .., 16),
// float32 or bfloat16).
bool IsPackedFixedOrder(const torch::Tensor& t);

// x (..., in), any floating dtype taken as float32, times the first `out`
// outputs of a packed weight: (..., out) float32.
torch::Tensor FixedOrderPackedLinear(const torch::Tensor& x, const torch::Tensor& packed,
                                     int64_t out);

// x (..., in) times m (in, out): (..., out) float32. m is read in place when
// it is contiguous and out is a multiple of 16, else packed for this call.
torch::Tensor FixedOrderInputMajorLinear(const torch::Tensor& x, const torch::Tensor& m);

// x (..., in) times weight (out, in)^T, the weight packed for this call (a
// copy of it: for weights used once, or tests; FixedOrderCachedLinear keeps
// the packed copy of a model's weight).
torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight);

// G independent products: x (G, rows, in) times weight (G, out, in)^T ->
// (G, rows, out), each weight packed for this call.
torch::Tensor FixedOrderGroupLinear(const torch::Tensor& x, const torch::Tensor& weight);

// FixedOrderLinear from a packed copy of the weight kept for the next call:
// made at the weight's first product, again whenever it changes (an in-place
// update, which LibTorch counts in the tensor's version, or another
// storage), and dropped once the weight's storage is freed. For a model's
// weights that are used in place, as (out, in) parameters (the
// transformer's, which training also updates).
torch::Tensor FixedOrderCachedLinear(const torch::Tensor& x, const torch::Tensor& weight);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FIXED_ORDER_PRODUCT_H_
