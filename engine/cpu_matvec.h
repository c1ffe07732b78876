#ifndef LINSERVE_ENGINE_CPU_MATVEC_H_
#define LINSERVE_ENGINE_CPU_MATVEC_H_

// Decode's products on the CPU without the BLAS. Batch-1 decode of a large
// model is a chain of one-row products over weights far bigger than the
// cache, so it runs at the speed memory feeds them. On the development machine
// OpenBLAS's sgemv read about 14 GB/s and bfloat16's one-row torch::linear
// (oneDNN) 9 GB/s, against 23 to 29 GB/s for a plain sum. The AVX-512 loops
// here, one row at a time with four independent accumulators, ran the 0.1B
// head 1.5 to 1.7 times as fast as sgemv, and batch-1 decode of the 0.1B
// shape went from 42.5 to about 35 ms (bench/RESULTS.md, RWKV-7). Rows are
// split over LibTorch's intra-op threads. Thread-safe.

#include <torch/types.h>

namespace linserve {

// True when CpuMatVec has a kernel for `weight_dtype` (float32 or bfloat16)
// on this CPU (it needs AVX-512F).
bool HasCpuMatVec(torch::ScalarType weight_dtype);

// `weight` (out, in) contiguous on the CPU, float32 or bfloat16; `x` (in)
// float32. Returns W x, (out) float32, the sums in float32. Only where
// HasCpuMatVec(weight.scalar_type()).
torch::Tensor CpuMatVec(const torch::Tensor& weight, const torch::Tensor& x);

// A few rows at once (batched decode): `x` (rows, in) float32 with rows in
// [1, kMaxFewRows], `weight` (out, in) contiguous float32 on the CPU.
// Returns x W^T, (rows, out). OpenBLAS packs the whole weight on every
// sgemm call, which at 32 rows ran big weights at a half to two thirds of
// this loop's rate: eight weight rows at a time, each value broadcast
// against the transposed inputs, so nothing is packed or summed across
// lanes. (bfloat16 goes through engine/cpu_bf16_product.h where the CPU
// has AVX-512 BF16, and oneDNN elsewhere: bfloat16 dot-product
// instructions beat widening to float32, which in a trial of eight rows at
// a time ran batch 32 of the 0.1B shape at about two thirds of oneDNN's
// rate.) Only where HasCpuMatVec(torch::kFloat32).
constexpr int64_t kMaxFewRows = 32;
torch::Tensor CpuFewRowsProduct(const torch::Tensor& weight, const torch::Tensor& x);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_MATVEC_H_
