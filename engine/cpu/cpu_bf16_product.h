#ifndef LINSERVE_ENGINE_CPU_BF16_PRODUCT_H_
#define LINSERVE_ENGINE_CPU_BF16_PRODUCT_H_

// bfloat16 matrix products on the CPU with AVX-512 BF16 (vdpbf16ps), from a
// weight laid out once at load for that instruction, for any number of rows.
//
// Why not oneDNN, which torch::linear calls for bfloat16: it lays the weight
// out again for its kernel on every call, and its one-row product reads
// memory at a third of the machine's rate. Side by side on the 0.1B RWKV-7
// shape's weights (one thread, bench/RESULTS.md), this loop ran 32 rows at
// 185 to 228 GFLOP/s against oneDNN's 128 to 189, one row at about 2.3 times
// oneDNN's rate, and 128 rows at 165 to 228 against 151 to 212; 229 GFLOP/s
// is about the instruction's peak on that core.
//
// The layout, "packed": an (out, in) matrix becomes (out/16, in/2, 16, 2),
// so that 16 outputs' weights for two neighbouring inputs are one 64-byte
// line: one vdpbf16ps multiplies them by those two inputs of one row and adds
// into 16 float32 sums. A tile of 4 rows x 80 outputs keeps its sums in 20 registers.
//
// Rounding: the inputs are rounded to bfloat16 (as torch::linear does); the
// products and sums are float32, and so is the result (torch::linear rounds
// it to bfloat16). Each output is summed in one fixed order whatever the
// number of rows or threads, so a row gets the same bits alone as in any
// batch. Thread-safe.

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace linserve {

// True when this CPU has the AVX-512 BF16 dot product.
bool HasCpuBf16Product();

// True when an (out, in) matrix can take the packed layout: out a multiple
// of 16, in a multiple of 2.
bool CanPackBf16(int64_t out, int64_t in);

// The packed layout's shape for an (out, in) matrix: (out/16, in/2, 16, 2).
std::vector<int64_t> PackedBf16Shape(int64_t out, int64_t in);

// (out, in) bfloat16 -> the packed layout, contiguous: written into `into`
// (bfloat16, contiguous, PackedBf16Shape) when given, else into a new tensor
// in huge pages where the system grants them (engine/cpu/huge_page_tensor.h).
// Only where CanPackBf16.
torch::Tensor PackBf16(const torch::Tensor& weight, torch::Tensor into = {});

// True when `t` is in the packed layout (4-D, (.., .., 16, 2) bfloat16).
bool IsPackedBf16(const torch::Tensor& t);

// What is applied to each sum before it is stored (kReluSquared:
// max(s, 0)^2, RWKV's channel-mixing activation, for free on the way out).
enum class Bf16Epilogue { kNone, kReluSquared };

// x (..., in) float32 times the packed matrix's transpose: (..., out)
// float32, the x W^T of the matrix it was packed from, through `epilogue`.
// The loop is the AMX one where the family in force is AMX
// (engine/cpu/amx_kernel.h), else the AVX-512 one: each family has its own
// bits, fixed for the process. Only where HasCpuBf16Product.
torch::Tensor PackedBf16Product(const torch::Tensor& packed, const torch::Tensor& x,
                                Bf16Epilogue epilogue = Bf16Epilogue::kNone);

// The same through the loop named, for the benchmarks' rows side by side and
// the tests' bound between the families. kAmx only where ActiveCpuHasAmx().
enum class Bf16Loop { kAvx512, kAmx };
torch::Tensor PackedBf16ProductWith(Bf16Loop loop, const torch::Tensor& packed,
                                    const torch::Tensor& x,
                                    Bf16Epilogue epilogue = Bf16Epilogue::kNone);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_BF16_PRODUCT_H_
