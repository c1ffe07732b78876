#ifndef LINSERVE_ENGINE_QUANTIZED_KERNEL_H_
#define LINSERVE_ENGINE_QUANTIZED_KERNEL_H_

// 8-bit and 4-bit weight matrices on the CPU: their layout, how float
// weights and activations are quantized into it, and the loops of x W^T,
// one per kernel family (AVX-512 VNNI, portable C++, and a plain reference
// loop for tests). No LibTorch here: the kernels' own files include this
// header (see engine/cpu/fixed_order_kernel.h for why).
//
// Weights. An (out, in) matrix is cut along `in` into groups of `group`
// values (32 or 64; `in` is padded with zeros to a whole group), and along
// `out` into panels of 16 outputs (padded with zero rows). Each output's
// group has one scale s, an IEEE half, and integer codes q with w ~ s q:
//   int8: q in [-127, 127], s = max|w| / 127, q = round(w / s);
//   int4: q in [-8, 7], s = m / -8 where m is the group's value of largest
//         magnitude (the first such, by index), q = clamp(round(w / s), -8, 7).
// s is rounded to half before q is computed from it; round is to nearest,
// ties to even; a group of zeros has s = 0 and q = 0.
//
// The codes are stored unsigned, q + z, with z = 128 for int8 and 8 for int4,
// because the VNNI instruction (vpdpbusd) multiplies unsigned bytes by signed
// ones: the weights are the unsigned side, the activations the signed one.
//   int8 codes: byte ((p * groups + g) * (group / 4) + j) * 64 + l * 4 + b
//     holds q[16 p + l][group g + 4 j + b] + 128 (p panel, g group, l lane).
//   int4 codes: byte ((p * groups + g) * (group / 8) + j) * 64 + l * 4 + b
//     holds q[16 p + l][group g + 8 j + b] + 8 in its low nibble and
//     q[16 p + l][group g + 8 j + 4 + b] + 8 in its high nibble.
//   scales: half bits at (p * groups + g) * 16 + l.
//
// Activations. Each row of x is quantized per group on the fly: a = max|x|
// over the group, xs = a / 127 (float), xq = round(x * (127 / a)) clamped to
// [-127, 127] (NaN counts as 0), and the group's sum of xq is kept; a group
// of zeros has xs = 0.
//
// The product, for output o of a row, in this order and no other:
//   y = 0; for g = 0, 1, ...: y = fma(float(isum_g - z * xsum_g), s[o][g] * xs_g, y)
// where isum_g is the integer sum over the group of (q + z) xq (exact in
// int32) and s * xs is rounded to float before the fused multiply-add. Then
// the epilogue (relu(y)^2 rounds max(y, 0) * max(y, 0) once). Every family
// follows it exactly, so all of them give the same bits, on any thread count
// and for any number of rows: a row gets the same output alone as in any
// batch (docs/DESIGN.md, "What is bit-identical").

#include <cstdint>

namespace linserve {

// How a weight matrix is stored. kNone: float (not in this file's layout).
enum class WeightQuantization { kNone = 0, kInt8 = 1, kInt4 = 2 };

// "int8", "int4" or "none".
const char* WeightQuantizationName(WeightQuantization kind);

// One matrix's quantized layout.
struct QuantizedShape {
  int64_t out = 0;
  int64_t in = 0;
  int64_t group = 32;  // 32 or 64
  WeightQuantization kind = WeightQuantization::kInt8;

  int64_t panels() const { return (out + 15) / 16; }
  int64_t groups() const { return (in + group - 1) / group; }
  int64_t padded_in() const { return groups() * group; }
  // Bytes of codes: panels * groups * group * 16, halved for int4.
  int64_t code_bytes() const;
  // Scales (halves): panels * groups * 16.
  int64_t scale_count() const { return panels() * groups() * 16; }
  // The code offset z.
  int32_t zero_point() const { return kind == WeightQuantization::kInt4 ? 8 : 128; }
};

// True when `shape` is one the kernels take: int8 or int4, group 32 or 64,
// out and in at least 1.
bool IsValidQuantizedShape(const QuantizedShape& shape);

// IEEE half <-> float32, exact where the value fits (round to nearest even
// on the way to half).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

// a * b + c rounded once, as std::fma, for the portable loop: without the
// FMA instruction (which that loop may not assume) std::fma calls libm's
// fmaf, about 55 ns a call here. The product is exact in double; the sum is
// rounded to odd there, which rounding to float then leaves correctly rounded.
float FusedMultiplyAdd(float a, float b, float c);

// Quantizes an (out, in) float32 matrix (w_stride floats from one output's
// row to the next) into `codes` (code_bytes()) and `scales`
// (scale_count()), the padding included. Deterministic; the weights must be
// finite and their scales must fit a half (returns false, writing nothing
// useful, on NaN or Inf, or on a magnitude past 65504 x 127 for int8 or
// 65504 x 8 for int4). A group too small for a half scale (below about
// 2^-25 x 127) is stored as zeros.
bool QuantizeWeights(const QuantizedShape& shape, const float* w, int64_t w_stride,
                     uint8_t* codes, uint16_t* scales);

// The float32 value of weight [o][k] as the codes hold it (s q), for tests
// and for error tables.
float DequantizedWeight(const QuantizedShape& shape, const uint8_t* codes,
                        const uint16_t* scales, int64_t o, int64_t k);

// Quantized activations of `rows` rows: xq (rows, padded_in) int8, xs and
// xsum (rows, groups).
struct QuantizedActivations {
  const int8_t* xq = nullptr;
  const float* xs = nullptr;
  const int32_t* xsum = nullptr;
};

// Quantizes rows of x (x_stride floats apart; `in` values each, padded with
// zeros to padded_in) into the three arrays.
void QuantizeActivations(const QuantizedShape& shape, const float* x, int64_t x_stride,
                         int64_t rows, int8_t* xq, float* xs, int32_t* xsum);
// The same, 16 values at a time with AVX-512 (the same bits; the plain loop
// cost about as much as the product at 1,024 rows). Only where
// ActiveCpuHasAvx512Vnni().
void QuantizeActivationsVnni(const QuantizedShape& shape, const float* x, int64_t x_stride,
                             int64_t rows, int8_t* xq, float* xs, int32_t* xsum);

enum class QuantizedEpilogue { kNone, kReluSquared };

struct QuantizedProductArgs {
  QuantizedShape shape;
  const uint8_t* codes = nullptr;
  const uint16_t* scales = nullptr;
  QuantizedActivations x;
  int64_t rows = 0;
  float* y = nullptr;    // rows of `shape.out` float32 results
  int64_t y_stride = 0;  // floats from one row of y to the next
  QuantizedEpilogue epilogue = QuantizedEpilogue::kNone;
};

// y for every row and the outputs of panels [panel_begin, panel_end) (the
// last panel's outputs past `out` are not stored). Thread-safe for disjoint
// panel ranges. The VNNI family only where ActiveCpuHasAvx512Vnni().
void QuantizedProductVnni(const QuantizedProductArgs& args, int64_t panel_begin,
                          int64_t panel_end);
void QuantizedProductPortable(const QuantizedProductArgs& args, int64_t panel_begin,
                              int64_t panel_end);
// One output at a time, straight from the formula above: for tests.
void QuantizedProductReference(const QuantizedProductArgs& args);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QUANTIZED_KERNEL_H_
