#ifndef LINSERVE_ENGINE_CPU_MATVEC_H_
#define LINSERVE_ENGINE_CPU_MATVEC_H_

// One row through a weight matrix on the CPU: y = W x. Batch-1 decode of a
// large model is a chain of these over weights far bigger than the cache,
// so it runs at the speed memory feeds them. On the development machine
// OpenBLAS's sgemv read about 14 GB/s and bfloat16's one-row torch::linear
// (oneDNN) 9 GB/s, against 26 to 29 GB/s for a plain sum. The AVX-512 loops
// here, one row at a time with four independent accumulators, ran the 0.1B
// head about 1.7 times as fast as sgemv, and batch-1 decode of the 0.1B
// shape went from 42.5 to 31.8 ms (bench/RESULTS.md, RWKV-7). Rows are
// split over LibTorch's intra-op threads. Thread-safe.

#include <torch/types.h>

namespace linserve {

// True when MatVecCpu has a kernel for `weight_dtype` (float32 or bfloat16)
// on this CPU (it needs AVX-512F).
bool HasCpuMatVec(torch::ScalarType weight_dtype);

// `weight` (out, in) contiguous on the CPU, float32 or bfloat16; `x` (in)
// float32. Returns W x, (out) float32, the sums in float32. Only where
// HasCpuMatVec(weight.scalar_type()).
torch::Tensor CpuMatVec(const torch::Tensor& weight, const torch::Tensor& x);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_MATVEC_H_
