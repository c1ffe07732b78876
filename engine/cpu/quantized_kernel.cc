// engine/cpu/quantized_kernel.h's shapes, half conversion, weight and
// activation quantization and reference loop, in plain C++ for every CPU
// (the activations have an AVX-512 twin in quantized_vnni.cc with the same
// bits). The half conversion is done in integers, so that its bits depend
// on no CPU or compiler; the file is compiled with -ffp-contract=off, since
// a multiply fused into the rounding's add would round differently.

#include "engine/cpu/quantized_kernel.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

bool IsFinite(float value) { return (FloatBits(value) & 0x7F800000u) != 0x7F800000u; }

// v clamped to [-limit, limit] (NaN to 0), then rounded to the nearest
// integer, ties to even. Adding and subtracting 1.5 * 2^23 rounds a float of
// magnitude below 2^22 to an integer in the current rounding mode (to
// nearest even unless a caller changed it): no call into libm, and loops of
// it vectorize.
int32_t RoundClamped(float v, float limit) {
  v = v == v ? v : 0.0f;
  v = v < -limit ? -limit : (v > limit ? limit : v);
  constexpr float kMagic = 12582912.0f;
  return static_cast<int32_t>((v + kMagic) - kMagic);
}

// The byte and shift that hold code [l][i] of one (panel, group) block.
int64_t CodeByte(const QuantizedShape& shape, int64_t i, int64_t l, int* shift) {
  if (shape.kind == WeightQuantization::kInt4) {
    *shift = (i % 8) < 4 ? 0 : 4;
    return (i / 8) * 64 + l * 4 + (i % 4);
  }
  *shift = 0;
  return (i / 4) * 64 + l * 4 + (i % 4);
}

int64_t BlockBytes(const QuantizedShape& shape) {
  return shape.kind == WeightQuantization::kInt4 ? shape.group * kPanel / 2
                                                 : shape.group * kPanel;
}

// The code q + z of output o, input k.
int32_t Code(const QuantizedShape& shape, const uint8_t* codes, int64_t o, int64_t k) {
  const int64_t block = (o / kPanel) * shape.groups() + k / shape.group;
  int shift = 0;
  const int64_t byte = CodeByte(shape, k % shape.group, o % kPanel, &shift);
  const int32_t code = codes[block * BlockBytes(shape) + byte];
  return shape.kind == WeightQuantization::kInt4 ? (code >> shift) & 0x0F : code;
}

// One output's scale and codes for one group: `w` holds the group's values
// (zeros past `in` or `out`). Returns the half bits of the scale; false in
// *ok when the scale does not fit a half.
uint16_t QuantizeGroup(const QuantizedShape& shape, const float* w, int32_t* q, bool* ok) {
  float scale_value = 0.0f;
  float limit_low = 0.0f, limit_high = 0.0f;
  if (shape.kind == WeightQuantization::kInt4) {
    // The value of largest magnitude maps to -8, so that the range's extra
    // negative step is used whichever its sign.
    float extreme = 0.0f;
    for (int64_t i = 0; i < shape.group; ++i) {
      if (std::fabs(w[i]) > std::fabs(extreme)) extreme = w[i];
    }
    scale_value = extreme / -8.0f;
    limit_low = -8.0f;
    limit_high = 7.0f;
  } else {
    float largest = 0.0f;
    for (int64_t i = 0; i < shape.group; ++i) {
      if (std::fabs(w[i]) > largest) largest = std::fabs(w[i]);
    }
    scale_value = largest / 127.0f;
    limit_low = -127.0f;
    limit_high = 127.0f;
  }
  uint16_t half = FloatToHalf(scale_value);
  const float scale = HalfToFloat(half);
  if (!IsFinite(scale)) *ok = false;
  if (scale == 0.0f || !IsFinite(scale)) {
    // Zeros (or values too small for a half scale): codes of 0 and a scale
    // of +0, whatever the sign the rounding left.
    for (int64_t i = 0; i < shape.group; ++i) q[i] = 0;
    return 0;
  }
  for (int64_t i = 0; i < shape.group; ++i) {
    const float v = w[i] / scale;
    // Clamped asymmetrically: RoundClamped's limit is symmetric.
    int32_t code = RoundClamped(v, 128.0f);
    code = code < limit_low ? static_cast<int32_t>(limit_low) : code;
    code = code > limit_high ? static_cast<int32_t>(limit_high) : code;
    q[i] = code;
  }
  return half;
}

}  // namespace

const char* WeightQuantizationName(WeightQuantization kind) {
  switch (kind) {
    case WeightQuantization::kInt8: return "int8";
    case WeightQuantization::kInt4: return "int4";
    case WeightQuantization::kNone: return "none";
  }
  return "none";
}

int64_t QuantizedShape::code_bytes() const {
  const int64_t values = panels() * groups() * group * kPanel;
  return kind == WeightQuantization::kInt4 ? values / 2 : values;
}

