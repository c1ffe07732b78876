#ifndef LINSERVE_ENGINE_QUANTIZED_LINEAR_H_
#define LINSERVE_ENGINE_QUANTIZED_LINEAR_H_

// 8-bit and 4-bit weight matrices as LibTorch tensors, and their product
// with float32 activations on the CPU. The layout, the rounding and the
// order of every sum are engine/cpu/quantized_kernel.h's; the loop is the
// AVX-512 VNNI one where the CPU has it (and the kernel family in force is
// AVX-512, engine/cpu/cpu_kernels.h), else the portable one: both give the
// same bits, for any number of rows or threads. Thread-safe.

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "engine/cpu/quantized_kernel.h"

namespace linserve {

class HugePageArena;

// One quantized (out, in) matrix.
struct QuantizedWeight {
  QuantizedShape shape;
  torch::Tensor codes;   // uint8, (code_bytes), contiguous
  torch::Tensor scales;  // int16 holding IEEE half bits, (panels, groups, 16), contiguous

  bool defined() const { return codes.defined(); }
  // Bytes a product streams: codes and scales.
  int64_t bytes() const;
};

// Quantizes an (out, in) float32, bfloat16 or float16 CPU matrix. The
// tensors are pieces of `arena` when given (HugePageArena::Take), else new
// ones. Throws c10::Error on a NaN or Inf weight, or one too large for a
// half scale (QuantizeWeights), naming none (the caller names the matrix).
QuantizedWeight QuantizeWeight(const torch::Tensor& weight, WeightQuantization kind,
                               int64_t group, HugePageArena* arena = nullptr);

// Bytes QuantizeWeight takes from an arena for this shape (each piece
// rounded as the arena rounds it).
int64_t QuantizedArenaBytes(const QuantizedShape& shape);

// The float32 (out, in) matrix the codes stand for (tests, error tables).
torch::Tensor DequantizeWeight(const QuantizedWeight& weight);

// Rows `ids` (int64, any shape) of the matrix, dequantized: (..., in)
// float32. For an embedding table stored quantized: the lookup reads one
// output's codes and scales per id.
torch::Tensor DequantizeRows(const QuantizedWeight& weight, const torch::Tensor& ids);

// Checks that `codes` and `scales` fit `shape` (dtype, size, contiguity,
// scales finite): for weights read from a file. The message names what is
// wrong; empty when they fit.
std::string CheckQuantizedWeight(const QuantizedWeight& weight);

// x (..., in), any floating dtype taken as float32, times the matrix's
// transpose: (..., out) float32, through `epilogue`.
torch::Tensor QuantizedLinear(const torch::Tensor& x, const QuantizedWeight& weight,
                              QuantizedEpilogue epilogue = QuantizedEpilogue::kNone);

// True when the VNNI loop runs on this CPU (AVX-512 family in force and
// avx512_vnni). Thread-safe.
bool QuantizedProductUsesVnni();

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QUANTIZED_LINEAR_H_