bool IsValidQuantizedShape(const QuantizedShape& shape) {
  return (shape.kind == WeightQuantization::kInt8 || shape.kind == WeightQuantization::kInt4) &&
         (shape.group == 32 || shape.group == 64) && shape.out >= 1 && shape.in >= 1;
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xFFu);
  const uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFF) {  // Inf, or NaN kept quiet with its top payload bits
    return mantissa == 0 ? sign | 0x7C00u
                         : static_cast<uint16_t>(sign | 0x7E00u | (mantissa >> 13));
  }
  const int32_t half_exponent = exponent - 127 + 15;
  if (half_exponent >= 31) return sign | 0x7C00u;
  if (half_exponent >= 1) {
    uint32_t half = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1FFFu;
    // A carry out of the mantissa steps the exponent, up to Inf: as it should.
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (half_exponent < -10) return sign;  // below half the smallest subnormal
  // A subnormal half: the significand with its leading one, shifted to
  // units of 2^-24.
  const uint32_t significand = mantissa | 0x800000u;
  const int shift = 14 - half_exponent;
  uint32_t half = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0) {
    // Zero or a subnormal: mantissa x 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * BitsFloat(0x33800000u);
    return BitsFloat(sign | FloatBits(magnitude));
  }
  if (exponent == 31) return BitsFloat(sign | 0x7F800000u | (mantissa << 13));
  return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

bool QuantizeWeights(const QuantizedShape& shape, const float* w, int64_t w_stride,
                     uint8_t* codes, uint16_t* scales) {
  if (!IsValidQuantizedShape(shape)) return false;
  const int64_t groups = shape.groups();
  const int32_t zero = shape.zero_point();
  const bool int4 = shape.kind == WeightQuantization::kInt4;
  bool ok = true;
  float values[64];
  int32_t q[64];
  for (int64_t p = 0; p < shape.panels(); ++p) {
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* block = codes + (p * groups + g) * BlockBytes(shape);
      std::memset(block, 0, BlockBytes(shape));
      for (int64_t l = 0; l < kPanel; ++l) {
        const int64_t o = p * kPanel + l;
        for (int64_t i = 0; i < shape.group; ++i) {
          const int64_t k = g * shape.group + i;
          values[i] = o < shape.out && k < shape.in ? w[o * w_stride + k] : 0.0f;
          if (!IsFinite(values[i])) ok = false;
        }
        scales[(p * groups + g) * kPanel + l] = QuantizeGroup(shape, values, q, &ok);
        for (int64_t i = 0; i < shape.group; ++i) {
          int shift = 0;
          const int64_t byte = CodeByte(shape, i, l, &shift);
          const uint32_t code = static_cast<uint32_t>(q[i] + zero);
          block[byte] = static_cast<uint8_t>(int4 ? block[byte] | (code << shift) : code);
        }
      }
    }
  }
  return ok;
}

float DequantizedWeight(const QuantizedShape& shape, const uint8_t* codes,
                        const uint16_t* scales, int64_t o, int64_t k) {
  const int64_t scale_index =
      ((o / kPanel) * shape.groups() + k / shape.group) * kPanel + o % kPanel;
  const float scale = HalfToFloat(scales[scale_index]);
  return scale * static_cast<float>(Code(shape, codes, o, k) - shape.zero_point());
}

void QuantizeActivations(const QuantizedShape& shape, const float* x, int64_t x_stride,
                         int64_t rows, int8_t* xq, float* xs, int32_t* xsum) {
  const int64_t groups = shape.groups(), group = shape.group, padded_in = shape.padded_in();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * x_stride;
    int8_t* row_q = xq + r * padded_in;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = g * group;
      const int64_t count = shape.in - first < group ? shape.in - first : group;
      float largest = 0.0f;
      // NaN fails the comparison: it counts as 0.
      for (int64_t i = 0; i < count; ++i) {
        const float magnitude = std::fabs(row[first + i]);
        largest = magnitude > largest ? magnitude : largest;
      }
      int32_t sum = 0;
      if (largest == 0.0f) {
        for (int64_t i = 0; i < group; ++i) row_q[first + i] = 0;
        xs[r * groups + g] = 0.0f;
      } else {
        const float inverse = 127.0f / largest;
        for (int64_t i = 0; i < count; ++i) {
          const int32_t q = RoundClamped(row[first + i] * inverse, 127.0f);
          row_q[first + i] = static_cast<int8_t>(q);
          sum += q;
        }
        for (int64_t i = count; i < group; ++i) row_q[first + i] = 0;
        xs[r * groups + g] = largest / 127.0f;
      }
      xsum[r * groups + g] = sum;
    }
  }
}

void QuantizedProductReference(const QuantizedProductArgs& args) {
  const QuantizedShape& shape = args.shape;
  const int64_t groups = shape.groups(), padded_in = shape.padded_in();
  for (int64_t r = 0; r < args.rows; ++r) {
    for (int64_t o = 0; o < shape.out; ++o) {
      float y = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0;
        for (int64_t i = 0; i < shape.group; ++i) {
          const int64_t k = g * shape.group + i;
          isum += Code(shape, args.codes, o, k) * args.x.xq[r * padded_in + k];
        }
        const int32_t exact = isum - shape.zero_point() * args.x.xsum[r * groups + g];
        const float scale = HalfToFloat(args.scales[((o / kPanel) * groups + g) * kPanel +
                                                    o % kPanel]) *
                            args.x.xs[r * groups + g];
        y = std::fma(static_cast<float>(exact), scale, y);
      }
      if (args.epilogue == QuantizedEpilogue::kReluSquared) {
        y = y > 0.0f ? y : 0.0f;
        y = y * y;
      }
      args.y[r * args.y_stride + o] = y;
    }
  }
}

}  // namespace linserve
